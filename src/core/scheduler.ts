/**
 * The scheduler of DESIGN §3–4 as plain functions over one run's in-memory state. No I/O: the
 * engine loads a RunState inside a write transaction, calls these functions, and the store
 * persists `changes`. Every state write goes through `transition`, which checks the table.
 *
 * Readiness is incremental: when a visit becomes terminal, only the nodes in its `affected` list
 * are re-checked (and, after a loop reset, the loop's region).
 */
import type { CompiledNode, WorkflowGraph } from "../definition/graph.js";
import { retryDelayMs } from "./backoff.js";
import { readiness } from "./readiness.js";
import { ACTIVE_STATES, assertTransition, deriveRunStatus, type EndCause, type VisitState } from "./states.js";
import type { Compensation, EventType, InboxEvent, Json, NewEvent, Run, Visit, VisitError } from "./types.js";

/** What a transaction changed in one run; the store writes it, the engine acts on it after commit. */
export interface Changes {
  inserted: Set<Visit>;
  updated: Set<Visit>;
  runUpdated: boolean;
  events: NewEvent[];
  /** Visits whose attempt was cancelled: the engine aborts their signals after commit. */
  cancelled: Visit[];
  /** Visits that became ready, or RETRYING with a due time: claimable once resolved and due. */
  readied: Visit[];
  /** The run ended in this change. */
  ended: boolean;
  /** Compensation rows created or changed. */
  compensations: Set<Compensation>;
  /**
   * The run ended and has work to undo: the engine loads the run's visit history and plans the
   * compensations (`planCompensation`) before it writes this change.
   */
  plan: { failing: Visit | null } | null;
  /** Inbox rows created or delivered (events sent to the run, DESIGN §11.2). */
  inbox: InboxEvent[];
  /** The run ended in this change and its ending compensates (a failure, the TTL, a cancel asked to): so do its children's. */
  undo: boolean;
  /**
   * Ready visits of kinds whose work the flush starts (a `workflow`'s child run, a `map`'s items:
   * it needs the registry, run ids, the store), each by the step of its node's kind (engine/writer/kinds).
   */
  starts: Set<Visit>;
}

export interface RunState {
  run: Run;
  graph: WorkflowGraph;
  /** The current visit of every node. */
  current: Map<string, Visit>;
  /** The run's compensation rows, by seq (empty unless it ended and had work to undo). */
  compensations: Compensation[];
  changes: Changes;
  /** Nodes waiting to be re-checked while `settle` runs (nested calls append here). */
  settling: string[] | null;
  /**
   * The run's events no wait_event took yet that this flush knows of, oldest first: those it
   * read by name (a wait's `prepare`) and those sent in it. Never the whole inbox (DESIGN §13.1);
   * cleared when the flush writes.
   */
  inbox?: InboxEvent[];
}

/** The decision of a succeeded visit: the targets it fires, `$end`, or no case held. */
export type Decision = { kind: "targets"; targets: string[] } | { kind: "end" } | { kind: "none" };

export const ENGINE_HOLDER = "engine";

export function emptyChanges(): Changes {
  return {
    inserted: new Set(),
    updated: new Set(),
    runUpdated: false,
    events: [],
    cancelled: [],
    readied: [],
    ended: false,
    compensations: new Set(),
    plan: null,
    inbox: [],
    undo: false,
    starts: new Set(),
  };
}

export function runState(
  run: Run,
  graph: WorkflowGraph,
  currentVisits: Iterable<Visit>,
  compensations: Compensation[] = [],
): RunState {
  const current = new Map<string, Visit>();
  for (const v of currentVisits) current.set(v.node_id, v);
  return { run, graph, current, compensations, changes: emptyChanges(), settling: null };
}

export function executionId(runId: string, nodeId: string, visit: number): string {
  return `${runId}:${nodeId}:${visit}`;
}

/**
 * Creates a run's first visits and makes its start nodes ready. The run's times, its TTL
 * deadline included, are the transaction's (`now`), never the caller's clock: on PostgreSQL the
 * database's, so an engine whose clock is off starts runs with the right TTL (DESIGN §7).
 */
