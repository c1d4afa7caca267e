/**
 * OpenTelemetry traces (DESIGN §9) through `@opentelemetry/api`: a no-op until the host registers
 * an SDK. A run's row stores its traceparent: the span context of its `skein.run.start` span (or,
 * without an SDK, the caller's, or a new one). Every later span of the run (run-spans.ts: its
 * attempts, held visits, its end) is a child of that stored context, in whichever process makes
 * it, so a run that outlives an engine stays in one trace. Here: the tracer, traceparent <->
 * SpanContext, and the run's start and end spans.
 */
import { createRequire } from "node:module";
import {
  type Context,
  context,
  isSpanContextValid,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanStatusCode,
  type Tracer,
  type TracerProvider,
  trace,
} from "@opentelemetry/api";
import type { Run } from "../../core/types.js";
import { randomHex } from "../../ids.js";

const VERSION = (createRequire(import.meta.url)("../../../package.json") as { version: string }).version;

let cached: { provider: TracerProvider; tracer: Tracer } | null = null;

/** Skein's tracer of the provider registered now: a host may register (or replace) its SDK after the engine starts. */
export function tracer(): Tracer {
  const provider = trace.getTracerProvider();
  if (cached?.provider !== provider) cached = { provider, tracer: provider.getTracer("skein", VERSION) };
  return cached.tracer;
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

/** A stored traceparent as the parent context of a span (the root when it is not valid). */
export function parentOf(traceparent: string): Context {
  const sc = parseTraceparent(traceparent);
  return sc ? trace.setSpanContext(ROOT_CONTEXT, sc) : ROOT_CONTEXT;
}

/** Runs `fn` with a traceparent (a worker's task's) as the active parent: the spans it makes nest under it. */
export function withRemoteParent<T>(traceparent: string, fn: () => T): T {
  return context.with(parentOf(traceparent), fn);
}

/** A span's context as a traceparent; a new one in `traceId` when the span has none (no SDK, no parent). */
export function traceparentOf(span: Span, traceId?: string): string {
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

/**
 * A durable step that runs (DESIGN §14.1): `skein.step`, child of the active context (the
 * attempt's span in process, its remote parent in a worker), around its function and its record.
 * A replayed step runs nothing and has none.
 */
export async function inStepSpan<T>(
  at: { execution_id: string; attempt: number; name: string },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const attributes = { "skein.execution_id": at.execution_id, "skein.attempt": at.attempt, "skein.step": at.name };
  return tracer().startActiveSpan("skein.step", { attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (e) {
      // No message: a step's error may carry a secret's value, and spans leave the engine.
      span.setStatus({ code: SpanStatusCode.ERROR });
      throw e;
    } finally {
      span.end();
    }
  });
}

/** The short span of a run's end (run.succeeded, run.failed, run.cancelled), after it committed. */
export function runEndSpan(run: Pick<Run, "run_id" | "workflow_id" | "traceparent" | "status" | "error">): void {
  const attributes = { "skein.run_id": run.run_id, "skein.workflow_id": run.workflow_id, "skein.status": run.status };
  const span = tracer().startSpan("skein.run.end", { attributes }, parentOf(run.traceparent));
  if (run.status === "FAILED") span.setStatus({ code: SpanStatusCode.ERROR, message: messageOf(run.error) });
  span.end();
}

/** An error's message, for a span's status. */
export function messageOf(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === "string" ? message : "";
}
