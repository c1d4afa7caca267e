/**
 * The graph of a workflow definition, optionally with a run's current visits on it: nodes in
 * document order, `depends_on` edges, and `next_on_success` / `next_on_failure` edges (an edge to
 * a node listed earlier, or to itself, is a loop-back, as the engine orients cycles: DESIGN §4).
 *
 * It reads the JSON as it is, tolerating anything malformed (the editor previews definitions
 * while they are typed, invalid ones included): what cannot be read is left out, and the
 * validation list says why.
 */
import type { Visit, VisitState } from "../types.js";

export interface GraphNode {
  /** The node_id as written (any string in a definition being typed: shown as text only). */
  id: string;
  agentType: string;
  /** The run's current visit of this node. */
  visit?: Visit;
}

export interface GraphEdge {
  from: string;
  to: string;
  kind: "depends" | "success" | "failure";
  /** `ok`, `fail`, or the `when` condition of a case. */
  label?: string;
  /** Goes back up the list (a loop): drawn dashed, around the side. */
  loop: boolean;
  /** The run went this way: its source succeeded into it, or fired it. */
  taken: boolean;
}

export interface Graph {
  nodes: GraphNode[];
  edges: GraphEdge[];
}

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** The graph of a definition (any JSON value), with the run's current visits when given. */
export function workflowGraph(definition: unknown, visits: Visit[] = []): Graph {
  const list = isObject(definition) && Array.isArray(definition.nodes) ? definition.nodes : [];
  const byId = new Map(visits.map((v) => [v.node_id, v]));
  const nodes: GraphNode[] = [];
  const index = new Map<string, number>();
  const specs: Json[] = [];
  for (const item of list) {
    if (!isObject(item) || typeof item.node_id !== "string" || index.has(item.node_id)) continue;
    index.set(item.node_id, nodes.length);
    const visit = byId.get(item.node_id);
    nodes.push({
      id: item.node_id,
      agentType: typeof item.agent_type === "string" ? item.agent_type : "?",
      ...(visit ? { visit } : {}),
    });
    specs.push(item);
  }

  const edges: GraphEdge[] = [];
  const stateOf = (id: string): VisitState | undefined => byId.get(id)?.state;
  const fired = (from: string, to: string, state: VisitState) =>
    stateOf(from) === state && (byId.get(from)?.fired ?? []).includes(to);
  nodes.forEach((node, i) => {
    const spec = specs[i] as Json;
    for (const dep of idList(spec.depends_on)) {
      if (!index.has(dep)) continue;
      edges.push({ from: dep, to: node.id, kind: "depends", loop: false, taken: stateOf(dep) === "SUCCEEDED" });
    }
    for (const { when, to } of successCases(spec.next_on_success)) {
      for (const target of to) {
        const j = index.get(target);
        if (j === undefined) continue;
        edges.push({
          from: node.id,
          to: target,
          kind: "success",
          label: when ?? "ok",
          loop: j <= i,
          taken: fired(node.id, target, "SUCCEEDED"),
        });
      }
    }
    for (const target of idList(spec.next_on_failure)) {
      const j = index.get(target);
      if (j === undefined) continue;
      edges.push({
        from: node.id,
        to: target,
        kind: "failure",
        label: "fail",
        loop: j <= i,
        taken: fired(node.id, target, "FAILED"),
      });
    }
  });
  return { nodes, edges };
}

/** A node id or a list of them (other entries ignored). */
function idList(value: unknown): string[] {
  if (typeof value === "string") return [value];
  return Array.isArray(value) ? value.filter((x): x is string => typeof x === "string") : [];
}

/** `next_on_success` as cases: a plain id or list of ids is one case without `when`. */
function successCases(value: unknown): { when?: string; to: string[] }[] {
  if (typeof value === "string") return [{ to: [value] }];
  if (!Array.isArray(value)) return [];
  const plain = value.filter((x): x is string => typeof x === "string");
  const cases = value.filter(isObject).map((c) => ({
    ...(typeof c.when === "string" ? { when: c.when } : {}),
    to: idList(c.to),
  }));
  return [...(plain.length > 0 ? [{ to: plain }] : []), ...cases];
}
