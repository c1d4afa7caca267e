/**
 * Shared by the kinds' state tests: a run started in memory (test/core/helpers.ts), and the two
 * calls the engine's writer makes on a kind the engine starts, made here the same way:
 * `begin` as the claiming flush does for a ready visit (engine/writer/claims.ts), `due` as the
 * sweep does when a hold's due time passed (engine/writer/sweep.ts). No database, no engine.
 */
import {
  beginVisit,
  claim,
  currentVisit,
  type Decision,
  emptyChanges,
  holdDue,
  nodeOf,
  type RunState,
  startRunState,
  succeed,
} from "../../../src/core/scheduler.js";
import type { InboxEvent, Json, Visit } from "../../../src/core/types.js";
import { graphOf, makeRun, type NodeInput } from "../helpers.js";

export const T0 = 1_000;

export function start(nodes: NodeInput[], extra: Record<string, unknown> = {}): RunState {
  return startRunState(makeRun(), graphOf(nodes, extra), T0);
}

export const cur = (rs: RunState, id: string): Visit => currentVisit(rs, id);

/** Starts a new change set, as the engine does after each transaction commits. */
export function fresh(rs: RunState): RunState {
  rs.changes = emptyChanges();
  return rs;
}

/** The change set's events as `type` or `type:node`. */
export function events(rs: RunState): string[] {
  return rs.changes.events.map((e) => (e.node_id ? `${e.type}:${e.node_id}` : e.type));
}

/** The data of the change set's last event of `type`. */
export function lastEvent(rs: RunState, type: string): Record<string, Json> | undefined {
  return rs.changes.events.filter((e) => e.type === type).at(-1)?.data as Record<string, Json> | undefined;
}

/** Whether the node's kind is started by the engine (`begin`), not claimed by an agent. */
export function engineStarts(rs: RunState, id: string): boolean {
  return nodeOf(rs, id).kind.start === "engine";
}

/**
 * The ready visit of `id` leaves PENDING through its kind's `prepare` and `begin`, as the claiming
 * flush calls them (`beginVisit`); `keyed`: the events by key its inbox holds (a wait_event's buffer).
 */
export async function begin(rs: RunState, id: string, now: number, keyed: InboxEvent[] = []): Promise<Visit> {
  const v = cur(rs, id);
  if (v.state !== "PENDING" || v.ready_at === null) throw new Error(`test set-up: ${id} is not ready`);
  await beginVisit(rs, v, now, { waitingEvents: async () => [], keyedEvents: async () => keyed });
  return v;
}

/** The due time of the visit's hold passed: its kind's `due`, as the sweep calls it (`holdDue`). */
export function due(rs: RunState, id: string, now: number): Visit {
  const v = cur(rs, id);
  holdDue(rs, v, now);
  return v;
}

/** The visits `begin` handed to the flush, whose work (a child run, a map's items) it starts. */
export function startsWork(rs: RunState): Visit[] {
  return [...rs.changes.starts];
}

/** Claims (as an agent) and succeeds the current visit of `id`, firing its success edges. */
export function complete(rs: RunState, id: string, output: Json, now: number): Visit {
  const v = cur(rs, id);
  if (v.state !== "RUNNING") claim(rs, v, "w1", now);
  const decision: Decision = { kind: "targets", targets: [...nodeOf(rs, id).successTargets] };
  succeed(rs, v, output, decision, now);
  return v;
}
