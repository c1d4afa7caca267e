/**
 * Pausing a run (DESIGN §16) as pure functions over its state. A paused run starts no attempt:
 * the claim queries and the claims step leave its ready visits and map items where they are
 * (`Run.paused` is the whole mechanism), while attempts already running finish and are
 * recorded, sleeps and retry times keep counting, and whatever became due while it was paused
 * starts on resume. A node with `on_exhausted: "pause"` pauses its run when its retries run out,
 * its visit waiting RETRYING for an operator: resume gives it one more attempt, `failVisit`
 * takes its failure path instead.
 */
import { ConflictError, NotFoundError } from "../errors.js";
import { clearAttempt, errorJson, event, nodeOf, type RunState, touch, transition } from "./run-state.js";
import type { RunPause, Visit, VisitError } from "./types.js";

/** Who acts, and why: `by` is recorded as given (null: not said). */
export interface Operator {
  by: string | null;
  reason: string | null;
}

/** A pause needs a run that is still running its nodes (not ended, not compensating). */
export function pauseRefusal(rs: RunState): ConflictError | null {
  const run = rs.run;
  if (run.ended_at === null) return null;
  const what = run.status === "COMPENSATING" ? "is compensating" : `already ended ${run.status}`;
  return new ConflictError(`run ${run.run_id} ${what}; only a running run can be paused or resumed`);
}

/** Pauses the run; a paused run stays as it is (the first pause's record is kept). */
export function pause(rs: RunState, who: Operator, now: number): void {
  if (rs.run.paused !== null) return;
  setPaused(rs, { by: who.by, at: now, reason: who.reason }, now);
  event(rs, "run.paused", null, now, { by: who.by, reason: who.reason });
}

/**
 * A visit of a node with `on_exhausted: "pause"` failed its last attempt: it waits RETRYING,
 * due now, and the run pauses naming it (replacing an operator's pause: an operator resuming it
 * should see what needs attention). Its failures stay counted, so each resume gives one attempt.
 */
export function pauseExhausted(rs: RunState, v: Visit, error: VisitError, now: number): void {
  transition(rs, v, "RETRYING");
  v.error = error;
  clearAttempt(v);
  v.ready_at = now;
  const reason = `node ${v.node_id} failed ${v.failures} attempts, its last: ${error.message}`;
  setPaused(rs, { by: "engine", at: now, reason, node_id: v.node_id, visit: v.visit }, now);
  event(rs, "run.paused", v, now, { by: "engine", reason, attempt: v.attempt, error: errorJson(error) });
  // Told to the notifiers (webhooks) like a failed compensation: a person has to act.
  event(rs, "run.needs_attention", v, now, { reason: "retries_exhausted", message: reason });
}

/**
 * Resumes a paused run: its ready visits are claimable again, those whose due time passed at
 * once. They are handed to this flush's claims (`readied`) and rewritten, so a retry time still
 * ahead is armed again like any written row's. A run that is not paused stays as it is.
 */
export function resume(rs: RunState, who: Operator, now: number): void {
  const was = rs.run.paused;
  if (was === null) return;
  setPaused(rs, null, now);
  for (const v of rs.current.values()) {
    if ((v.state === "PENDING" || v.state === "RETRYING") && v.ready_at !== null) {
      touch(rs, v);
      rs.changes.readied.push(v);
    }
  }
  event(rs, "run.resumed", null, now, {
    by: who.by,
    paused_by: was.by,
    paused_at: was.at,
    ...(was.node_id === undefined ? {} : { node_id: was.node_id }),
  });
}

/**
 * Why an operator may not fail this node's visit (null: they may). Only a visit waiting for an
 * attempt can be failed: RETRYING (a paused node whose retries ran out among them) or ready.
 */
export function failVisitRefusal(rs: RunState, nodeId: string): ConflictError | NotFoundError | null {
  const run = rs.run;
  if (!rs.graph.nodes.has(nodeId)) return new NotFoundError(`workflow ${run.workflow_id} has no node "${nodeId}"`);
  if (run.ended_at !== null) return new ConflictError(`run ${run.run_id} already ended ${run.status}`);
  const v = rs.current.get(nodeId);
  if (v && (v.state === "RETRYING" || (v.state === "PENDING" && v.ready_at !== null))) return null;
  const state = v?.state ?? "PENDING";
  const why =
    state === "RUNNING"
      ? "its attempt is running; wait for it to end, or cancel the run"
      : state === "PENDING"
        ? "it has not been reached yet"
        : `it is ${state}`;
  return new ConflictError(
    `node ${nodeId} of run ${run.run_id} is not waiting for an attempt (${why}); only a RETRYING or ready node can be failed`,
  );
}

/**
 * An operator fails a waiting visit for good: what the scheduler's `failVisit` is then given (its
 * failure edges fire, or the run fails). A visit whose retries ran out fails as
 * `retries_exhausted` with its last error; another as `failed_by_operator`. The run's pause ends
 * when it was this visit's; an operator's pause holds (the failure path starts on resume).
 */
export function operatorFailure(
  rs: RunState,
  v: Visit,
  who: Operator,
  now: number,
): { reason: string; error: VisitError } {
  const exhausted = v.state === "RETRYING" && v.failures > nodeOf(rs, v.node_id).retry_count;
  const paused = rs.run.paused;
  if (paused?.node_id === v.node_id && paused.visit === v.visit) {
    setPaused(rs, null, now);
    event(rs, "run.resumed", null, now, { by: who.by, paused_by: paused.by, paused_at: paused.at, failed: v.node_id });
  }
  const said = `failed by ${who.by ?? "an operator"}${who.reason ? `: ${who.reason}` : ""}`;
  if (exhausted && v.error)
    return { reason: "retries_exhausted", error: { ...v.error, message: `${v.error.message} (${said})` } };
  return { reason: "failed_by_operator", error: { message: said, reason: "failed_by_operator" } };
}

function setPaused(rs: RunState, paused: RunPause | null, now: number): void {
  rs.run.paused = paused;
  rs.run.updated_at = now;
  rs.changes.runUpdated = true;
}
