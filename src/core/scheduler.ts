/**
 * The scheduler of DESIGN §3–4 as plain functions over one run's in-memory state. No I/O: the
 * engine loads a RunState inside a write transaction, calls these functions, and the store
 * persists `changes`. Every state write goes through `transition`, which checks the table.
 *
 * Readiness is incremental: when a visit becomes terminal, only the nodes in its `affected` list
 * are re-checked (and, after a loop reset, the loop's region).
 */
import type { CompiledNode, WorkflowGraph } from "../definition/graph.js";
import { finalFailureReason, retryWaitMs } from "./backoff.js";
import { type InboxReader, type Moves, statesOf } from "./kinds/index.js";
import { deliver as deliverEvent } from "./kinds/wait-event.js";
import { pauseExhausted } from "./pause.js";
import { readiness } from "./readiness.js";
import { endRun, finishIfIdle } from "./run-end.js";
import {
  cancel,
  clearAttempt,
  currentVisit,
  type Decision,
  errorJson,
  event,
  newVisit,
  nodeOf,
  type RunState,
  runState,
  skip,
  touch,
  transition,
} from "./run-state.js";
import { ACTIVE_STATES } from "./states.js";
import type { InboxEvent, Json, Run, Visit, VisitError } from "./types.js";

// How a run ends is run-end.ts; the run state and the moves on one visit are run-state.ts: named
// here too, as before the split.
export { endRun, finishRun } from "./run-end.js";
export {
  type Changes,
  claim,
  currentVisit,
  type Decision,
  ENGINE_HOLDER,
  emptyChanges,
  enterReview,
  errorJson,
  event,
  executionId,
  leaseExpiry,
  newVisit,
  nodeOf,
  notStarted,
  type RunState,
  releaseCancelled,
  renewLease,
  runState,
  wait,
} from "./run-state.js";

/** The moves the kinds' states make that go on to settle the run (core/kinds/kind.ts). */
const MOVES: Moves = { succeed, failVisit, failAttempt };

/**
 * A ready visit of a kind the engine starts (`start: "engine"`) leaves PENDING, in the claiming
 * flush: its kind's `prepare` reads what it needs from the inbox, then its `begin` starts it.
 */
export async function beginVisit(rs: RunState, v: Visit, now: number, inbox: InboxReader): Promise<void> {
  const states = statesOf(nodeOf(rs, v.node_id).kind);
  states.begin?.(rs, v, now, await states.prepare?.(rs, v, inbox, now), MOVES);
}

/** The due time of a held visit (IN_REVIEW or WAITING) passed: its kind says what that means. */
export function holdDue(rs: RunState, v: Visit, now: number): void {
  const node = rs.graph.nodes.get(v.node_id);
  if (node) statesOf(node.kind).due?.(rs, v, now, MOVES);
}

/** Hands an event to a WAITING wait_event visit: it succeeds with the event's payload. */
export function deliver(rs: RunState, v: Visit, e: InboxEvent, now: number): void {
  deliverEvent(rs, v, e, now, MOVES);
}

/**
 * Creates a run's first visits and makes its start nodes ready. The run's times, its TTL
 * deadline included, are the transaction's (`now`), never the caller's clock: on PostgreSQL the
 * database's, so an engine whose clock is off starts runs with the right TTL (DESIGN §7).
 */
export function startRunState(run: Run, graph: WorkflowGraph, now: number): RunState {
  const rs = runState({ ...run, created_at: now, updated_at: now }, graph, []);
  beginRun(rs, now);
  return rs;
}

/**
 * A run begins: its first visits are made and its start nodes readied, its TTL counted from
 * now. A QUEUED run (DESIGN §17) begins so once it may: it had no visits until then.
 */
export function beginRun(rs: RunState, now: number): void {
  const { run, graph } = rs;
  const queued = run.queued !== null;
  run.status = "RUNNING";
  run.queued = null;
  run.updated_at = now;
  run.deadline_at = now + graph.timeout * 1000;
  if (queued) rs.changes.runUpdated = true;
  event(rs, "run.started", null, now, { workflow_id: run.workflow_id, workflow_version: run.workflow_version });
  for (const id of graph.order) newVisit(rs, id, 1, 0, now);
  settle(rs, graph.order, now);
}

export interface ReviewDecision {
  decision: "approve" | "reject";
  by: string | null;
  /** The admin who decided as `by` (DESIGN §13), recorded in the event; null when `by` decided. */
  admin: string | null;
  comment: string | null;
  /** Optional edited output (approve). */
  output: Json;
}

