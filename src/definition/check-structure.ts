/**
 * @internal Structural checks of DESIGN §2 and §4: cycles outside loop-backs, loop-backs that
 * close no cycle, decisions mixing loop-back and forward edges, unreachable nodes. They work on
 * a topology that tolerates unknown ids and duplicates, so they run alongside the reference
 * checks and every problem is reported at once.
 */
import type { Problem } from "../errors.js";
import type { WorkflowDefinition } from "./schema.js";
import { dependsOnRefs, failureRefs, type Ref, reachable, successCases, type Topology } from "./topology.js";

export function checkStructure(def: WorkflowDefinition, topo: Topology, errors: Problem[]): void {
  const cycleNodes = checkCycles(def, topo, errors);
  checkLoopBacks(def, topo, errors);
  checkDecisions(def, topo, errors);
  checkReachability(def, topo, cycleNodes, errors);
}

/**
 * Every DFS back edge of the depends_on + forward graph closes one distinct cycle, and every
 * cycle holds one, so each reported cycle is distinct and none is missed entirely (a large
 * strongly connected component may hold more cycles than are listed; fixing these reveals the rest).
 * Returns the nodes on reported cycles.
 */
function checkCycles(def: WorkflowDefinition, topo: Topology, errors: Problem[]): Set<number> {
  const ids = def.nodes.map((n) => n.node_id);
  const state = new Array<0 | 1 | 2>(ids.length).fill(0); // unvisited, on stack, done
  const stack: number[] = [];
  const reported = new Set<string>();
  const onCycle = new Set<number>();

  const visit = (start: number): void => {
    // Iterative DFS: definitions are user input and may be deep.
    const frames: { node: number; next: number }[] = [{ node: start, next: 0 }];
    state[start] = 1;
    stack.push(start);
    while (frames.length > 0) {
      const frame = frames[frames.length - 1] as { node: number; next: number };
      const targets = topo.flow[frame.node] ?? [];
      if (frame.next >= targets.length) {
        state[frame.node] = 2;
        stack.pop();
        frames.pop();
        continue;
      }
      const to = targets[frame.next++] as number;
      if (state[to] === 0) {
        state[to] = 1;
        stack.push(to);
        frames.push({ node: to, next: 0 });
      } else if (state[to] === 1) {
        reportCycle(stack.slice(stack.indexOf(to)));
      }
    }
  };

  const reportCycle = (cycle: number[]): void => {
    // Rotate to start at the earliest node so the same cycle always reads the same way.
    const first = cycle.indexOf(Math.min(...cycle));
    const ordered = [...cycle.slice(first), ...cycle.slice(0, first)];
    const key = ordered.join(",");
    if (reported.has(key)) return;
    reported.add(key);
    for (const n of ordered) onCycle.add(n);
    const names = [...ordered, ordered[0] as number].map((i) => ids[i]).join(" -> ");
    errors.push({
      path: cyclePath(def, ordered),
      message: `cycle ${names}: depends_on and forward edges must not form a cycle; to loop, add a next_on_success or next_on_failure edge back to an earlier node`,
    });
  };

  for (let i = 0; i < ids.length; i++) if (state[i] === 0) visit(i);
  return onCycle;
}

/**
 * Forward edges only go down the list, so a cycle must hold a depends_on entry naming the same
 * or a later node: that entry is where the cycle is reported.
 */
function cyclePath(def: WorkflowDefinition, cycle: number[]): string {
  for (let k = 0; k < cycle.length; k++) {
    const from = cycle[k] as number;
    const to = cycle[(k + 1) % cycle.length] as number;
    const dependent = def.nodes[to];
    if (from >= to && dependent) {
      const fromId = def.nodes[from]?.node_id;
      const ref = dependsOnRefs(dependent, to).find((r) => r.id === fromId);
      if (ref) return ref.path;
    }
  }
  return `nodes[${cycle[0]}]`;
}

