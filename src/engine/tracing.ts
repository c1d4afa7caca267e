/**
 * OpenTelemetry traces (DESIGN §9) through `@opentelemetry/api`: a no-op until the host registers
 * an SDK. A run's row stores its traceparent: the span context of its `skein.run.start` span (or,
 * without an SDK, the caller's, or a new one). Every later span of the run (its attempts, its end)
 * is a child of that stored context, in whichever process makes it, so a run that outlives an
 * engine stays in one trace.
 */
import { createRequire } from "node:module";
import {
  type Attributes,
  type Context,
  context,
  isSpanContextValid,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import type { Json, Run, RunEvent } from "../core/types.js";
import { randomHex } from "./ids.js";
import type { ClaimedTask } from "./inputs.js";

const VERSION = (createRequire(import.meta.url)("../../package.json") as { version: string }).version;

/** Asked each time: a host may register (or replace) its SDK after the engine is created. */
function tracer(): Tracer {
  return trace.getTracer("skein", VERSION);
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The span context of a valid W3C traceparent (as a remote parent), else null (invalid headers are ignored, as the spec says). */
export function parseTraceparent(traceparent: string | undefined | null): SpanContext | null {
  const m = traceparent ? TRACEPARENT.exec(traceparent.trim()) : null;
  if (!m || m[1] === "ff") return null;
  const sc: SpanContext = {
    traceId: m[2] as string,
    spanId: m[3] as string,
    traceFlags: Number.parseInt(m[4] as string, 16) & 1,
    isRemote: true,
  };
  return isSpanContextValid(sc) ? sc : null;
}

export function formatTraceparent(sc: SpanContext): string {
  return `00-${sc.traceId}-${sc.spanId}-0${sc.traceFlags & 1}`;
}

/** The span id of a traceparent, for log lines. */
export function spanIdOf(traceparent: string): string {
  return traceparent.split("-")[2] ?? "";
}

/** A stored traceparent as the parent context of a span (the root when it is not valid). */
function parentOf(traceparent: string): Context {
  const sc = parseTraceparent(traceparent);
  return sc ? trace.setSpanContext(ROOT_CONTEXT, sc) : ROOT_CONTEXT;
}

/** A span's context as a traceparent; a new one in `traceId` when the span has none (no SDK, no parent). */
function traceparentOf(span: Span, traceId?: string): string {
  const sc = span.spanContext();
  return isSpanContextValid(sc) ? formatTraceparent(sc) : `00-${traceId ?? randomHex(16)}-${randomHex(8)}-01`;
}

/**
 * Starts a run inside its short `skein.run.start` span, child of the caller's `traceparent`,
 * else of the caller's active context. `start` gets the span's context as the run's
 * traceparent; the span ends when the start commits (or is refused).
 */
export async function inRunStartSpan(
  workflowId: string,
  callerTraceparent: string | undefined,
  start: (traceparent: string) => Promise<Run>,
): Promise<Run> {
  const remote = parseTraceparent(callerTraceparent);
  const parent = remote ? trace.setSpanContext(ROOT_CONTEXT, remote) : context.active();
  const span = tracer().startSpan("skein.run.start", { attributes: { "skein.workflow_id": workflowId } }, parent);
  try {
    const run = await start(traceparentOf(span));
    span.setAttributes({ "skein.run_id": run.run_id, "skein.workflow_version": run.workflow_version });
    return run;
  } catch (e) {
    span.recordException(e instanceof Error ? e : String(e));
    span.setStatus({ code: SpanStatusCode.ERROR, message: e instanceof Error ? e.message : String(e) });
    throw e;
  } finally {
    span.end();
  }
}

/** The short span of a run's end (run.succeeded, run.failed, run.cancelled), after it committed. */
export function runEndSpan(run: Pick<Run, "run_id" | "workflow_id" | "traceparent" | "status" | "error">): void {
  const attributes = { "skein.run_id": run.run_id, "skein.workflow_id": run.workflow_id, "skein.status": run.status };
  const span = tracer().startSpan("skein.run.end", { attributes }, parentOf(run.traceparent));
  if (run.status === "FAILED") span.setStatus({ code: SpanStatusCode.ERROR, message: messageOf(run.error) });
  span.end();
}

/** Open attempt spans kept at most; the oldest is ended (outcome `unknown`) beyond. */
const MAX_OPEN = 10_000;

/** Event types that end an attempt, and the outcome each gives its span. */
const ENDS: Partial<Record<RunEvent["type"], string>> = {
  "node.succeeded": "succeeded",
  "node.failed": "failed",
  "node.retrying": "retrying",
  "node.cancelled": "cancelled",
  "node.interrupted": "interrupted",
  "compensation.succeeded": "succeeded",
  "compensation.failed": "failed",
  "compensation.retrying": "retrying",
};

/**
 * The `skein.attempt` spans this engine opened, in process and for external workers. An attempt
 * span ends when the event that ends its attempt commits (the outcome the flush decided:
 * succeeded, failed, retrying, timeout, lease_expired, cancelled), not when a handler returns.
 * A report that another engine applies (PostgreSQL) leaves the span open here until this engine
 * closes (outcome `unknown`).
 */
export class AttemptSpans {
  private readonly open = new Map<string, Span>();

  /**
   * Starts an attempt's span, child of its run's traceparent (`holder`: an external worker's);
   * answers it and its traceparent for the task.
   */
  start(task: ClaimedTask, holder?: string): { span: Span; traceparent: string } {
    const attributes: Attributes = {
      "skein.run_id": task.run_id,
      "skein.node_id": task.node_id,
      "skein.visit": task.visit,
      "skein.attempt": task.attempt,
      "skein.execution_id": task.execution_id,
      "skein.agent_type": task.agent_type,
      ...(holder === undefined ? {} : { "skein.holder": holder }),
    };
    const span = tracer().startSpan("skein.attempt", { attributes }, parentOf(task.run_traceparent));
    const key = `${task.execution_id}#${task.attempt}`;
    this.open.get(key)?.end(); // the same attempt claimed again (a lost commit given back): one span
    this.open.set(key, span);
    if (this.open.size > MAX_OPEN) this.endOne(this.open.keys().next().value as string, "unknown");
    return { span, traceparent: traceparentOf(span, task.trace_id) };
  }

  /** Runs `fn` (a handler) with the span active: the handler's own spans nest under it. */
  within<T>(span: Span, fn: () => T): T {
    return context.with(trace.setSpan(ROOT_CONTEXT, span), fn);
  }

  /** Ends the spans of the attempts these committed events end. */
  ended(events: readonly RunEvent[]): void {
    if (this.open.size === 0) return;
    for (const e of events) {
      const outcome = ENDS[e.type];
      if (outcome === undefined || e.node_id === null) continue;
      const executionId =
        typeof e.data.execution_id === "string" ? e.data.execution_id : `${e.run_id}:${e.node_id}:${e.visit}`;
      const span = this.open.get(`${executionId}#${e.data.attempt}`);
      if (!span) continue;
      const error = e.data.error as { message?: Json; reason?: Json } | undefined;
      const reason = typeof error?.reason === "string" ? error.reason : null;
      const timedOut = reason === "timeout" || reason === "lease_expired";
      span.setAttribute("skein.outcome", timedOut && reason ? reason : outcome);
      if (reason) span.setAttribute("skein.error_reason", reason);
      if (error) span.setStatus({ code: SpanStatusCode.ERROR, message: messageOf(error) });
      this.endOne(`${executionId}#${e.data.attempt}`, null);
    }
  }

  /** Ends every open span (the engine closes): their outcome is not known here. */
  endAll(): void {
    for (const key of [...this.open.keys()]) this.endOne(key, "unknown");
  }

  private endOne(key: string, outcome: string | null): void {
    const span = this.open.get(key);
    if (!span) return;
    this.open.delete(key);
    if (outcome) span.setAttribute("skein.outcome", outcome);
    span.end();
  }
}

function messageOf(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === "string" ? message : "";
}
