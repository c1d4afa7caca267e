/**
 * The spans an engine opens for its runs after they start (DESIGN §9): `skein.attempt` per
 * attempt (in process, and for external workers from their claim), and a span per held visit:
 * `skein.review`, `skein.event_wait`, `skein.child_run`; and the short `skein.run.end`. Each is a
 * child of its run's stored traceparent. They end when the committed events that end them are
 * published (the outcome the flush decided: succeeded, failed, retrying, timeout, lease_expired,
 * cancelled), not when a handler returns. An attempt whose end another engine applies
 * (PostgreSQL) leaves its span open here until this engine closes (outcome `unknown`).
 */
import { context, ROOT_CONTEXT, type Span, SpanStatusCode, trace } from "@opentelemetry/api";
import { CHILD_HOLDER } from "../../core/kinds/workflow.js";
import type { RunState } from "../../core/scheduler.js";
import type { Json, Run, RunEvent, Visit } from "../../core/types.js";
import type { ClaimedTask } from "../writer/inputs.js";
import { messageOf, parentOf, runEndSpan, traceparentOf, tracer } from "./tracing.js";

/** Open spans kept at most; the oldest is ended (outcome `unknown`) beyond. */
const MAX_OPEN = 10_000;

/** Event types that end an attempt or a held visit, and the outcome each gives its span. */
const ENDS: Partial<Record<RunEvent["type"], string>> = {
  "node.succeeded": "succeeded",
  "node.failed": "failed",
  "node.retrying": "retrying",
  "node.cancelled": "cancelled",
  "node.interrupted": "interrupted",
  "node.skipped": "skipped",
  "compensation.succeeded": "succeeded",
  "compensation.failed": "failed",
  "compensation.retrying": "retrying",
};

const RUN_ENDS: ReadonlySet<string> = new Set(["run.succeeded", "run.failed", "run.cancelled"]);

export class RunSpans {
  /** By `<execution_id>#<attempt>` (attempts) or `<execution_id>` (held visits). */
  private readonly open = new Map<string, Span>();

  /**
   * Starts an attempt's span, child of its run's traceparent (`holder`: an external worker's);
   * answers it and its traceparent for the task.
   */
  startAttempt(task: ClaimedTask, holder?: string): { span: Span; traceparent: string } {
    const span = tracer().startSpan(
      "skein.attempt",
      {
        attributes: {
          "skein.run_id": task.run_id,
          "skein.node_id": task.node_id,
          "skein.visit": task.visit,
          "skein.attempt": task.attempt,
          "skein.execution_id": task.execution_id,
          "skein.agent_type": task.agent_type,
          ...(holder === undefined ? {} : { "skein.holder": holder }),
        },
      },
      parentOf(task.run_traceparent),
    );
    this.keep(`${task.execution_id}#${task.attempt}`, span);
    return { span, traceparent: traceparentOf(span, task.trace_id) };
  }

  /**
   * Starts the `skein.child_run` span of a `workflow` visit's attempt as its child run is written;
   * answers the child's traceparent (that span's), so the child's own spans nest under it. A
   * transaction applied again starts it again: the span of the first try ends then.
   */
  startChildRun(parent: Run, v: Visit, childRunId: string): string {
    const attributes = {
      "skein.run_id": parent.run_id,
      "skein.node_id": v.node_id,
      "skein.visit": v.visit,
      "skein.attempt": v.attempt,
      "skein.execution_id": v.execution_id,
      "skein.child_run_id": childRunId,
    };
    const span = tracer().startSpan("skein.child_run", { attributes }, parentOf(parent.traceparent));
    this.keep(v.execution_id, span);
    return traceparentOf(span, parent.trace_id);
  }

  /** Runs `fn` (a handler) with the span active: the handler's own spans nest under it. */
  within<T>(span: Span, fn: () => T): T {
    return context.with(trace.setSpan(ROOT_CONTEXT, span), fn);
  }

