/**
 * Notifiers (DESIGN §5, §9): webhooks and a function hook called on the events people act on.
 * `notify` only enqueues; delivery runs after it, with retries on the engine's Clock, and its
 * failures never reach the engine: a notification that fails for good is logged and recorded as
 * a `notify.failed` event. On `stop()` (engine close) pending retries and requests in flight are
 * abandoned: notifications are at most best-effort across a close or a crash.
 */
import type { Logger } from "pino";
import type { Clock, TimerHandle } from "../../clock.js";
import type { EventType, Json, RunEvent } from "../../core/types.js";
import { randomHex } from "../../ids.js";

/** One notification: a committed event, as webhooks receive it (JSON body) and the hook gets it. */
export interface Notification {
  type: "review.requested" | "run.failed" | "run.needs_attention";
  run_id: string;
  node_id: string | null;
  visit: number | null;
  trace_id: string;
  /** When the event was recorded, ISO 8601. */
  at: string;
  data: Record<string, Json>;
  /** On `review.requested` when the engine has a `publicUrl`: where the HTTP API takes the decision (POST). */
  review_url?: string;
}

export interface NotifyOptions {
  /** URLs that each notification is POSTed to as JSON, with a W3C `traceparent` header. */
  webhooks?: string[];
  /** Called with each notification; a throw (or rejection) is retried like a failed webhook. */
  hook?: (n: Notification) => void | Promise<void>;
  /** Retries after the first try, with backoff 1 s, 2 s, 4 s ... capped at 60 s. @defaultValue 5 */
  retries?: number;
  /** Timeout of one webhook request, ms. @defaultValue 5000 */
  timeoutMs?: number;
}

export interface NotifierDeps {
  options: NotifyOptions;
  clock: Clock;
  logger: Logger;
  /** The HTTP API's address as people reach it; review requests then carry their `review_url`. */
  publicUrl?: string;
  /** Records the `notify.failed` event of a notification that failed for good. */
  recordFailure: (runId: string, traceId: string, data: Record<string, Json>) => Promise<void>;
}

const NOTIFY: ReadonlySet<EventType> = new Set<EventType>(["review.requested", "run.failed", "run.needs_attention"]);
const MAX_BACKOFF_MS = 60_000;

/** The `hook` target's name in logs and `notify.failed` events (webhooks are named by URL). */
export const HOOK_TARGET = "hook";

export class Notifier {
  private readonly timers = new Set<TimerHandle>();
  private readonly inFlight = new Set<AbortController>();
  private stopped = false;

  constructor(private readonly d: NotifierDeps) {}

  /** Enqueues the notifications of these committed events; returns at once. */
  notify(events: readonly RunEvent[]): void {
    if (this.stopped) return;
    for (const e of events) {
      if (!NOTIFY.has(e.type)) continue;
      const n: Notification = {
        type: e.type as Notification["type"],
        run_id: e.run_id,
        node_id: e.node_id,
        visit: e.visit,
        trace_id: e.trace_id,
        at: new Date(e.at).toISOString(),
        data: e.data,
        ...this.reviewUrl(e),
      };
      // One span id per notification: its requests' traceparent and its log lines carry it.
      const spanId = randomHex(8);
      for (const url of this.d.options.webhooks ?? []) this.attempt(n, spanId, url, 1);
      if (this.d.options.hook) this.attempt(n, spanId, HOOK_TARGET, 1);
    }
  }

  /** Stops retrying and aborts requests in flight; later notifications are dropped. */
  stop(): void {
    this.stopped = true;
    for (const t of this.timers) this.d.clock.clearTimeout(t);
    this.timers.clear();
    for (const c of this.inFlight) c.abort();
    this.inFlight.clear();
  }

  private reviewUrl(e: RunEvent): { review_url?: string } {
    const base = this.d.publicUrl?.replace(/\/+$/, "");
    if (!base || e.type !== "review.requested" || e.node_id === null) return {};
    const path = `/v1/runs/${encodeURIComponent(e.run_id)}/nodes/${encodeURIComponent(e.node_id)}/review`;
    return { review_url: base + path };
  }

  /** Tries one target once, after the caller returns; on failure arms a retry or records the failure. */
  private attempt(n: Notification, spanId: string, target: string, attempt: number): void {
    Promise.resolve()
      .then(() => this.send(n, spanId, target))
      .then(
        () => undefined,
        (err: unknown) => this.failed(n, spanId, target, attempt, err),
      );
  }

  private failed(n: Notification, spanId: string, target: string, attempt: number, err: unknown): void {
    if (this.stopped) return;
    const retries = this.d.options.retries ?? 5;
    const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : "";
    const error = err instanceof Error ? err.message + cause : String(err);
    if (attempt <= retries) {
      const delay = Math.min(1000 * 2 ** (attempt - 1), MAX_BACKOFF_MS);
      const ids = { run_id: n.run_id, trace_id: n.trace_id, span_id: spanId };
      this.d.logger.debug({ ...ids, target, attempt, error }, "skein: notify retry");
      const timer = this.d.clock.setTimeout(() => {
        this.timers.delete(timer);
        if (!this.stopped) this.attempt(n, spanId, target, attempt + 1);
      }, delay);
      this.timers.add(timer);
      return;
    }
    const data = { target, type: n.type, error, attempts: attempt };
    const ids = { run_id: n.run_id, trace_id: n.trace_id, span_id: spanId };
    this.d.logger.warn({ ...ids, ...data }, "skein: notification failed for good");
    this.d.recordFailure(n.run_id, n.trace_id, data).catch((e: unknown) => {
      this.d.logger.error({ err: e, run_id: n.run_id }, "skein: could not record notify.failed");
    });
  }

  private async send(n: Notification, spanId: string, target: string): Promise<void> {
    if (target === HOOK_TARGET) {
      await this.d.options.hook?.(n);
      return;
    }
    const controller = new AbortController();
    this.inFlight.add(controller);
    try {
      const res = await fetch(target, {
        method: "POST",
        headers: { "content-type": "application/json", traceparent: `00-${n.trace_id}-${spanId}-01` },
        body: JSON.stringify(n),
        signal: AbortSignal.any([controller.signal, AbortSignal.timeout(this.d.options.timeoutMs ?? 5000)]),
      });
      await res.body?.cancel(); // frees the connection; the answer's body is not read
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
    } finally {
      this.inFlight.delete(controller);
    }
  }
}