export function startRunState(run: Run, graph: WorkflowGraph, now: number): RunState {
  const rs = runState({ ...run, created_at: now, updated_at: now, deadline_at: now + graph.timeout * 1000 }, graph, []);
  event(rs, "run.started", null, now, { workflow_id: run.workflow_id, workflow_version: run.workflow_version });
  for (const id of graph.order) newVisit(rs, id, 1, 0, now);
  settle(rs, graph.order, now);
  return rs;
}

/** The current visit of a node (every node of a run has one). */
export function currentVisit(rs: RunState, nodeId: string): Visit {
  const v = rs.current.get(nodeId);
  if (!v) throw new Error(`run ${rs.run.run_id} has no visit of node "${nodeId}"; this is a Skein bug`);
  return v;
}

export function nodeOf(rs: RunState, nodeId: string): CompiledNode {
  const n = rs.graph.nodes.get(nodeId);
  if (!n) throw new Error(`workflow ${rs.run.workflow_id}@${rs.run.workflow_version} has no node "${nodeId}"`);
  return n;
}

/** Hands a ready visit to `holder`: a new attempt with its deadline and lease. */
export function claim(rs: RunState, v: Visit, holder: string, now: number): void {
  const node = nodeOf(rs, v.node_id);
  transition(rs, v, "RUNNING");
  v.attempt += 1;
  v.ready_at = null;
  v.holder = holder;
  v.started_at ??= now;
  v.deadline_at = now + node.timeout * 1000;
  v.lease_expires_at = leaseExpiry(node, v, now);
  event(rs, "node.started", v, now, { attempt: v.attempt, holder });
}

/**
 * A `human_review` visit waits for a person: IN_REVIEW until a decision or its timeout (the
 * deadline; the node's timeout defaults to the workflow's). The payload is what to review.
 */
export function enterReview(rs: RunState, v: Visit, now: number): void {
  const node = nodeOf(rs, v.node_id);
  transition(rs, v, "IN_REVIEW");
  v.attempt += 1;
  v.ready_at = null;
  v.started_at ??= now;
  v.deadline_at = now + node.timeout * 1000;
  v.lease_expires_at = v.deadline_at;
  const payload = (v.payload ?? {}) as Record<string, Json>;
  event(rs, "review.requested", v, now, {
    execution_id: v.execution_id,
    title: payload.title ?? null,
    instructions: payload.instructions ?? null,
    assignees: payload.assignees ?? null,
    data: payload,
    deadline_at: v.deadline_at,
  });
}

/**
 * A visit that waits without an attempt (`sleep`, `wait_event`): WAITING until `until` (its
 * due time, `lease_expires_at`, as a review's timeout) or until something it waits for arrives.
 * `what` it waits for goes into the `node.waiting` event (a wait_event's event name and key).
 */
