/**
 * A run's live events from `GET /v1/stream?run_id=...` (Server-Sent Events), read with fetch
 * (an EventSource cannot send the Authorization header) and parsed by eventsource-parser. The
 * subscription remembers the last `id:` it saw and, after a disconnect or a network error,
 * reconnects with it as `Last-Event-ID` (after a capped, growing wait): the server replays from
 * just after it, so each stored event arrives once and in order. Cursors are opaque strings.
 */
import { createParser } from "eventsource-parser";
import { errorOf, SkeinApiError } from "./errors.js";
import type { StreamEvent } from "./types.js";

export interface SubscribeOptions {
  /** Start just after this event (an `id` an earlier subscription reported): what follows it, then live events. */
  cursor?: string;
  /** Replay the run's whole stream first, then live events. @defaultValue false: live events only */
  fromStart?: boolean;
  /** Told whenever the stream opens (true) or drops (false): a live view's "connected" mark. */
  onConnection?: (connected: boolean) => void;
  /**
   * Told of each failure. `fatal`: the server refused the stream for good (401, 403, 404, 400)
   * and the subscription has ended; otherwise it reconnects by itself. An error thrown by
   * `onEvent` comes here too (not fatal: the stream goes on); without onError it is thrown
   * again outside the stream, as an uncaught error.
   */
  onError?: (error: Error, fatal: boolean) => void;
  /**
   * Longest wait between reconnections, ms (the wait doubles from 250 ms up to it); a server's
   * Retry-After (429, 503) is waited in full. @defaultValue 5000
   */
  maxRetryMs?: number;
  /**
   * A stream silent this long is taken for dead and reopened, ms: the server sends a comment every
   * 15 s, so only a connection lost without a word (a sleeping laptop) goes this quiet. @defaultValue 45000
   */
  idleMs?: number;
  /** Ends the subscription, as `close()` does. */
  signal?: AbortSignal;
}

export interface Subscription {
  /** Ends the subscription: no event is delivered after it returns. */
  close(): void;
  /** The `id` of the last stored event delivered: pass it as `cursor` to resume elsewhere. */
  readonly cursor: string | undefined;
}

/** What subscribe needs of the client. */
export interface StreamSource {
  headers(): Record<string, string>;
  url(path: string): string;
  readonly fetch: typeof fetch;
}

const FIRST_RETRY_MS = 250;
/** Refusals that another try would meet again. */
const FATAL = new Set([400, 401, 403, 404]);

/** See {@link SkeinClient.subscribe}; a plain function for callers that hold only a StreamSource. */
export function subscribe(
  source: StreamSource,
  runId: string,
  onEvent: (event: StreamEvent) => void,
  options: SubscribeOptions = {},
): Subscription {
  const maxRetryMs = options.maxRetryMs ?? 5000;
  const idleMs = options.idleMs ?? 45_000;
  let cursor = options.cursor;
  let closed = false;
  let retryMs = FIRST_RETRY_MS;
  let connection: AbortController | null = null;
  let timer: ReturnType<typeof setTimeout> | null = null;

  const close = () => {
    if (closed) return;
    closed = true;
    if (timer !== null) clearTimeout(timer);
    timer = null;
    connection?.abort();
    options.signal?.removeEventListener("abort", close);
  };
  if (options.signal?.aborted) closed = true;
  options.signal?.addEventListener("abort", close, { once: true });

  const streamUrl = () => {
    const query = new URLSearchParams({ run_id: runId });
    // Resuming: the Last-Event-ID header names the cursor. The first connection says where to start.
    if (cursor === undefined && options.fromStart) query.set("from", "start");
    return source.url(`/v1/stream?${query}`);
  };

  const connect = async (): Promise<void> => {
    const controller = new AbortController();
    connection = controller;
    let idle: ReturnType<typeof setTimeout> | null = null;
    const stillAlive = () => {
      if (idle !== null) clearTimeout(idle);
      idle = setTimeout(() => controller.abort(), idleMs);
    };
    let opened = false;
    /** What the server asked to wait (Retry-After on 429 and 503), ms: honoured whatever maxRetryMs says. */
    let asked = 0;
    try {
      const res = await source.fetch(streamUrl(), {
        headers: {
          accept: "text/event-stream",
          ...source.headers(),
          ...(cursor === undefined ? {} : { "last-event-id": cursor }),
        },
        signal: controller.signal,
      });
      if (!res.ok || res.body === null) {
        const error = res.ok
          ? new SkeinApiError(res.status, "unexpected_response", "no stream body")
          : await errorOf(res);
        if (FATAL.has(res.status)) {
          close();
          options.onError?.(error, true);
          return;
        }
        throw error;
      }
      opened = true;
      retryMs = FIRST_RETRY_MS;
      options.onConnection?.(true);
      stillAlive();
      const parser = createParser({
        onEvent: (message) => {
          if (closed) return;
          let event: StreamEvent;
          try {
            event = JSON.parse(message.data) as StreamEvent;
          } catch {
            return; // not an event of the API: nothing to deliver
          }
          if (message.id !== undefined && message.id !== "") cursor = message.id;
          try {
            onEvent(event);
          } catch (e) {
            // The listener's own failure is not the stream's: it goes on, and the error is told.
            const error = e instanceof Error ? e : new Error(String(e));
            if (options.onError) options.onError(error, false);
            else
              queueMicrotask(() => {
                throw error;
              });
          }
        },
      });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done || closed) break;
        stillAlive();
        parser.feed(value);
      }
      if (closed) await reader.cancel().catch(() => {});
    } catch (e) {
      if (closed) return;
      options.onError?.(e instanceof Error ? e : new Error(String(e)), false);
      if (e instanceof SkeinApiError && e.retryAfter !== undefined) asked = e.retryAfter * 1000;
    } finally {
      if (idle !== null) clearTimeout(idle);
      if (opened && !closed) options.onConnection?.(false);
    }
    if (closed) return;
    // The server ended the stream or the network dropped it: again, after a wait that grows.
    // Jittered, so that the clients of a restarted server do not all come back at once.
    const wait = Math.max(asked, Math.min(retryMs, maxRetryMs) * (0.5 + Math.random() / 2));
    retryMs = Math.min(retryMs * 2, maxRetryMs);
    timer = setTimeout(() => {
      timer = null;
      if (!closed) void connect();
    }, wait);
  };

  if (!closed) void connect();
  return {
    close,
    get cursor() {
      return cursor;
    },
  };
}
