/**
 * What one client can hold on the server (DESIGN §13): open event streams, per token and in
 * total, and how long a connection may take to send a request or sit idle. Every live stream
 * costs each committed event a write, so 10,000 of them slowed runs 130 times: the caps bound it.
 */
import { Slots } from "../engine/attempts/slots.js";
import type { Rate } from "../engine/attempts/token-rate.js";

/** A rate per token: `perSecond` on average, up to `burst` at once after a quiet spell. */
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
  /**
   * A kept-alive connection with no request for this long is closed, ms. Longer than the clients
   * that reuse connections keep them idle (undici's fetch 4 s, load balancers 60 s; Node's agents
   * and undici follow the `Keep-Alive: timeout=72` the server sends, less a second): a client must
   * give up a connection before the server closes it, or its next request may meet the close
   * (ECONNRESET). Closing the server does not wait for it. @defaultValue 72000
   */
  keepAliveTimeoutMs?: number;
  /**
   * A connection with no traffic either way for this long while a request is open is closed, ms:
   * longer than the longest long poll (30 s) and the event streams' heartbeat (15 s), which keep
   * theirs busy. Between requests keepAliveTimeoutMs applies instead. @defaultValue 60000
   */
  idleTimeoutMs?: number;
  /**
   * Runs a token may start (POST /v1/runs) and retry (POST /v1/runs/{id}/retry); more are 429
   * with Retry-After. @defaultValue { perSecond: 50, burst: 200 }
   */
  startRate?: Rate;
  /**
   * Events a token may send or publish (POST /v1/runs/{id}/events, POST /v1/events); more are 429.
   * @defaultValue { perSecond: 100, burst: 500 }
   */
  eventRate?: Rate;
  /**
   * Progress posts a token may send (POST /v1/tasks/{execution_id}/progress, every worker of the
   * token together); more are 429. Progress is also throttled per attempt (progressIntervalMs).
   * @defaultValue { perSecond: 200, burst: 1000 }
   */
  progressRate?: Rate;
}

export const DEFAULT_LIMITS: Required<ServerLimits> = {
  streamsPerToken: 20,
  streams: 500,
  requestTimeoutMs: 30_000,
  headersTimeoutMs: 10_000,
  keepAliveTimeoutMs: 72_000,
  idleTimeoutMs: 60_000,
  startRate: { perSecond: 50, burst: 200 },
  eventRate: { perSecond: 100, burst: 500 },
  progressRate: { perSecond: 200, burst: 1000 },
};

/** How long a refused stream is told to wait before trying again, s. */
const RETRY_AFTER_SECONDS = 5;

/** Open event streams by holder: the token (its one Principal object); an open API has none. */
export function streamSlots(perToken: number, max: number): Slots<object> {
  return new Slots<object>(perToken, max, {
    retryAfterSeconds: RETRY_AFTER_SECONDS,
    holder: (held) =>
      `this token already holds ${held} event streams (the limit is ${perToken}): close one, or share one stream for all runs`,
    total: () => `the server holds its limit of ${max} event streams; try again shortly`,
  });
}
