/** Validation of a run-time branch choice (an agent's route or a decide hook), DESIGN §4. Pure. */
import type { CompiledNode, WorkflowGraph } from "../definition/graph.js";
import type { Decision } from "./scheduler.js";

export const END = "$end";

/**
 * Checks a chosen `next` against the node's declared success targets: a subset of them, or
 * `"$end"` alone; one loop-back edge or only forward edges. Returns the decision or why it is invalid.
 */
export function checkRoute(
  graph: WorkflowGraph,
  node: CompiledNode,
  route: readonly string[],
): Decision | { invalid: string } {
  const next = [...new Set(route)];
  if (next.includes(END)) {
    return next.length === 1
      ? { kind: "end" }
      : { invalid: `"$end" must be the only target, got ${JSON.stringify(next)}` };
  }
  const unknown = next.filter((t) => !node.successTargets.includes(t));
  if (unknown.length > 0) {
    return {
      invalid: `route to ${unknown.map((t) => `"${t}"`).join(", ")} is outside the declared targets of ${node.id} (${
        node.successTargets.length ? node.successTargets.join(", ") : "none"
      }); declare it in next_on_success or route to "$end"`,
    };
  }
  const loops = next.filter((t) => !graph.isForward(node.id, t));
  if (loops.length > 1 || (loops.length === 1 && next.length > 1)) {
    return { invalid: `one decision fires either one loop-back edge or only forward edges, got ${next.join(", ")}` };
  }
  return { kind: "targets", targets: next };
}
