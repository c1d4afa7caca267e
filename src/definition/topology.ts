/**
 * @internal The edges of a definition, by node index, with the path of every reference.
 * Shared by validation (which must tolerate unknown ids and duplicates, to report every
 * problem at once) and by `compileGraph` (which assumes a valid definition).
 */
import type { NodeDefinition, WorkflowDefinition } from "./schema.js";

/** One declared reference to a node, with where it is written. */
export interface Ref {
  id: string;
  path: string;
}

/** One case of `next_on_success`, normalized: a plain id or list is one case without `when`. */
export interface NormalCase {
  when: string | undefined;
  /** Path of the case (`nodes[3].next_on_success[1]`) or of the field for the plain forms. */
  path: string;
  /** Path of the list of targets, for errors about the list as a whole. */
  toPath: string;
  to: Ref[];
}

export interface Topology {
  /** Node id -> index of its first occurrence. */
  indexOf: Map<string, number>;
  /** Per node: resolved depends_on (deduplicated; unknown ids dropped). */
  deps: number[][];
  /** Per node: nodes whose depends_on lists it. */
  dependents: number[][];
  /** Per node: targets of its forward edges (success and failure), deduplicated. */
  forward: number[][];
  /** Per node: targets of its loop-back edges (to itself or an earlier node). */
  loopBack: number[][];
  /** Per node: sources of the forward edges into it. */
  forwardIn: number[][];
  /** Per node: dependents and forward targets: the "depends_on and forward edges" graph. */
  flow: number[][];
}

const listOf = (v: string | string[], path: string): Ref[] =>
  typeof v === "string" ? [{ id: v, path }] : v.map((id, k) => ({ id, path: `${path}[${k}]` }));

export function successCases(node: NodeDefinition, index: number): NormalCase[] | null {
  const next = node.next_on_success;
  const path = `nodes[${index}].next_on_success`;
  if (next === undefined) return null;
  if (typeof next === "string" || next.every((c) => typeof c === "string")) {
    return [{ when: undefined, path, toPath: path, to: listOf(next as string | string[], path) }];
  }
  return (next as { when?: string; to: string | string[] }[]).map((c, k) => ({
    when: c.when,
    path: `${path}[${k}]`,
    toPath: `${path}[${k}].to`,
    to: listOf(c.to, `${path}[${k}].to`),
  }));
}

export function failureRefs(node: NodeDefinition, index: number): Ref[] {
  const next = node.next_on_failure;
  return next === undefined ? [] : listOf(next, `nodes[${index}].next_on_failure`);
}

export function dependsOnRefs(node: NodeDefinition, index: number): Ref[] {
  return listOf(node.depends_on, `nodes[${index}].depends_on`);
}

export function buildTopology(def: WorkflowDefinition): Topology {
  const n = def.nodes.length;
  const indexOf = new Map<string, number>();
  def.nodes.forEach((node, i) => {
    if (!indexOf.has(node.node_id)) indexOf.set(node.node_id, i);
  });
  const empty = (): number[][] => Array.from({ length: n }, () => []);
  const t: Topology = {
    indexOf,
    deps: empty(),
    dependents: empty(),
    forward: empty(),
    loopBack: empty(),
    forwardIn: empty(),
    flow: empty(),
  };
  const add = (list: number[][], at: number, value: number) => {
    const row = list[at];
    if (row && !row.includes(value)) row.push(value);
  };
  def.nodes.forEach((node, i) => {
    for (const ref of dependsOnRefs(node, i)) {
      const d = indexOf.get(ref.id);
      if (d === undefined) continue;
      add(t.deps, i, d);
      add(t.dependents, d, i);
    }
    const targets = [...(successCases(node, i) ?? []).flatMap((c) => c.to), ...failureRefs(node, i)];
    for (const ref of targets) {
      const to = indexOf.get(ref.id);
      if (to === undefined) continue;
      if (to > i) {
        add(t.forward, i, to);
        add(t.forwardIn, to, i);
      } else add(t.loopBack, i, to);
    }
  });
  for (let i = 0; i < n; i++) {
    t.flow[i] = [...new Set([...(t.dependents[i] ?? []), ...(t.forward[i] ?? [])])].sort((a, b) => a - b);
  }
  return t;
}

/** Every node reachable from `start` (included) along `adjacency`. */
export function reachable(start: Iterable<number>, adjacency: number[][]): Set<number> {
  const seen = new Set<number>(start);
  const queue = [...seen];
  for (let q = queue.shift(); q !== undefined; q = queue.shift()) {
    for (const next of adjacency[q] ?? []) {
      if (!seen.has(next)) {
        seen.add(next);
        queue.push(next);
      }
    }
  }
  return seen;
}

/** Reverses an adjacency list. */
export function reverse(adjacency: number[][]): number[][] {
  const out: number[][] = adjacency.map(() => []);
  adjacency.forEach((targets, from) => {
    for (const to of targets) out[to]?.push(from);
  });
  return out;
}