export function wait(rs: RunState, v: Visit, until: number, now: number, what: Record<string, Json> = {}): void {
  transition(rs, v, "WAITING");
  v.attempt += 1;
  v.ready_at = null;
  v.started_at ??= now;
  v.deadline_at = until;
  v.lease_expires_at = until;
  event(rs, "node.waiting", v, now, { attempt: v.attempt, until, ...what });
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

/** Renews the lease of a running attempt; never past its deadline. */
export function renewLease(rs: RunState, v: Visit, now: number): void {
  v.lease_expires_at = leaseExpiry(nodeOf(rs, v.node_id), v, now);
  touch(rs, v);
}

export function leaseExpiry(node: CompiledNode, v: { deadline_at: number | null }, now: number): number | null {
  if (v.deadline_at === null) return null;
  return node.heartbeat_timeout === null ? v.deadline_at : Math.min(v.deadline_at, now + node.heartbeat_timeout * 1000);
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
    // A service that said when to come back (Retry-After) is believed, within retry_max_interval.
    const delay =
      error.retry_after_ms === undefined
        ? retryDelayMs(node, v.failures, random)
        : Math.min(error.retry_after_ms, node.retry_max_interval * 1000);
    v.ready_at = now + delay;
    rs.changes.readied.push(v);
    event(rs, "node.retrying", v, now, { attempt: v.attempt, error: errorJson(error), retry_at: v.ready_at });
    return;
  }
  const reason = retryable
    ? "retries_exhausted"
    : error.reason === "invalid_output"
      ? "invalid_output"
      : "non_retryable";
  failVisit(rs, v, reason, error, now);
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
        node.kind.inline?.(rs, node, v, now);
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

function skip(rs: RunState, v: Visit, reason: string, now: number): void {
  transition(rs, v, "SKIPPED");
  v.reason = reason;
  v.ended_at = now;
  v.ready_at = null;
  event(rs, "node.skipped", v, now, { reason });
}

/**
 * Cancels an active visit. A running attempt keeps its holder and deadline until it returns
 * (its late result is fenced and releases it, see `releaseCancelled`) or its deadline passes:
 * compensation waits for it (DESIGN §6).
 */
function cancel(rs: RunState, v: Visit, reason: string, now: number): void {
  const running = v.state === "RUNNING" ? { holder: v.holder, deadline_at: v.deadline_at } : null;
  transition(rs, v, "CANCELLED");
  v.reason = reason;
  v.ended_at = now;
  clearAttempt(v);
  if (running) {
    Object.assign(v, running);
    rs.changes.cancelled.push(v);
  }
  event(rs, "node.cancelled", v, now, { reason, attempt: v.attempt });
}

/** The attempt of a cancelled visit returned (its result was fenced): it holds nothing any more. */
export function releaseCancelled(rs: RunState, v: Visit): void {
  if (v.state !== "CANCELLED" || v.holder === null) return;
  v.holder = null;
  v.deadline_at = null;
  touch(rs, v);
}

/** The safety net of DESIGN §3: when nothing is active, ready or due, the run ends. */
function finishIfIdle(rs: RunState, now: number): void {
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

export function newVisit(rs: RunState, nodeId: string, visitNo: number, priorStarts: number, now: number): Visit {
  const node = nodeOf(rs, nodeId);
  const previous = rs.current.get(nodeId);
  if (previous) {
    previous.is_current = false;
    touch(rs, previous);
  }
  const v: Visit = {
    run_id: rs.run.run_id,
    node_id: nodeId,
    visit: visitNo,
    execution_id: executionId(rs.run.run_id, nodeId, visitNo),
    agent_type: node.agent_type,
    ...notStarted(now),
    is_current: true,
    loop_activated: false,
    trigger: null,
    payload: null,
    handled: false,
    fired: null,
    prior_starts: priorStarts,
    items: null,
    concurrency_key: null,
  };
  rs.current.set(nodeId, v);
  rs.changes.inserted.add(v);
  return v;
}

/** What a new visit and a new compensation row share: PENDING, never attempted, nothing due. */
export function notStarted(now: number) {
  return {
    state: "PENDING" as const,
    output: null,
    error: null,
    reason: null,
    failures: 0,
    attempt: 0,
    interruptions: 0,
    ready_at: null,
    deadline_at: null,
    lease_expires_at: null,
    holder: null,
    created_at: now,
    started_at: null,
    ended_at: null,
  };
}

function transition(rs: RunState, v: Visit, to: VisitState): void {
  assertTransition(v.state, to, `${v.execution_id}`);
  v.state = to;
  touch(rs, v);
}

/** Drops the attempt's hold and any pending readiness (a terminal visit must never be claimable). */
function clearAttempt(v: Visit): void {
  v.ready_at = null;
  v.holder = null;
  v.deadline_at = null;
  v.lease_expires_at = null;
}

function touch(rs: RunState, v: Visit): void {
  if (!rs.changes.inserted.has(v)) rs.changes.updated.add(v);
}

export function event(
  rs: RunState,
  type: EventType,
  v: { node_id: string; visit: number } | null,
  now: number,
  data: Record<string, Json>,
): void {
  rs.changes.events.push({
    run_id: rs.run.run_id,
    type,
    node_id: v?.node_id ?? null,
    visit: v?.visit ?? null,
    trace_id: rs.run.trace_id,
    at: now,
    data,
  });
}

export function errorJson(e: VisitError): Json {
  return e as unknown as Json;
}