/**
 * A person's decision on an IN_REVIEW visit: approve succeeds with `{ decision, by, comment,
 * output }` and fires `next`; reject fails the visit as `rejected`, so next_on_failure routes it.
 */
export function decideReview(rs: RunState, v: Visit, d: ReviewDecision, next: Decision, now: number): void {
  event(rs, "review.decided", v, now, {
    decision: d.decision,
    by: d.by,
    comment: d.comment,
    ...(d.admin === null ? {} : { admin: d.admin }),
  });
  if (d.decision === "approve") {
    succeed(rs, v, { decision: d.decision, by: d.by, comment: d.comment, output: d.output }, next, now);
  } else {
    const who = d.by ?? "a reviewer";
    failVisit(
      rs,
      v,
      "rejected",
      { message: `rejected by ${who}${d.comment ? `: ${d.comment}` : ""}`, reason: "rejected" },
      now,
    );
  }
}

/** Records a successful attempt and fires its decision. */
export function succeed(rs: RunState, v: Visit, output: Json, decision: Decision, now: number): void {
  transition(rs, v, "SUCCEEDED");
  v.output = output;
  v.ended_at = now;
  clearAttempt(v);
  const fired = decision.kind === "targets" ? decision.targets : [];
  event(rs, "node.succeeded", v, now, {
    attempt: v.attempt,
    fired,
    ...(decision.kind === "end" ? { end: true } : {}),
    // A map that succeeded within its tolerated failures says which items failed (DESIGN §11.1).
    ...(v.items?.failed_items
      ? {
          failed_items: v.items.failed_items as unknown as Json,
          failed_items_count: v.items.failed + v.items.cancelled,
        }
      : {}),
  });
  if (decision.kind === "none") event(rs, "branch.none", v, now, {});
  if (decision.kind === "end") {
    v.fired = [];
    rs.run.output = output;
    endRun(rs, "end", null, now);
    return;
  }
  fire(rs, v, fired, now);
}

/**
 * Records a failed attempt: a retry when the budget allows and the error is retryable, else the
 * visit fails for good (`retries_exhausted`, `non_retryable`, or `invalid_output` for an output
 * or a response over its size bound or not JSON: DESIGN §12).
 */
export function failAttempt(
  rs: RunState,
  v: Visit,
  error: VisitError,
  retryable: boolean,
  now: number,
  random: () => number = Math.random,
): void {
  const node = nodeOf(rs, v.node_id);
  v.failures += 1;
  if (retryable && v.failures <= node.retry_count) {
    transition(rs, v, "RETRYING");
    v.error = error;
    clearAttempt(v);
    v.ready_at = now + retryWaitMs(node, v.failures, error, random);
    rs.changes.readied.push(v);
    event(rs, "node.retrying", v, now, { attempt: v.attempt, error: errorJson(error), retry_at: v.ready_at });
    return;
  }
  // Out of retries on a node that asks for an operator then (DESIGN §16): the run pauses.
  if (retryable && node.on_exhausted === "pause") pauseExhausted(rs, v, error, now);
  else failVisit(rs, v, finalFailureReason(retryable, error), error, now);
}

/**
 * The engine holding this attempt died (DESIGN §7): a new attempt is due now with the same
 * execution_id, without spending the retry budget; the third interruption fails the visit.
 */
export function interrupt(rs: RunState, v: Visit, now: number): void {
  v.interruptions += 1;
  const error: VisitError = { message: `the engine holding attempt ${v.attempt} stopped`, reason: "interrupted" };
  if (v.interruptions >= 3) {
    failVisit(rs, v, "interrupted", { ...error, message: `interrupted ${v.interruptions} times: poison task` }, now);
    return;
  }
  transition(rs, v, "RETRYING");
  clearAttempt(v);
  v.ready_at = now;
  rs.changes.readied.push(v);
  event(rs, "node.interrupted", v, now, { attempt: v.attempt, interruptions: v.interruptions });
}

/** Fails a visit for good and fires its failure edges; an unhandled failure ends the run. */
export function failVisit(rs: RunState, v: Visit, reason: string, error: VisitError | null, now: number): void {
  const node = nodeOf(rs, v.node_id);
  transition(rs, v, "FAILED");
  clearAttempt(v);
  v.reason = reason;
  v.error = error ?? { message: reason, reason };
  v.ended_at = now;
  v.handled = node.failureTargets.length > 0;
  event(rs, "node.failed", v, now, { attempt: v.attempt, reason, error: errorJson(v.error), handled: v.handled });
  if (!v.handled) {
    v.fired = [];
    rs.run.error = { ...v.error, message: `node ${v.node_id} failed (${reason}): ${v.error.message}`, reason };
    endRun(rs, "failed", null, now, { failing: v });
    return;
  }
  fire(rs, v, node.failureTargets, now);
}

