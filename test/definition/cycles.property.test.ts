import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { validateWorkflow } from "../../src/definition/index.js";

interface Dag {
  nodes: {
    node_id: string;
    agent_type: string;
    depends_on: string[];
    next_on_success?: unknown;
    next_on_failure?: string[];
  }[];
  /** flow[i]: nodes i leads to through depends_on or forward edges. */
  flow: number[][];
}

const id = (i: number) => `n${i}`;

/** Random DAG-shaped definitions: depends_on only names earlier nodes, edges only go to later ones. */
const dagArbitrary = fc.integer({ min: 2, max: 9 }).chain((n) => {
  const matrix = fc.array(fc.array(fc.boolean(), { minLength: n, maxLength: n }), { minLength: n, maxLength: n });
  return fc
    .record({
      deps: matrix,
      success: matrix,
      failure: matrix,
      asCases: fc.array(fc.boolean(), { minLength: n, maxLength: n }),
    })
    .map(({ deps, success, failure, asCases }): Dag => {
      const flow: number[][] = Array.from({ length: n }, () => []);
      const nodes = Array.from({ length: n }, (_, i) => {
        const depends = [...Array(i).keys()].filter((j) => deps[i]?.[j]);
        for (const j of depends) flow[j]?.push(i);
        const later = (row: boolean[] | undefined) => [...Array(n).keys()].filter((j) => j > i && row?.[j]);
        const ok = later(success[i]);
        const ko = later(failure[i]);
        for (const j of [...ok, ...ko]) flow[i]?.push(j);
        const node: Dag["nodes"][number] = { node_id: id(i), agent_type: "worker", depends_on: depends.map(id) };
        if (ok.length > 0) {
          node.next_on_success = asCases[i]
            ? [{ when: "output.left", to: ok.slice(0, 1).map(id) }, { to: ok.map(id) }]
            : ok.map(id);
        }
        if (ko.length > 0) node.next_on_failure = ko.map(id);
        return node;
      });
      return { nodes, flow };
    });
});

function reachableFrom(start: number, flow: number[][]): Set<number> {
  const seen = new Set([start]);
  const queue = [start];
  for (let q = queue.pop(); q !== undefined; q = queue.pop()) {
    for (const next of flow[q] ?? []) {
      if (!seen.has(next)) {
        seen.add(next);
        queue.push(next);
      }
    }
  }
  return seen;
}

describe("cycle detection (property)", () => {
  it("accepts every DAG-shaped definition without cycle errors", () => {
    fc.assert(
      fc.property(dagArbitrary, (dag) => {
        const result = validateWorkflow({ id: "dag", nodes: dag.nodes });
        expect(result.errors.filter((e) => e.message.startsWith("cycle"))).toEqual([]);
        expect(result.ok).toBe(true);
      }),
    );
  });

  it("reports a cycle when an ancestor comes to depend on a later descendant", () => {
    const withBackEdge = dagArbitrary.chain((dag) => {
      const pairs = dag.nodes.flatMap((_, a) =>
        [...reachableFrom(a, dag.flow)].filter((d) => d > a).map((d) => [a, d] as const),
      );
      return pairs.length === 0 ? fc.constant(null) : fc.constantFrom(...pairs).map((pair) => ({ dag, pair }));
    });
    fc.assert(
      fc.property(withBackEdge, (sample) => {
        if (sample === null) return;
        const { dag, pair } = sample;
        const [ancestor, descendant] = pair;
        const nodes = structuredClone(dag.nodes);
        const target = nodes[ancestor];
        if (!target) throw new Error("bad sample");
        target.depends_on.push(id(descendant));
        const result = validateWorkflow({ id: "dag", nodes });
        const cycles = result.errors.filter((e) => e.message.startsWith("cycle "));
        expect(result.ok).toBe(false);
        expect(cycles.length).toBeGreaterThan(0);
        // Every cycle goes through the new entry, the only one naming a later node.
        for (const cycle of cycles) {
          expect(cycle.path).toBe(`nodes[${ancestor}].depends_on[${target.depends_on.length - 1}]`);
          const names = (cycle.message.slice("cycle ".length).split(":")[0] ?? "").split(" -> ");
          const steps = names.slice(1).map((to, k) => `${names[k]}>${to}`);
          expect(steps).toContain(`${id(descendant)}>${id(ancestor)}`);
        }
      }),
    );
  });
});
