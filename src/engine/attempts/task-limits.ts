/**
 * What one client of the external-agent protocol may hold or send (DESIGN §13): long-poll
 * claims waiting at once, per token and in total (each holds a request and a waiter in memory),
 * and a rate of claims and heartbeats per token (each is a flush input). Over a limit is a
 * LimitError with when to try again. Limits per token apply to callers with a token (the HTTP
 * API with tokens); tokenless and in-process callers count toward the total only.
 */
import type { Clock } from "../../clock.js";
import { Slots } from "./slots.js";
import { TokenRate } from "./token-rate.js";

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
  private readonly requests: TokenRate;

  constructor(limits: TaskLimits, clock: Clock) {
    this.waiting = new Slots<string>(limits.waitingPerToken ?? 100, limits.waiting ?? 1000, {
      retryAfterSeconds: WAITING_RETRY_SECONDS,
      holder: (held, token) =>
        `token "${token}" already has ${held} claims waiting (the most allowed); wait for one to return, or claim without wait_seconds`,
      total: (held) => `the server already has ${held} claims waiting (the most allowed); try again shortly`,
    });
    const rate = { perSecond: limits.requestsPerSecond ?? 500, burst: limits.burst ?? 1000 };
    this.requests = new TokenRate(rate, "claims and heartbeats", () => clock.now());
  }

  /**
   * Takes one claim or heartbeat from the token's bucket.
   * @throws LimitError (client) when the token sent more than its rate allows
   */
  take(token: string | undefined): void {
    this.requests.take(token);
  }

  /**
   * Admits one long-poll claim; call the function returned when it ends.
   * @throws LimitError (client) over the token's cap, (engine) over the total
   */
  wait(token: string | undefined): () => void {
    return this.waiting.take(token ?? null);
  }
}
