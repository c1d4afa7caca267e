/** The ELK adapter of the admin page's graph: what ELK is given, what its answer becomes, and ELK's drawing of a loop. */
import { describe, expect, it } from "vitest";
import { elkLayout, fromElk, LABEL_HEIGHT, labelWidth, toElk } from "../../src/web/graph/elk-layout.js";
import { NODE_HEIGHT, NODE_WIDTH } from "../../src/web/graph/layout.js";
import { workflowGraph } from "../../src/web/graph/model.js";
import { structureKey } from "../../src/web/graph/use-layout.js";
import type { Visit } from "../../src/web/types.js";

const LOOP = {
  id: "loop",
  nodes: [
    { node_id: "draft", agent_type: "writer" },
    {
      node_id: "critique",
      agent_type: "critic",
      depends_on: ["draft"],
      next_on_success: [{ when: "output.score >= 0.8", to: "publish" }, { to: "revise" }],
      next_on_failure: "alert",
    },
    { node_id: "revise", agent_type: "writer", next_on_success: "critique" },
    { node_id: "publish", agent_type: "publisher" },
    { node_id: "alert", agent_type: "pager" },
  ],
};

/** The points of an `M x y L x y ...` path. */
const points = (d: string) =>
  [...d.matchAll(/[ML] ([-\d.e]+) ([-\d.e]+)/g)].map((m) => ({ x: Number(m[1]), y: Number(m[2]) }));

describe("toElk", () => {
  it("gives ELK every node at the drawn size, edges by index with their labels' sizes, and leaves out unknown ends", () => {
    const graph = toElk(
      ["a", "b"],
      [
        { from: "a", to: "b", loop: false, label: "output.ok" },
        { from: "a", to: "ghost", loop: false },
        { from: "b", to: "a", loop: true },
      ],
    );
    expect(graph.children).toEqual([
      { id: "na", width: NODE_WIDTH, height: NODE_HEIGHT },
      { id: "nb", width: NODE_WIDTH, height: NODE_HEIGHT },
    ]);
    expect(graph.edges).toEqual([
      {
        id: "e0",
        sources: ["na"],
        targets: ["nb"],
        labels: [{ text: "output.ok", width: labelWidth("output.ok"), height: LABEL_HEIGHT }],
      },
      { id: "e2", sources: ["nb"], targets: ["na"] },
    ]);
    expect(graph.layoutOptions?.["elk.layered.cycleBreaking.strategy"]).toBe("MODEL_ORDER");
  });
});

describe("fromElk", () => {
  it("turns ELK's answer into boxes by node id, polylines by edge index and labels' centres", () => {
    const drawn = fromElk(
      {
        id: "graph",
        width: 300,
        height: 200,
        children: [
          { id: "na", x: 10, y: 20 },
          { id: "nb", x: 10, y: 120 },
        ],
        edges: [
          {
            id: "e1",
            sources: ["na"],
            targets: ["nb"],
            sections: [
              { id: "s", startPoint: { x: 1, y: 2 }, bendPoints: [{ x: 1, y: 50 }], endPoint: { x: 3, y: 50 } },
            ],
            labels: [{ text: "ok", x: 40, y: 60, width: 20, height: 16 }],
          },
          {
            id: "e2",
            sources: ["nb"],
            targets: ["na"],
            sections: [{ id: "t", startPoint: { x: 5, y: 6 }, endPoint: { x: 7, y: 8 } }],
          },
        ],
      },
      3,
    );
    expect(drawn.width).toBe(300);
    expect(drawn.height).toBe(200);
    expect(drawn.boxes.get("b")).toEqual({ x: 10, y: 120, layer: 0 });
    expect(drawn.shapes).toEqual([
      null,
      { d: "M 1 2 L 1 50 L 3 50", labelX: 50, labelY: 68 },
      { d: "M 5 6 L 7 8", labelX: 7, labelY: 8 },
    ]);
  });
});

describe("elkLayout", () => {
  it("draws a loop-back going back up, outside every node box, and the labels apart", async () => {
    const graph = workflowGraph(LOOP);
    const drawn = await elkLayout(
      graph.nodes.map((n) => n.id),
      graph.edges,
    );
    const box = (id: string) => drawn.boxes.get(id) as { x: number; y: number };
    expect(box("critique").y).toBeGreaterThan(box("draft").y);
    expect(box("revise").y).toBeGreaterThan(box("critique").y);
    const i = graph.edges.findIndex((e) => e.loop);
    expect(`${graph.edges[i]?.from}->${graph.edges[i]?.to}`).toBe("revise->critique");
    const loop = points(drawn.shapes[i]?.d ?? "");
    // From revise's box to critique's, above it.
    expect((loop.at(-1)?.y ?? 0) + 1).toBeLessThan(loop[0]?.y ?? 0);
    for (const [id, b] of drawn.boxes) {
      // Orthogonal segments: a segment crosses a box if it spans it on one axis and lies within it on the other.
      for (let k = 1; k < loop.length; k++) {
        const p = loop[k - 1] as { x: number; y: number };
        const q = loop[k] as { x: number; y: number };
        const crosses =
          Math.max(p.x, q.x) > b.x + 1 &&
          Math.min(p.x, q.x) < b.x + NODE_WIDTH - 1 &&
          Math.max(p.y, q.y) > b.y + 1 &&
          Math.min(p.y, q.y) < b.y + NODE_HEIGHT - 1;
        expect(crosses, `segment ${k} of the loop-back crosses ${id}`).toBe(false);
      }
    }
    const labels = graph.edges.flatMap((e, k) => {
      const s = drawn.shapes[k];
      if (!s || !e.label) return [];
      const w = labelWidth(e.label);
      return [{ x: s.labelX - w / 2, y: s.labelY - LABEL_HEIGHT / 2, w, h: LABEL_HEIGHT }];
    });
    expect(labels).toHaveLength(4);
    for (const [k, a] of labels.entries()) {
      for (const b of labels.slice(k + 1)) {
        expect(a.x + a.w <= b.x || b.x + b.w <= a.x || a.y + a.h <= b.y || b.y + b.h <= a.y).toBe(true);
      }
    }
  });
});

describe("structureKey", () => {
  it("changes with the nodes, edges and labels, not with the run's states", () => {
    const plain = structureKey(workflowGraph(LOOP));
    const visits = [{ node_id: "draft", state: "SUCCEEDED", fired: null }] as unknown as Visit[];
    expect(structureKey(workflowGraph(LOOP, visits))).toBe(plain);
    const relabelled = {
      ...LOOP,
      nodes: LOOP.nodes.map((n) =>
        n.node_id === "critique"
          ? { ...n, next_on_success: [{ when: "output.done", to: "publish" }, { to: "revise" }] }
          : n,
      ),
    };
    expect(structureKey(workflowGraph(relabelled))).not.toBe(plain);
    expect(structureKey(workflowGraph({ ...LOOP, nodes: LOOP.nodes.slice(0, 4) }))).not.toBe(plain);
  });
});
