/**
 * What one client can hold on the server (DESIGN §13): open event streams, per token and in
 * total, and how long a connection may take to send a request or sit idle. Every live stream
 * costs each committed event a write, so 10,000 of them slowed runs 130 times: the caps bound it.
 */
import { LimitError } from "../errors.js";

export interface ServerLimits {
  /** Event streams (GET /v1/stream) one token may hold open; more are 429. @defaultValue 20 */
  streamsPerToken?: number;
  /** Event streams open in all; more are 503. @defaultValue 500 */
  streams?: number;
  /**
   * Time to receive a whole request (headers and body), ms; then 408. Answers may take longer
   * (a long-poll claim, an event stream). @defaultValue 30000
   */
  requestTimeoutMs?: number;
  /** Time to receive a request's headers, ms (at most requestTimeoutMs); then 408. @defaultValue 10000 */
  headersTimeoutMs?: number;
  /** A kept-alive connection with no request for this long is closed, ms. @defaultValue 5000 */
  keepAliveTimeoutMs?: number;
  /**
   * A connection with no traffic either way for this long is closed, ms: longer than the longest
   * long poll (30 s) and the event streams' heartbeat (15 s), which keep theirs busy. @defaultValue 60000
   */
  idleTimeoutMs?: number;
}

export const DEFAULT_LIMITS: Required<ServerLimits> = {
  streamsPerToken: 20,
  streams: 500,
  requestTimeoutMs: 30_000,
  headersTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  idleTimeoutMs: 60_000,
};

/** How long a refused stream is told to wait before trying again, s. */
const RETRY_AFTER_SECONDS = 5;

/** Counts open event streams by holder: the token (its one Principal object); an open API has none. */
export class StreamSlots {
  private total = 0;
  private readonly byHolder = new Map<object, number>();

  constructor(
    private readonly perHolder: number,
    private readonly max: number,
  ) {}

  /**
   * Takes a slot for `holder` (null: no per-token cap, the API is open).
   * @returns the function that gives it back (call it once, when the stream closes)
   * @throws LimitError: `client` (429) over the holder's cap, `engine` (503) over the total
   */
  take(holder: object | null): () => void {
    const held = holder === null ? 0 : (this.byHolder.get(holder) ?? 0);
    if (holder !== null && held >= this.perHolder) {
      throw new LimitError(
        `this token already holds ${held} event streams (the limit is ${this.perHolder}): close one, or share one stream for all runs`,
        "client",
        RETRY_AFTER_SECONDS,
      );
    }
    if (this.total >= this.max) {
      throw new LimitError(
        `the server holds its limit of ${this.max} event streams; try again shortly`,
        "engine",
        RETRY_AFTER_SECONDS,
      );
    }
    this.total += 1;
    if (holder !== null) this.byHolder.set(holder, held + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.total -= 1;
      if (holder === null) return;
      const left = (this.byHolder.get(holder) ?? 1) - 1;
      if (left === 0) this.byHolder.delete(holder);
      else this.byHolder.set(holder, left);
    };
  }
}
