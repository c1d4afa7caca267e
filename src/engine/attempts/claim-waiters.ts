/**
 * The long poll of external claims (DESIGN §5): a claim that found nothing waits until a flush
 * leaves visits of its agent types ready, another engine says so, or its poll interval passes.
 */
import type { Clock } from "../../clock.js";

interface Waiter {
  types: ReadonlySet<string>;
  wake(): void;
}

export class ClaimWaiters {
  private readonly waiters = new Set<Waiter>();

  constructor(private readonly clock: Clock) {}

  /** Wakes the claims waiting for any of these agent types (`*`: all). */
  readyWaiting(agentTypes: string[]): void {
    for (const w of this.waiters) {
      if (agentTypes.some((t) => t === "*" || w.types.has(t))) w.wake();
    }
  }

  /** Resolves when a flush leaves visits of these types ready, or after `ms`. */
  waitFor(types: ReadonlySet<string>, ms: number): { done: Promise<void>; cancel(): void } {
    let wake!: () => void;
    const done = new Promise<void>((resolve) => {
      wake = resolve;
    });
    const timer = this.clock.setTimeout(() => w.wake(), Math.max(0, ms));
    const w: Waiter = {
      types,
      wake: () => {
        this.waiters.delete(w);
        this.clock.clearTimeout(timer);
        wake();
      },
    };
    this.waiters.add(w);
    return { done, cancel: () => w.wake() };
  }
}
