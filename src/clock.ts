/**
 * All engine time comes from a Clock, so tests of timeouts, backoff and TTLs advance time
 * instead of sleeping. Times are epoch milliseconds.
 */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export type TimerHandle = { readonly id: number } | NodeJS.Timeout;

/**
 * The longest delay Node's timers hold (about 24.8 days); a longer one would fire at once, and a
 * 30-day sleep would wake the engine in a loop. Capped, the timer fires early and the sweep it
 * runs arms the next one.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

export const systemClock: Clock = {
  now: () => Date.now(),
  // Not unref'd: a waiting retry or deadline must keep the process alive, as an open engine should.
  setTimeout: (fn, ms) => setTimeout(fn, Math.min(MAX_TIMER_MS, Math.max(0, ms))),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

interface ManualTimer {
  id: number;
  due: number;
  fn: () => void;
}

/**
 * A clock that only moves when told to. `advance(ms)` fires due timers in time order, letting
 * the engine's promises settle between them.
 * @example const clock = new ManualClock(); ...; await clock.advance(30_000);
 */
export class ManualClock implements Clock {
  private current: number;
  private timers: ManualTimer[] = [];
  private nextId = 1;

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const timer = { id: this.nextId++, due: this.current + Math.max(0, ms), fn };
    this.timers.push(timer);
    return { id: timer.id };
  }

  clearTimeout(handle: TimerHandle): void {
    const id = (handle as { id: number }).id;
    this.timers = this.timers.filter((t) => t.id !== id);
  }

  /** @internal the due time of the earliest timer set and not fired, or null (the test harness skips to it) */
  nextTimerAt(): number | null {
    let at: number | null = null;
    for (const t of this.timers) if (at === null || t.due < at) at = t.due;
    return at;
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way, in order. */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    for (;;) {
      await settle();
      const next = this.timers.filter((t) => t.due <= target).sort((a, b) => a.due - b.due || a.id - b.id)[0];
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.current = Math.max(this.current, next.due);
      next.fn();
    }
    this.current = target;
    await settle();
  }
}

/** Lets pending promise callbacks and immediates run. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
