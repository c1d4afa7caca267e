/**
 * Upgrading a run in flight (DESIGN §16) as pure functions: whether a RUNNING run may move to
 * another version of its workflow (`upgradeRefusals`, every reason), and the move itself
 * (`upgrade`). The engine checks again under the run's lock before it moves (engine/writer).
 *
 * The rule, over the run's current visits (every node of a run has one from its start):
 * - every node with a visit exists in the target version with the same agent_type (so the same
 *   kind): a node removed, or whose agent_type changed, refuses the move;
 * - no decided visit loses the edges that activated its successors: for each visit whose edges
 *   were decided (`fired`), the target's node still has an edge of the same kind to each target
 *   (a success's among its success edges, a handled failure's among its failure edges) in the
 *   same direction (forward, or a loop-back); a visit a loop-back activated still has that
 *   loop-back edge from its trigger;
 * - no visit has an attempt running: its outcome's edges are decided against the graph it was
 *   claimed with (a map's items and a child run too), so the run moves once it ends.
 * Nodes new in the target version get fresh PENDING visits and readiness is settled, so a node
 * added after a waiting review runs once the review is approved.
 */
import type { WorkflowGraph } from "../definition/graph.js";
import { map as mapKind } from "../definition/kinds/map.js";
import { workflow as workflowKind } from "../definition/kinds/workflow.js";
import { event, newVisit, type RunState } from "./run-state.js";
import { settle } from "./scheduler.js";
import type { Run, Visit } from "./types.js";

/** What a migration asks for (`migrateRuns`): runs of `workflow_id` to `to_version`, from `from_version` only when given. */
export interface MigrationRequest {
  workflow_id: string;
  to_version: number;
  from_version: number | null;
}

/**
 * Why the run is not one the request moves, or null: only top-level runs of the workflow (a
 * child run of it is its parent's business; a map's items follow their parent's version), of an
 * older version than the target, and of `from_version` when given.
 */
export function requestRefusal(run: Run, request: MigrationRequest): string | null {
  if (run.workflow_id !== request.workflow_id) return `the run is of workflow "${run.workflow_id}"`;
  if (run.parent !== null) return `the run is a child run of run ${run.parent.run_id}: only top-level runs move`;
  const v = run.workflow_version;
  if (v === request.to_version) return `the run is at version ${v} already`;
  if (v > request.to_version)
    return `the run is at version ${v}, newer than ${request.to_version}: runs move to a newer version only`;
  if (request.from_version !== null && v !== request.from_version) {
    return `the run is at version ${v}, not ${request.from_version}`;
  }
  return null;
}

/** What the rule reads of a run: its status, its current visits, and the graph of its version. */
export type UpgradeSubject = Pick<RunState, "run" | "current" | "graph">;

/**
 * Every reason the run may not move to `to` (empty: it may), in document order of the run's
 * nodes, each naming the node and what changed.
 */
export function upgradeRefusals(rs: UpgradeSubject, to: WorkflowGraph): string[] {
  if (rs.run.status !== "RUNNING") return [`the run is ${rs.run.status}: only a RUNNING run moves`];
  const reasons: string[] = [];
  const from = rs.graph;
  for (const v of ordered(rs)) {
    const id = v.node_id;
    const node = to.nodes.get(id);
    if (!node) {
      reasons.push(`node "${id}" has a visit (${v.state}) but the new version has no such node`);
      continue;
    }
    if (node.agent_type !== v.agent_type) {
      const kinds = from.nodes.get(id)?.kind.name ?? v.agent_type;
      const kind = kinds === node.kind.name ? "" : ` (kind ${kinds} → ${node.kind.name})`;
      reasons.push(`node "${id}" changed agent_type from "${v.agent_type}" to "${node.agent_type}"${kind}`);
    }
    if (v.state === "RUNNING") reasons.push(running(v, from));
    reasons.push(...lostEdges(v, from, to));
    if (v.loop_activated && v.trigger !== null) {
      const source = to.nodes.get(v.trigger.node_id);
      const still =
        source !== undefined &&
        !to.isForward(source.id, id) &&
        (source.successTargets.includes(id) || source.failureTargets.includes(id));
      if (!still)
        reasons.push(
          `node "${id}" was activated by the loop-back from "${v.trigger.node_id}", which the new version no longer has`,
        );
    }
  }
  return reasons;
}

/** The visits in the order of the run's nodes (reasons read as the workflow does). */
function ordered(rs: UpgradeSubject): Visit[] {
  const out: Visit[] = [];
  for (const id of rs.graph.order) {
    const v = rs.current.get(id);
    if (v) out.push(v);
  }
  // A visit of a node its own graph lacks cannot be (the engine refuses to load such a run); kept for completeness.
  for (const v of rs.current.values()) if (!rs.graph.nodes.has(v.node_id)) out.push(v);
  return out;
}

function running(v: Visit, from: WorkflowGraph): string {
  const kind = from.nodes.get(v.node_id)?.kind;
  if (kind === mapKind) return `node "${v.node_id}" is a map with items in flight; migrate once it ends`;
  if (kind === workflowKind) return `node "${v.node_id}" has a child run running; migrate once it ends`;
  return `node "${v.node_id}" has an attempt running; migrate once it ends`;
}

/** The edges a decided visit fired that the new version's node lacks (of the same kind and direction). */
function lostEdges(v: Visit, from: WorkflowGraph, to: WorkflowGraph): string[] {
  if (v.fired === null || v.fired.length === 0) return [];
  const node = to.nodes.get(v.node_id);
  if (!node) return [];
  const onFailure = v.state === "FAILED";
  const edges = onFailure ? node.failureTargets : node.successTargets;
  const what = onFailure ? "next_on_failure" : "next_on_success";
  const out: string[] = [];
  for (const target of v.fired) {
    const loop = !from.isForward(v.node_id, target);
    const edge = `${loop ? "loop-back " : ""}edge ${v.node_id} → ${target}`;
    if (!edges.includes(target)) {
      out.push(`node "${v.node_id}" fired the ${edge} (${what}), which the new version no longer has`);
    } else if (to.isForward(v.node_id, target) === loop) {
      const now = loop ? "forward" : "a loop-back";
      out.push(`node "${v.node_id}" fired the ${edge}, which is ${now} in the new version`);
    }
  }
  return out;
}

/**
 * Moves a run the rule allows (`upgradeRefusals` empty) to `version`, whose graph is `to`: nodes
 * new in it get PENDING visits, readiness is settled again over the new graph, and the move is
 * recorded (`run.migrated`). The run keeps its deadline; a visit made ready before the move runs
 * with the payload it was resolved with. Returns the nodes added, in document order.
 */
export function upgrade(rs: RunState, to: WorkflowGraph, version: number, now: number): string[] {
  const fromVersion = rs.run.workflow_version;
  rs.graph = to;
  rs.run.workflow_version = version;
  rs.run.updated_at = now;
  rs.changes.runUpdated = true;
  const added = to.order.filter((id) => !rs.current.has(id));
  for (const id of added) newVisit(rs, id, 1, 0, now);
  event(rs, "run.migrated", null, now, { from_version: fromVersion, to_version: version, added });
  // Every waiting node: its dependencies or its incoming edges may have changed, not only the new ones.
  settle(rs, to.order, now);
  return added;
}
