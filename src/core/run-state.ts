/**
 * One run's in-memory state inside a write transaction, and the moves that change only one
 * visit (claim it, hold it for a review or a wait, renew or drop its lease, skip or cancel it),
 * with the bookkeeping every move shares (`transition` checks the table, `touch` marks the row,
 * `event` records what happened). No I/O, and no move here goes on to settle the run: those
 * (succeed, fail, fire edges) are the scheduler's (scheduler.ts), which the kinds' states reach
 * as `Moves` (core/kinds/kind.ts); ending a run is run-end.ts. The store persists `changes`.
 */
import type { CompiledNode, WorkflowGraph } from "../definition/graph.js";
import { assertTransition, type VisitState } from "./states.js";
import type { Compensation, EventType, InboxEvent, Json, MapItem, NewEvent, Run, Visit, VisitError } from "./types.js";

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
  /** What changed of its map items (core/kinds/map.ts); absent while nothing did, as in most runs. */
  items?: ItemChanges;
  /** Durable steps the engine records for a visit (an agent tool call's approval: core/kinds/agent.ts). */
  steps: EngineStep[];
}

/** A step the engine records in a visit's journal (DESIGN §14.1), as if its attempt `attempt` had. */
export interface EngineStep {
  execution_id: string;
  name: string;
  attempt: number;
  output: Json;
}

/** What a transaction changed of a run's map items that hold their attempts. */
export interface ItemChanges {
  /** Item rows whose attempts changed: the store writes them. */
  rows: Set<MapItem>;
  /** `map` visits an item of which ended (its counts changed): the map's step goes on with them. */
  ended: Set<Visit>;
  /** Items made ready (started by their map, or RETRYING): claimable once due, as `readied` visits. */
  readied: LoadedItem[];
}

/** The run's item changes of this transaction, made at the first. */
export function itemChanges(rs: RunState): ItemChanges {
  rs.changes.items ??= { rows: new Set(), ended: new Set(), readied: [] };
  return rs.changes.items;
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
  /**
   * The item rows of its `map` visits this flush read, by their execution_id (core/kinds/map.ts):
   * only those it works on (a result's, a claim's), never a map's whole list.
   */
  items?: Map<string, LoadedItem>;
}

/** An item row of a map visit, with its item workflow's node: the retry settings, timeout and lease its attempts have. */
export interface LoadedItem {
  row: MapItem;
  node: CompiledNode;
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
    items: undefined, // in the literal, so every Changes has one shape
    steps: [],
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
  return { run, graph, current, compensations, changes: emptyChanges(), settling: null, items: undefined };
}

export function executionId(runId: string, nodeId: string, visit: number): string {
  return `${runId}:${nodeId}:${visit}`;
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

/** The attempt fields every row that holds attempts has: a visit, a compensation row, a map item. */
export type AttemptFields = Pick<
  Visit,
  "attempt" | "ready_at" | "holder" | "started_at" | "deadline_at" | "lease_expires_at"
>;

/** A new attempt of a row, held by `holder`, with its node's deadline and lease (its state is the caller's move). */
export function startAttempt(row: AttemptFields, node: CompiledNode, holder: string, now: number): void {
  row.attempt += 1;
  row.ready_at = null;
  row.holder = holder;
  row.started_at ??= now;
  row.deadline_at = now + node.timeout * 1000;
  row.lease_expires_at = leaseExpiry(node, row, now);
}

/** Hands a ready visit to `holder`: a new attempt with its deadline and lease. */
export function claim(rs: RunState, v: Visit, holder: string, now: number): void {
  transition(rs, v, "RUNNING");
  startAttempt(v, nodeOf(rs, v.node_id), holder, now);
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

export function leaseExpiry(node: CompiledNode, v: { deadline_at: number | null }, now: number): number | null {
  if (v.deadline_at === null) return null;
  return node.heartbeat_timeout === null ? v.deadline_at : Math.min(v.deadline_at, now + node.heartbeat_timeout * 1000);
}

/** Renews the lease of a running attempt; never past its deadline. */
export function renewLease(rs: RunState, v: Visit, now: number): void {
  v.lease_expires_at = leaseExpiry(nodeOf(rs, v.node_id), v, now);
  touch(rs, v);
}

/** The attempt of a cancelled visit returned (its result was fenced): it holds nothing any more. */
export function releaseCancelled(rs: RunState, v: Visit): void {
  if (v.state !== "CANCELLED" || v.holder === null) return;
  v.holder = null;
  v.deadline_at = null;
  touch(rs, v);
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
    priority: rs.run.priority,
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

export function transition(rs: RunState, v: Visit, to: VisitState): void {
  assertTransition(v.state, to, `${v.execution_id}`);
  v.state = to;
  touch(rs, v);
}

/** Drops the attempt's hold and any pending readiness (a terminal visit must never be claimable). */
export function clearAttempt(v: Visit): void {
  v.ready_at = null;
  v.holder = null;
  v.deadline_at = null;
  v.lease_expires_at = null;
}

export function touch(rs: RunState, v: Visit): void {
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

export function skip(rs: RunState, v: Visit, reason: string, now: number): void {
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
export function cancel(rs: RunState, v: Visit, reason: string, now: number): void {
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