  /**
   * Committed events, in order, with the runs they belong to: starts the spans of visits they
   * hold, ends the spans of attempts and visits they end, and records the runs they end.
   */
  published(events: readonly RunEvent[], runs: ReadonlyMap<string, RunState>): void {
    for (const e of events) {
      if (e.node_id === null) {
        const run = RUN_ENDS.has(e.type) ? runs.get(e.run_id)?.run : undefined;
        if (run) runEndSpan(run);
        continue;
      }
      const held = heldSpanOf(e);
      if (held) {
        const run = runs.get(e.run_id)?.run;
        const executionId = executionIdOf(e);
        // A child run's span started with the child, unless the child was there already (a lost commit).
        if (run && !this.open.has(executionId)) this.startHeld(executionId, held, e, run);
        continue;
      }
      const outcome = ENDS[e.type];
      if (outcome === undefined || this.open.size === 0) continue;
      const executionId = executionIdOf(e);
      this.end(`${executionId}#${e.data.attempt}`, outcome, e);
      this.end(executionId, outcome, e);
    }
  }

  /** Ends every open span (the engine closes): their outcome is not known here. */
  endAll(): void {
    for (const [key, span] of [...this.open]) {
      this.open.delete(key);
      span.setAttribute("skein.outcome", "unknown");
      span.end();
    }
  }

  private startHeld(executionId: string, name: string, e: RunEvent, run: Run): void {
    const attributes = {
      "skein.run_id": e.run_id,
      "skein.node_id": e.node_id ?? "",
      "skein.visit": e.visit ?? 0,
      "skein.execution_id": executionId,
      ...(typeof e.data.event === "string" ? { "skein.event": e.data.event } : {}),
      ...(typeof e.data.key === "string" ? { "skein.event_key": e.data.key } : {}),
      ...(name === "skein.child_run" ? { "skein.child_run_id": String(e.data.holder).slice(CHILD_HOLDER.length) } : {}),
    };
    this.keep(executionId, tracer().startSpan(name, { attributes }, parentOf(run.traceparent)));
  }

  private keep(key: string, span: Span): void {
    if (!span.isRecording()) return; // no SDK, or not sampled: ending it would do nothing
    this.open.get(key)?.end(); // the same attempt claimed again (a lost commit given back): one span
    this.open.set(key, span);
    if (this.open.size > MAX_OPEN) {
      const [oldest, old] = this.open.entries().next().value as [string, Span];
      this.open.delete(oldest);
      old.setAttribute("skein.outcome", "unknown");
      old.end();
    }
  }

  private end(key: string, outcome: string, e: RunEvent): void {
    const span = this.open.get(key);
    if (!span) return;
    this.open.delete(key);
    const error = e.data.error as { message?: Json; reason?: Json } | undefined;
    const reason =
      typeof error?.reason === "string" ? error.reason : typeof e.data.reason === "string" ? e.data.reason : null;
    const timedOut = reason === "timeout" || reason === "lease_expired";
    span.setAttribute("skein.outcome", timedOut && reason ? reason : outcome);
    if (reason) span.setAttribute("skein.reason", reason);
    if (error) span.setStatus({ code: SpanStatusCode.ERROR, message: messageOf(error) });
    span.end();
  }
}

/** The execution_id an event names: a compensation's in its data, else its visit's. */
function executionIdOf(e: RunEvent): string {
  return typeof e.data.execution_id === "string" ? e.data.execution_id : `${e.run_id}:${e.node_id}:${e.visit}`;
}

/** The span a held visit's first event opens: a review, an event wait, a child run; else null. */
function heldSpanOf(e: RunEvent): string | null {
  if (e.type === "review.requested") return "skein.review";
  if (e.type === "node.waiting" && typeof e.data.event === "string") return "skein.event_wait";
  if (e.type === "node.started" && typeof e.data.holder === "string" && e.data.holder.startsWith(CHILD_HOLDER)) {
    return "skein.child_run";
  }
  return null;
}
