/**
 * The workflows every system runs, as Skein definitions (the peers read only `node_id` and
 * `depends_on`): W1's sequences, W2's 8-node case-study DAG, W3's fan-outs. Each peer turns
 * them into its own form: DBOS into levels of steps started together, LangGraph into edges,
 * the queues into successor lists.
 */
import { DAG8, fanout, sequence } from "../workloads.js";

export interface ShapeNode {
  node_id: string;
  agent_type: string;
  depends_on?: string[];
}

export interface Shape {
  id: string;
  nodes: ShapeNode[];
}

/**
 * The Skein bench's DAG8 with its last node an ordinary step instead of the built-in
 * aggregator: every node then costs the same in every system, and with 50 ms steps the
 * critical path is 4 × 50 ms everywhere.
 */
export const PEERS_DAG8: Shape = {
  id: "peers-dag8",
  nodes: DAG8.nodes.map((n) => (n.agent_type === "aggregator" ? { ...n, agent_type: "summarizer" } : n)),
};

/** Every shape the bench runs, by id: `peers-dag8`, `seq-<n>` (W1), `fanout-<n>` (W3). */
export function shapeById(id: string): Shape {
  if (id === PEERS_DAG8.id) return PEERS_DAG8;
  const seq = /^seq-(\d+)$/.exec(id);
  if (seq) return sequence(id, Number(seq[1]));
  const fan = /^fanout-(\d+)$/.exec(id);
  if (fan) return fanout(id, Number(fan[1]));
  throw new Error(`unknown shape ${id}`);
}

/** The shapes a system registers when it opens. */
export const SHAPE_IDS = [PEERS_DAG8.id, "seq-10", "seq-100", "seq-1000", "fanout-50", "fanout-500"] as const;

/** W6's item counts, and how many items each system may run at once. */
export const W6_ITEMS = [100, 1000] as const;
export const W6_CONCURRENCY = 50;

/** For each node, the nodes that depend on it. */
export function successors(shape: Shape): Map<string, string[]> {
  const next = new Map<string, string[]>(shape.nodes.map((n) => [n.node_id, []]));
  for (const n of shape.nodes) for (const d of n.depends_on ?? []) next.get(d)?.push(n.node_id);
  return next;
}

/**
 * The nodes grouped by their longest distance from a root: every node of a level can start once
 * the levels before it are done. For the shapes here this adds no waiting the DAG does not have
 * (DAG8 is 3 → 1 → 3 → 1, a fan-out is 1 → n, a sequence is one node per level).
 */
export function levels(shape: Shape): string[][] {
  const depth = new Map<string, number>();
  const byId = new Map(shape.nodes.map((n) => [n.node_id, n]));
  const depthOf = (id: string): number => {
    const known = depth.get(id);
    if (known !== undefined) return known;
    const deps = byId.get(id)?.depends_on ?? [];
    const d = deps.length === 0 ? 0 : 1 + Math.max(...deps.map(depthOf));
    depth.set(id, d);
    return d;
  };
  const out: string[][] = [];
  for (const n of shape.nodes) (out[depthOf(n.node_id)] ??= []).push(n.node_id);
  return out;
}
