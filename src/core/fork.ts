/**
 * Fork (DESIGN §16) as a pure function: a new run that keeps, without running them again, the
 * outputs of a source run's visits before a node, and runs that node and everything downstream
 * of it. The engine checks the source and the new run's input; this decides what is kept.
 */
import type { WorkflowGraph } from "../definition/graph.js";
import { ValidationError } from "../errors.js";
import { event, executionId, newVisit, type RunState, runState, settle } from "./scheduler.js";
import type { Json, Run, Visit } from "./types.js";

export interface ForkOptions {
  /** The node the fork runs again from (a node of `graph`, checked by the caller). */
  from: string;
  /** Payloads replacing the resolved payload of these nodes' first visit in the fork. */
  payloads: Readonly<Record<string, Json>>;
  /** The fork's input is not the source's (recorded in `run.forked`). */
  input_edited: boolean;
}

/** A kept visit: its number in the source, which is its number in the fork too (its steps are copied). */
export interface KeptVisit {
  node_id: string;
  visit: number;
}

/**
 * `from` and every node downstream of it in `graph` (transitively by `affected`, as a redrive
 * finds what runs again): the nodes a fork runs again whatever the source did.
 */
export function forkRegion(graph: WorkflowGraph, from: string): Set<string> {
  const region = new Set<string>();
  const queue = [from];
  for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
    if (region.has(id)) continue;
    region.add(id);
    queue.push(...(graph.nodes.get(id)?.affected ?? []));
  }
  return region;
}

/**
 * Whether a source visit outside the fork's region is kept: it ended as the workflow meant it to
 * (succeeded and not undone by a compensation, skipped by branching, failed with its failure
 * edges taken). Anything else (running, waiting, failed unhandled, cancelled or skipped by the
 * run's end) runs again in the fork.
 */
function meant(v: Visit, undone: ReadonlySet<string>): boolean {
  if (v.state === "SUCCEEDED") return !undone.has(`${v.node_id}#${v.visit}`);
  if (v.state === "SKIPPED") return v.reason?.startsWith("run_") !== true;
  return v.state === "FAILED" && v.handled;
}

/**
 * The new run's state: `run` (a new row of `graph`'s workflow, `forked_from` set), with a copy of
 * every kept visit of `source` (its state, output, payload, fired edges, trigger, loop flag and
 * visit number, under the new run's ids) and a fresh PENDING visit of every other node (those of
 * `payloads` given that payload), made ready as a start makes them. `source` is not changed.
 * Returns the state and the kept visits, in document order.
 * @throws ValidationError naming the payloads of kept or unknown nodes, and the kept nodes `graph`
 * has not with the same agent_type (a fork to another version).
 */
export function forkRunState(
  source: RunState,
  run: Run,
  graph: WorkflowGraph,
  o: ForkOptions,
  now: number,
): { rs: RunState; kept: KeptVisit[] } {
  const region = forkRegion(graph, o.from);
  const undone = new Set(
    source.compensations.filter((c) => c.state === "SUCCEEDED").map((c) => `${c.node_id}#${c.visit}`),
  );
  const keep = [...source.current.values()].filter((v) => !region.has(v.node_id) && meant(v, undone));
  const keptIds = new Set(keep.map((v) => v.node_id));

  const problems = Object.keys(o.payloads).flatMap((id) => {
    if (!graph.nodes.has(id)) {
      return [{ path: `payloads.${id}`, message: `workflow ${run.workflow_id} has no node "${id}"` }];
    }
    if (keptIds.has(id)) {
      return [
        {
          path: `payloads.${id}`,
          message: `node "${id}" is kept from the source (it is before "${o.from}"); fork from it, or from a node before it, to edit its payload`,
        },
      ];
    }
    return [];
  });
  if (problems.length > 0) throw new ValidationError("Fork payloads name nodes the fork does not run", problems);
  const missing = keep.filter((v) => graph.nodes.get(v.node_id)?.agent_type !== v.agent_type);
  if (missing.length > 0) {
    throw new ValidationError(
      `Version ${run.workflow_version} of ${run.workflow_id} cannot keep what the source did: fork from an earlier node, or to the source's version`,
      missing.map((v) => ({
        path: `nodes.${v.node_id}`,
        message: graph.nodes.has(v.node_id)
          ? `is ${graph.nodes.get(v.node_id)?.agent_type} in version ${run.workflow_version}, ${v.agent_type} in the source`
          : `is not in version ${run.workflow_version}`,
      })),
    );
  }

  const rs = runState({ ...run, created_at: now, updated_at: now, deadline_at: now + graph.timeout * 1000 }, graph, []);
  event(rs, "run.started", null, now, { workflow_id: run.workflow_id, workflow_version: run.workflow_version });
  const kept: KeptVisit[] = [];
  for (const id of graph.order) {
    const old = keptIds.has(id) ? source.current.get(id) : undefined;
    if (old) {
      const copy: Visit = {
        ...old,
        run_id: run.run_id,
        execution_id: executionId(run.run_id, id, old.visit),
        is_current: true,
        ready_at: null,
        lease_expires_at: null,
        holder: null,
      };
      rs.current.set(id, copy);
      rs.changes.inserted.add(copy);
      kept.push({ node_id: id, visit: old.visit });
    } else {
      const v = newVisit(rs, id, 1, 0, now);
      const payload = o.payloads[id];
      if (payload !== undefined) v.payload = payload;
    }
  }
  event(rs, "run.forked", null, now, {
    from_run_id: source.run.run_id,
    from_node_id: o.from,
    copied: kept.map((k) => k.node_id),
    input_edited: o.input_edited,
    payloads_edited: Object.keys(o.payloads),
    source_version: source.run.workflow_version,
    version: run.workflow_version,
  });
  settle(rs, graph.order, now);
  return { rs, kept };
}
