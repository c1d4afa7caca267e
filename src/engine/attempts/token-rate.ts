/**
 * A token bucket per API token (by name: a configured, finite set), for one kind of request:
 * claims and heartbeats (DESIGN §13), starting runs, publishing events, posting progress
 * (DESIGN §13.1). Callers without a token (an API without tokens, in-process) are not limited.
 */
import { LimitError } from "../../errors.js";

export interface Rate {
  perSecond: number;
  /** @defaultValue twice perSecond (at least 1) */
  burst?: number;
}

/** One kind of request's buckets, one a token. */
export class TokenRate {
  private readonly perSecond: number;
  private readonly burst: number;
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    rate: Rate,
    /** What the refusal says was sent too often ("run starts"). */
    private readonly what: string,
    private readonly now: () => number = Date.now,
  ) {
    this.perSecond = rate.perSecond;
    this.burst = rate.burst ?? Math.max(1, rate.perSecond * 2);
  }

  /**
   * Takes one request from the token's bucket.
   * @throws LimitError (client: 429 with Retry-After) when the token sent more than its rate allows
   */
  take(token: string | undefined): void {
    if (token === undefined) return;
    const now = this.now();
    const b = this.buckets.get(token) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + (Math.max(0, now - b.at) * this.perSecond) / 1000);
    b.at = now;
    this.buckets.set(token, b);
    if (b.tokens < 1) {
      const seconds = Math.max(1, Math.ceil((1 - b.tokens) / this.perSecond));
      throw new LimitError(
        `token "${token}" sent more than ${this.perSecond} ${this.what} a second (a burst of ${this.burst}); slow down and retry after ${seconds} s`,
        "client",
        seconds,
      );
    }
    b.tokens -= 1;
  }
}
