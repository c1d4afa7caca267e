/** What a node's expressions (templates, `when` cases, decide hooks) see of its run. */
import type { Json, RunParent } from "../../core/types.js";
import type { ExpressionContext } from "../../definition/expressions.js";
import type { WorkflowGraph } from "../../definition/graph.js";
import type { Store } from "../../store/store.js";

/** Input, the latest terminal visit of every node (unless `readNodes` is false), run, and `output`. */
export async function expressionContext(
  store: Store,
  t: { run_id: string; trace_id: string; input: Json; parent?: RunParent | null },
  graph: WorkflowGraph,
  output?: Json,
  readNodes = true,
): Promise<ExpressionContext> {
  const nodes: ExpressionContext["nodes"] = {};
  for (const id of graph.order) nodes[id] = null;
  for (const v of readNodes ? await store.latestTerminalVisits(t.run_id) : []) {
    nodes[v.node_id] = { output: v.output, status: v.state, error: v.error };
  }
  return {
    input: t.input,
    nodes,
    run: { run_id: t.run_id, trace_id: t.trace_id },
    // A map item's run: its input is the item (DESIGN §11.1: `each` templates see item and index).
    ...(t.parent?.item !== undefined ? { item: t.input, index: t.parent.item } : {}),
    ...(output !== undefined ? { output } : {}),
  };
}
