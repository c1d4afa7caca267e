/**
 * What one client of the external-agent protocol may hold or send (DESIGN §13): long-poll
 * claims waiting at once, per token and in total (each holds a request and a waiter in memory),
 * and a rate of claims and heartbeats per token (each is a flush input). Over a limit is a
 * LimitError with when to try again. Limits per token apply to callers with a token (the HTTP
 * API with tokens); tokenless and in-process callers count toward the total only.
 */
import { LimitError } from "../errors.js";
import type { Clock } from "./clock.js";
import { Slots } from "./slots.js";

export interface TaskLimits {
  /** Long-poll claims (`wait_seconds` > 0) waiting at once per token; more are refused (429). @defaultValue 100 */
  waitingPerToken?: number;
  /** Long-poll claims waiting at once on this engine; more are refused (503). @defaultValue 1000 */
  waiting?: number;
  /** Claims and heartbeats per second per token, on average; more are refused (429). @defaultValue 500 */
  requestsPerSecond?: number;
  /** How many claims and heartbeats a token may send at once after a quiet spell. @defaultValue 1000 */
  burst?: number;
}

/** A waiting claim is refused this long: one ends within its wait_seconds, usually much sooner. */
const WAITING_RETRY_SECONDS = 1;

export class TaskLimiter {
  private readonly waiting: Slots<string>;
  private readonly rate: number;
  private readonly burst: number;
  /** One bucket per token name (a configured, finite set). */
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    limits: TaskLimits,
    private readonly clock: Clock,
  ) {
    this.waiting = new Slots<string>(limits.waitingPerToken ?? 100, limits.waiting ?? 1000, {
      retryAfterSeconds: WAITING_RETRY_SECONDS,
      holder: (held, token) =>
        `token "${token}" already has ${held} claims waiting (the most allowed); wait for one to return, or claim without wait_seconds`,
      total: (held) => `the server already has ${held} claims waiting (the most allowed); try again shortly`,
    });
    this.rate = limits.requestsPerSecond ?? 500;
    this.burst = limits.burst ?? 1000;
  }

  /**
   * Takes one claim or heartbeat from the token's bucket.
   * @throws LimitError (client) when the token sent more than its rate allows
   */
  take(token: string | undefined): void {
    if (token === undefined) return;
    const now = this.clock.now();
    const b = this.buckets.get(token) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + (Math.max(0, now - b.at) * this.rate) / 1000);
    b.at = now;
    this.buckets.set(token, b);
    if (b.tokens < 1) {
      const seconds = Math.max(1, Math.ceil((1 - b.tokens) / this.rate));
      throw new LimitError(
        `token "${token}" sent more than ${this.rate} claims and heartbeats a second; slow down and retry after ${seconds} s`,
        "client",
        seconds,
      );
    }
    b.tokens -= 1;
  }

  /**
   * Admits one long-poll claim; call the function returned when it ends.
   * @throws LimitError (client) over the token's cap, (engine) over the total
   */
  wait(token: string | undefined): () => void {
    return this.waiting.take(token ?? null);
  }
}
