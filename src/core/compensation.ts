/**
 * Compensation (DESIGN §6) as pure functions over one run's state: what to undo and in which
 * order, one row at a time with the retries and fencing of any attempt, and the run's final
 * status once the last row ends. The engine calls `planCompensation` when a run that ended
 * with `Changes.plan` set is about to be written, with the run's whole visit history.
 */

import { undoAgent } from "../definition/kinds/index.js";
import { retryDelayMs } from "./backoff.js";
import { startAttempt } from "./run-state.js";
import { errorJson, event, finishRun, leaseExpiry, nodeOf, notStarted, type RunState } from "./scheduler.js";
import { assertTransition, type VisitState } from "./states.js";
import type { Compensation, Json, Visit, VisitError } from "./types.js";

/** A visit of the run's history, with the commit order of its success (null when it did not succeed). */
export interface PastVisit {
  visit: Visit;
  successSeq: number | null;
}

const SUFFIX = ":compensate";

export function compensationId(visitExecutionId: string): string {
  return `${visitExecutionId}${SUFFIX}`;
}

/** The execution_id of the visit a compensation undoes; null when `executionId` is a visit's own. */
export function undoneExecutionId(executionId: string): string | null {
  return executionId.endsWith(SUFFIX) ? executionId.slice(0, -SUFFIX.length) : null;
}

/** A new PENDING compensation row, number `seq` of its run, undoing `v` with `agentType`. */
export function newCompensation(
  v: Pick<Visit, "run_id" | "node_id" | "visit" | "execution_id">,
  seq: number,
  agentType: string,
  now: number,
): Compensation {
  return {
    run_id: v.run_id,
    seq,
    node_id: v.node_id,
    visit: v.visit,
    execution_id: compensationId(v.execution_id),
    agent_type: agentType,
    ...notStarted(now),
  };
}

/**
 * Creates the rows that undo the run's effects, for the nodes that declare `compensation`:
 * the failing visit first, then visits cancelled after their attempt had started (most recently
 * started first), then succeeded visits, current or superseded by a loop, newest success first.
 * A visit compensated before (a redriven run that fails again) is not compensated twice.
 * Does nothing unless the run's `Changes.plan` asks for it.
 */
export function planCompensation(rs: RunState, history: PastVisit[], now: number): void {
  const plan = rs.changes.plan;
  if (!plan) return;
  // The plan is consumed here, with the rows it makes: until then the run cannot finish.
  rs.changes.plan = null;
  const { failing } = plan;
  const done = new Set(rs.compensations.map((c) => `${c.node_id}#${c.visit}`));
  const undoable = (v: Visit) => undoAgent(nodeOf(rs, v.node_id)) !== null && !done.has(`${v.node_id}#${v.visit}`);
  const isFailing = (v: Visit) => failing !== null && v.node_id === failing.node_id && v.visit === failing.visit;
  const cancelled = history
    .filter(({ visit: v }) => v.state === "CANCELLED" && v.started_at !== null && !isFailing(v) && undoable(v))
    .sort((a, b) => (b.visit.started_at ?? 0) - (a.visit.started_at ?? 0))
    .map((p) => p.visit);
  // Only successes this run recorded: a fork's kept visits (copied, without a node.succeeded of
  // the fork's) were its source's doing, which a failed fork must not undo.
  const succeeded = history
    .filter(({ visit: v, successSeq }) => v.state === "SUCCEEDED" && successSeq !== null && undoable(v))
    .sort((a, b) => (b.successSeq ?? 0) - (a.successSeq ?? 0))
    .map((p) => p.visit);
  const order = [...(failing && undoable(failing) ? [failing] : []), ...cancelled, ...succeeded];

  let seq = rs.compensations.reduce((max, c) => Math.max(max, c.seq), 0);
  for (const v of order) {
    const c = newCompensation(v, ++seq, undoAgent(nodeOf(rs, v.node_id)) ?? "", now);
    rs.compensations.push(c);
    rs.changes.compensations.add(c);
  }
  event(rs, "compensation.planned", null, now, {
    compensations: order.map((v) => ({
      node_id: v.node_id,
      visit: v.visit,
      execution_id: compensationId(v.execution_id),
    })),
  });
  advanceCompensation(rs, now);
}

/**
 * Undoes a run that SUCCEEDED (a map's item, once its parent's run fails and the map undoes its
 * items): COMPENSATING, its successes' compensations planned as for a failed run (`Changes.plan`),
 * then CANCELLED. False when it did not succeed or has nothing to undo.
 */
export function undoRun(rs: RunState, why: VisitError, now: number): boolean {
  const run = rs.run;
  if (run.status !== "SUCCEEDED" || !rs.graph.compensates) return false;
  run.status = "COMPENSATING";
  run.end_cause = "cancelled";
  run.error = why;
  run.output = null;
  run.updated_at = now;
  rs.changes.runUpdated = true;
  rs.changes.plan = { failing: null };
  return true;
}

/**
 * Starts the next row when none is active, or gives the run its final status when none is
 * left. The first row waits until every cancelled attempt has returned or passed its deadline.
 */
