/**
 * How a run ends (DESIGN §3, §6): the safety net that ends an idle run, `endRun` (active visits
 * cancelled, pending ones skipped, compensation planned when the ending undoes), and the final
 * status once nothing runs or compensates any more. No I/O; the scheduler and the flush call it.
 */
import { cancel, currentVisit, errorJson, event, type RunState, skip } from "./run-state.js";
import { ACTIVE_STATES, deriveRunStatus, type EndCause } from "./states.js";
import type { EventType, Json, Visit, VisitError } from "./types.js";

/** The safety net of DESIGN §3: when nothing is active, ready or due, the run ends. */
export function finishIfIdle(rs: RunState, now: number): void {
  if (rs.run.ended_at !== null) return;
  const stuck: Visit[] = [];
  for (const v of rs.current.values()) {
    if (ACTIVE_STATES.has(v.state) || (v.state === "PENDING" && v.ready_at !== null)) return;
    if (v.state === "PENDING") stuck.push(v);
  }
  if (stuck.length > 0) {
    event(rs, "run.warning", null, now, {
      message: `nodes ${stuck.map((v) => v.node_id).join(", ")} can never run; skipped as unreachable`,
    });
    for (const v of stuck) skip(rs, v, "unreachable", now);
  }
  endRun(rs, null, null, now);
}

/**
 * Ends the run: active visits CANCELLED (their attempts aborted, late results fenced), PENDING
 * ones SKIPPED. A failure, a TTL expiry, or a cancel asked to compensate then goes through
 * COMPENSATING when the workflow declares compensations (the engine plans them, see
 * `Changes.plan`); otherwise the run takes its final status now.
 */
export function endRun(
  rs: RunState,
  cause: EndCause | null,
  error: VisitError | null,
  now: number,
  options: { failing?: Visit; compensate?: boolean } = {},
): void {
  if (rs.run.ended_at !== null) return;
  const run = rs.run;
  run.end_cause = cause;
  if (error) run.error = error;
  for (const v of rs.current.values()) {
    if (ACTIVE_STATES.has(v.state)) cancel(rs, v, `run_${cause ?? "ended"}`, now);
    else if (v.state === "PENDING") skip(rs, v, `run_${cause ?? "ended"}`, now);
  }
  run.ended_at = now;
  run.updated_at = now;
  run.paused = null; // nothing left to hold: compensations run, the run reaches its status
  run.queued = null; // a QUEUED run that ends (cancelled, past its TTL) never began
  rs.changes.runUpdated = true;
  rs.changes.ended = true;
  const undo = cause === "failed" || cause === "ttl" || (cause === "cancelled" && options.compensate === true);
  rs.changes.undo = undo;
  if (undo && rs.graph.compensates) {
    run.status = "COMPENSATING";
    run.output = null;
    rs.changes.plan = { failing: options.failing ?? null };
    return;
  }
  finishRun(rs, now);
}

/**
 * The run's final status, output and event, once nothing runs or compensates any more. While
 * compensation is owed (planned but its rows not made yet, or a row not finished) this changes
 * nothing: the run stays COMPENSATING, whatever called it (DESIGN §6).
 */
export function finishRun(rs: RunState, now: number): void {
  const run = rs.run;
  const cause = run.end_cause;
  const status = deriveRunStatus({
    visits: rs.current.values(),
    compensations: rs.compensations,
    compensationPlanned: rs.changes.plan !== null,
    endCause: cause,
  });
  if (status === "COMPENSATING") return;
  run.status = status;
  if (run.status === "SUCCEEDED" && cause !== "end") run.output = sinkOutputs(rs);
  if (run.status !== "SUCCEEDED") run.output = null;
  run.ended_at = now;
  run.updated_at = now;
  rs.changes.runUpdated = true;
  rs.changes.ended = true;
  const type: EventType =
    run.status === "SUCCEEDED" ? "run.succeeded" : run.status === "CANCELLED" ? "run.cancelled" : "run.failed";
  event(rs, type, null, now, {
    status: run.status,
    ...(cause ? { end_cause: cause } : {}),
    ...(run.error ? { error: errorJson(run.error) } : {}),
    ...(run.needs_attention ? { needs_attention: true } : {}),
  });
}

function sinkOutputs(rs: RunState): Json {
  const out: Record<string, Json> = {};
  for (const id of rs.graph.sinks) {
    const v = currentVisit(rs, id);
    if (v.state === "SUCCEEDED") out[id] = v.output;
  }
  return out;
}