function edgeRefs(def: WorkflowDefinition, index: number): Ref[] {
  const node = def.nodes[index];
  if (!node) return [];
  return [...(successCases(node, index) ?? []).flatMap((c) => c.to), ...failureRefs(node, index)];
}

/** A loop-back edge u -> v must close a cycle: some path leads from v back to u (or v = u). */
function checkLoopBacks(def: WorkflowDefinition, topo: Topology, errors: Problem[]): void {
  const downstream = new Map<number, Set<number>>();
  def.nodes.forEach((node, u) => {
    for (const ref of edgeRefs(def, u)) {
      const v = topo.indexOf.get(ref.id);
      if (v === undefined || v >= u) continue;
      let reach = downstream.get(v);
      if (!reach) {
        reach = reachable([v], topo.flow);
        downstream.set(v, reach);
      }
      if (reach.has(u)) continue;
      errors.push({
        path: ref.path,
        message: `edge ${node.node_id} -> ${ref.id} goes back up the list but no path leads from ${ref.id} to ${node.node_id}: list ${ref.id} after ${node.node_id}`,
      });
    }
  });
}

/** One decision fires either one loop-back edge or only forward edges (DESIGN §4). */
function checkDecisions(def: WorkflowDefinition, topo: Topology, errors: Problem[]): void {
  def.nodes.forEach((node, u) => {
    const lists = (successCases(node, u) ?? []).map((c) => ({ path: c.toPath, to: c.to }));
    const failure = failureRefs(node, u);
    if (failure.length > 0) lists.push({ path: `nodes[${u}].next_on_failure`, to: failure });
    for (const list of lists) {
      const back = new Set<string>();
      const forward = new Set<string>();
      for (const ref of list.to) {
        const v = topo.indexOf.get(ref.id);
        if (v === undefined) continue;
        (v <= u ? back : forward).add(ref.id);
      }
      const [b1, b2] = [...back];
      const [f1] = [...forward];
      if (b1 !== undefined && f1 !== undefined) {
        errors.push({
          path: list.path,
          message: `one decision fires either one loop-back edge or only forward edges, but "${b1}" loops back (listed before ${node.node_id}) and "${f1}" goes forward: split them into separate cases`,
        });
      } else if (b1 !== undefined && b2 !== undefined) {
        errors.push({
          path: list.path,
          message: `one decision fires at most one loop-back edge, but "${b1}" and "${b2}" both loop back`,
        });
      }
    }
  });
}

function checkReachability(def: WorkflowDefinition, topo: Topology, cycleNodes: Set<number>, errors: Problem[]): void {
  const starts = def.nodes.flatMap((node, i) =>
    node.depends_on.length === 0 && (topo.forwardIn[i]?.length ?? 0) === 0 ? [i] : [],
  );
  if (starts.length === 0) {
    errors.push({
      path: "nodes",
      message: "no start node: every node has depends_on or is the target of a forward edge, so nothing can run first",
    });
    return;
  }
  const edges = topo.flow.map((targets, i) => [...targets, ...(topo.loopBack[i] ?? [])]);
  const reached = reachable(starts, edges);
  const startNames = starts.map((i) => def.nodes[i]?.node_id).join(", ");
  def.nodes.forEach((node, i) => {
    // Without unknown ids, an unreachable node always sits on or after a cycle. Nodes on a
    // cycle, duplicates and nodes depending on an unknown id are already reported as such;
    // the nodes after them are reported here, since they can never run either.
    const explained =
      cycleNodes.has(i) || topo.indexOf.get(node.node_id) !== i || node.depends_on.some((id) => !topo.indexOf.has(id));
    if (reached.has(i) || explained) return;
    errors.push({
      path: `nodes[${i}]`,
      message: `node "${node.node_id}" cannot be reached from any start node (${startNames}): every path to it passes through a cycle or an unknown node`,
    });
  });
}