/** Records the visit's edge decision: a loop-back resets the loop's region, forward edges activate. */
function fire(rs: RunState, v: Visit, targets: string[], now: number): void {
  v.fired = targets;
  touch(rs, v);
  const loopTarget = targets.find((t) => !rs.graph.isForward(v.node_id, t));
  if (loopTarget !== undefined) {
    resetLoop(rs, v, loopTarget, now);
  } else {
    settle(rs, nodeOf(rs, v.node_id).affected, now);
  }
}

/** DESIGN §4 loops: cancel what is active in the region, give its non-PENDING nodes new visits, re-check. */
function resetLoop(rs: RunState, source: Visit, target: string, now: number): void {
  const region = rs.graph.regions.get(target) ?? [target];
  event(rs, "loop.reset", source, now, { target, region });
  for (const id of region) {
    const old = currentVisit(rs, id);
    if (ACTIVE_STATES.has(old.state)) cancel(rs, old, "loop_reset", now);
    let v = old;
    if (old.state !== "PENDING") {
      v = newVisit(rs, id, old.visit + 1, old.prior_starts + (old.started_at === null ? 0 : 1), now);
    } else if (old.ready_at !== null || old.trigger !== null || old.loop_activated) {
      // A PENDING visit keeps its row but forgets an activation that came from inside the region
      // (an edge or an inner loop-back); one from outside is found again by the re-check below.
      old.ready_at = null;
      old.trigger = null;
      old.loop_activated = false;
      const node = nodeOf(rs, id);
      if (node.payload !== null || node.concurrency !== null) {
        old.payload = null;
        old.concurrency_key = null; // resolved again with the payload
      }
      touch(rs, old);
    }
    if (id === target) {
      v.loop_activated = true;
      v.trigger = { node_id: source.node_id, visit: source.visit };
      touch(rs, v);
    }
  }
  settle(rs, region, now);
}

/**
 * Re-checks the PENDING visits of `nodeIds` until nothing changes: makes ready, skips (cascading),
 * fails visits past max_visits, runs inline aggregators. Then ends the run if nothing can move.
 */
export function settle(rs: RunState, nodeIds: Iterable<string>, now: number): void {
  if (rs.settling) {
    // Called from inside the loop below (an inline aggregator fired, a visit failed): queue, so
    // the run is judged idle only once every queued node has been checked.
    rs.settling.push(...nodeIds);
    return;
  }
  const queue = [...nodeIds];
  rs.settling = queue;
  try {
    while (queue.length > 0 && rs.run.ended_at === null) {
      const id = queue.shift() as string;
      const v = currentVisit(rs, id);
      if (v.state !== "PENDING" || v.ready_at !== null) continue;
      const node = nodeOf(rs, id);
      const verdict = readiness(node, v, (n) => currentVisit(rs, n));
      if (verdict.kind !== "skip" && verdict.trigger && !v.trigger) {
        v.trigger = { node_id: verdict.trigger.node_id, visit: verdict.trigger.visit };
        touch(rs, v);
      }
      if (verdict.kind === "wait") continue;
      if (verdict.kind === "skip") {
        skip(rs, v, verdict.reason, now);
        queue.push(...node.affected);
      } else if (v.prior_starts >= node.max_visits) {
        failVisit(rs, v, "max_visits_exceeded", maxVisitsError(node), now);
      } else {
        makeReady(rs, node, v, now);
        statesOf(node.kind).inline?.(rs, node, v, now, MOVES);
      }
    }
  } finally {
    rs.settling = null;
  }
  finishIfIdle(rs, now);
}

function makeReady(rs: RunState, node: CompiledNode, v: Visit, now: number): void {
  v.ready_at = now;
  // A node with a concurrency key is resolved like a templated payload: its key is part of it.
  if (node.payload === null && node.concurrency === null && v.payload === null) {
    v.payload = (node.def.payload ?? {}) as Json;
  }
  touch(rs, v);
  rs.changes.readied.push(v);
  event(rs, "node.ready", v, now, v.trigger ? { trigger: { ...v.trigger } } : {});
}

function maxVisitsError(node: CompiledNode): VisitError {
  return {
    message: `node ${node.id} reached max_visits (${node.max_visits}); raise max_visits or fix the loop's exit condition`,
    reason: "max_visits_exceeded",
  };
}