export function advanceCompensation(rs: RunState, now: number): void {
  // Not planned yet (a cancelled attempt returned in the flush that ended the run): the rows
  // come first, and planning advances.
  if (rs.run.status !== "COMPENSATING" || rs.changes.plan !== null) return;
  if (rs.compensations.some((c) => c.state === "RUNNING" || c.state === "RETRYING")) return;
  const next = rs.compensations.find((c) => c.state === "PENDING");
  if (!next) {
    finishRun(rs, now);
    return;
  }
  // Only the first row can find an attempt still held: it starts after every deadline passed.
  let readyAt = now;
  for (const v of rs.current.values()) {
    if (v.state === "CANCELLED" && v.holder !== null && v.deadline_at !== null && v.deadline_at > readyAt) {
      readyAt = v.deadline_at;
    }
  }
  if (next.ready_at !== readyAt) {
    next.ready_at = readyAt;
    rs.changes.compensations.add(next);
  }
}

/** A row that is ready and due: what the engine may hand to an agent. */
export function claimableCompensation(rs: RunState, now: number): Compensation | null {
  if (rs.run.status !== "COMPENSATING") return null;
  for (const c of rs.compensations) {
    if ((c.state === "PENDING" || c.state === "RETRYING") && c.ready_at !== null && c.ready_at <= now) return c;
  }
  return null;
}

export function claimCompensation(rs: RunState, c: Compensation, holder: string, now: number): void {
  transition(rs, c, "RUNNING");
  startAttempt(c, nodeOf(rs, c.node_id), holder, now);
  event(rs, "compensation.started", c, now, { execution_id: c.execution_id, attempt: c.attempt, holder });
}

export function renewCompensationLease(rs: RunState, c: Compensation, now: number): void {
  c.lease_expires_at = leaseExpiry(nodeOf(rs, c.node_id), c, now);
  rs.changes.compensations.add(c);
}

export function compensationSucceeded(rs: RunState, c: Compensation, output: Json, now: number): void {
  transition(rs, c, "SUCCEEDED");
  c.output = output;
  c.ended_at = now;
  clearAttempt(c);
  event(rs, "compensation.succeeded", c, now, { execution_id: c.execution_id, attempt: c.attempt });
  advanceCompensation(rs, now);
}

/**
 * A failed attempt: retried like any attempt (the node's retry settings). One that fails for
 * good stops the compensation: the rows after it are SKIPPED and the run ends FAILED (or
 * CANCELLED) with `needs_attention`, for a person to take over.
 */
export function compensationFailed(
  rs: RunState,
  c: Compensation,
  error: VisitError,
  retryable: boolean,
  now: number,
  random: () => number = Math.random,
  reason?: string,
): void {
  const node = nodeOf(rs, c.node_id);
  c.failures += 1;
  if (retryable && c.failures <= node.retry_count) {
    transition(rs, c, "RETRYING");
    c.error = error;
    clearAttempt(c);
    c.ready_at = now + retryDelayMs(node, c.failures, random);
    event(rs, "compensation.retrying", c, now, {
      execution_id: c.execution_id,
      attempt: c.attempt,
      error: errorJson(error),
      retry_at: c.ready_at,
    });
    return;
  }
  transition(rs, c, "FAILED");
  clearAttempt(c);
  c.error = error;
  c.reason = reason ?? (retryable ? "retries_exhausted" : "non_retryable");
  c.ended_at = now;
  event(rs, "compensation.failed", c, now, {
    execution_id: c.execution_id,
    attempt: c.attempt,
    reason: c.reason,
    error: errorJson(error),
  });
  for (const rest of rs.compensations) {
    if (rest.state !== "PENDING") continue;
    transition(rs, rest, "SKIPPED");
    rest.reason = "compensation_failed";
    rest.ready_at = null;
    rest.ended_at = now;
    event(rs, "compensation.skipped", rest, now, { execution_id: rest.execution_id, reason: rest.reason });
  }
  rs.run.needs_attention = true;
  rs.changes.runUpdated = true;
  event(rs, "run.needs_attention", c, now, {
    message: `compensation ${c.execution_id} failed for good (${c.reason}): ${error.message}; undo its effect by hand, then redrive with force if wanted`,
    execution_id: c.execution_id,
    reason: c.reason,
  });
  advanceCompensation(rs, now);
}

/** The engine holding the attempt died: a new attempt now; the third interruption fails it. */
export function interruptCompensation(rs: RunState, c: Compensation, now: number): void {
  c.interruptions += 1;
  if (c.interruptions >= 3) {
    const message = `interrupted ${c.interruptions} times: poison task`;
    compensationFailed(rs, c, { message, reason: "interrupted" }, false, now, Math.random, "interrupted");
    return;
  }
  transition(rs, c, "RETRYING");
  clearAttempt(c);
  c.ready_at = now;
  event(rs, "compensation.retrying", c, now, {
    execution_id: c.execution_id,
    attempt: c.attempt,
    interrupted: true,
    retry_at: now,
  });
}

function transition(rs: RunState, c: Compensation, to: VisitState): void {
  assertTransition(c.state, to, c.execution_id);
  c.state = to;
  rs.changes.compensations.add(c);
}

function clearAttempt(c: Compensation): void {
  c.ready_at = null;
  c.holder = null;
  c.deadline_at = null;
  c.lease_expires_at = null;
}
