/** The admin page's graph: what a definition draws (tolerating one being typed) and where the layout puts it. */
import { describe, expect, it } from "vitest";
import { graphWorkflow } from "../../bench/workloads.js";
import { layout, NODE_HEIGHT, NODE_WIDTH } from "../../src/web/graph/layout.js";
import { workflowGraph } from "../../src/web/graph/model.js";
import type { Visit } from "../../src/web/types.js";

const CONTENT = {
  id: "content",
  nodes: [
    { node_id: "fetch_a", agent_type: "collector" },
    { node_id: "fetch_b", agent_type: "collector" },
    {
      node_id: "review",
      agent_type: "reviewer",
      depends_on: ["fetch_a", "fetch_b"],
      next_on_success: ["publish", "rework"],
    },
    { node_id: "rework", agent_type: "editor", next_on_success: "review" },
    {
      node_id: "publish",
      agent_type: "publisher",
      next_on_success: [{ when: "output.ok", to: "summary" }],
      next_on_failure: "alert",
    },
    { node_id: "summary", agent_type: "aggregator" },
    { node_id: "alert", agent_type: "pager" },
  ],
};

const visit = (node_id: string, state: Visit["state"], fired: string[] | null = null) =>
  ({ node_id, state, fired }) as Visit;

describe("workflowGraph", () => {
  it("draws depends_on and next edges, loop-backs (to a node listed earlier) marked, labels from cases", () => {
    const graph = workflowGraph(CONTENT);
    expect(graph.nodes.map((n) => n.id)).toEqual(CONTENT.nodes.map((n) => n.node_id));
    expect(graph.edges.map((e) => `${e.from}->${e.to} ${e.kind} ${e.label ?? ""}${e.loop ? " loop" : ""}`)).toEqual([
      "fetch_a->review depends ",
      "fetch_b->review depends ",
      "review->publish success ok",
      "review->rework success ok",
      "rework->review success ok loop",
      "publish->summary success output.ok",
      "publish->alert failure fail",
    ]);
  });

  it("marks the path a run took: succeeded dependencies, and the edges its visits fired", () => {
    const graph = workflowGraph(CONTENT, [
      visit("fetch_a", "SUCCEEDED"),
      visit("fetch_b", "FAILED"),
      visit("review", "SUCCEEDED", ["publish"]),
      visit("publish", "FAILED", ["alert"]),
    ]);
    const taken = graph.edges.filter((e) => e.taken).map((e) => `${e.from}->${e.to}`);
    expect(taken).toEqual(["fetch_a->review", "review->publish", "publish->alert"]);
    expect(graph.nodes.find((n) => n.id === "review")?.visit?.state).toBe("SUCCEEDED");
  });

  it("draws what it can of a definition being typed: no crash on wrong types, unknown targets left out", () => {
    expect(workflowGraph(null)).toEqual({ nodes: [], edges: [] });
    expect(workflowGraph({ nodes: "nope" })).toEqual({ nodes: [], edges: [] });
    const graph = workflowGraph({
      nodes: [
        { node_id: "a", agent_type: 7, next_on_success: [{ to: ["b", "ghost"] }, 3] },
        "junk",
        { node_id: "b", depends_on: "a", next_on_failure: { to: "a" } },
        { node_id: "a", agent_type: "duplicate" },
      ],
    });
    expect(graph.nodes).toEqual([
      { id: "a", agentType: "?" },
      { id: "b", agentType: "?" },
    ]);
    expect(graph.edges.map((e) => `${e.from}->${e.to}`)).toEqual(["a->b", "a->b"]);
  });
});

describe("layout", () => {
  const ids = CONTENT.nodes.map((n) => n.node_id);
  const edges = workflowGraph(CONTENT).edges;

  it("puts each node below everything it follows, loop-backs aside, without overlaps", () => {
    const drawn = layout(ids, edges);
    expect(drawn.layers).toEqual([["fetch_a", "fetch_b"], ["review"], ["rework", "publish"], ["summary", "alert"]]);
    for (const e of edges.filter((x) => !x.loop)) {
      expect(drawn.boxes.get(e.to)?.layer, `${e.from}->${e.to}`).toBeGreaterThan(drawn.boxes.get(e.from)?.layer ?? 0);
    }
    const boxes = [...drawn.boxes.values()];
    for (const [i, a] of boxes.entries()) {
      for (const b of boxes.slice(i + 1)) {
        const apart =
          a.x + NODE_WIDTH <= b.x || b.x + NODE_WIDTH <= a.x || a.y + NODE_HEIGHT <= b.y || b.y + NODE_HEIGHT <= a.y;
        expect(apart).toBe(true);
      }
    }
    for (const box of boxes) {
      expect(box.x + NODE_WIDTH).toBeLessThanOrEqual(drawn.width);
      expect(box.y + NODE_HEIGHT).toBeLessThanOrEqual(drawn.height);
    }
    // Every edge has a path; the loop-back rework -> review runs in a lane outside every node, on
    // the left, where rework (first in its layer) is.
    expect(drawn.shapes.every((s) => s !== null)).toBe(true);
    expect(drawn.boxes.get("rework")?.x).toBeLessThan(drawn.boxes.get("publish")?.x ?? 0);
    const loop = drawn.shapes[edges.findIndex((e) => e.loop)];
    expect(loop?.d).toMatch(/^M [\d.]+ [\d.]+ C /);
    expect(loop?.labelX).toBeGreaterThan(0);
    expect(loop?.labelX).toBeLessThan(Math.min(...boxes.map((b) => b.x)));
  });

  it("orders a layer by its neighbours, so the edges of a diamond do not cross", () => {
    // x is listed before y, but a (left) leads to y and b, c to x: in document order a -> y would cross b -> x.
    const drawn = layout(
      ["a", "b", "c", "x", "y"],
      [
        { from: "a", to: "y", loop: false },
        { from: "b", to: "x", loop: false },
        { from: "c", to: "x", loop: false },
      ],
    );
    const [top, bottom] = drawn.layers;
    expect(top).toEqual(["a", "b", "c"]);
    expect(bottom).toEqual(["y", "x"]);
  });

  it("breaks a cycle of forward edges (an invalid definition being typed) instead of looping for ever", () => {
    const drawn = layout(
      ["a", "b", "c"],
      [
        { from: "a", to: "b", loop: false },
        { from: "b", to: "c", loop: false },
        { from: "c", to: "a", loop: false },
        { from: "c", to: "c", loop: false },
        { from: "c", to: "ghost", loop: false },
      ],
    );
    expect(drawn.layers).toEqual([["a"], ["b"], ["c"]]);
    expect(drawn.shapes.map((s) => s !== null)).toEqual([true, true, true, true, false]);
  });

  it("lays out a 1,000-node workflow (the size it is kept for) with every forward edge going down and a path for each", () => {
    const big = workflowGraph(graphWorkflow("big", 1000));
    const drawn = layout(
      big.nodes.map((n) => n.id),
      big.edges,
    );
    expect(drawn.boxes.size).toBe(1000);
    for (const e of big.edges.filter((x) => !x.loop)) {
      expect(drawn.boxes.get(e.to)?.layer, `${e.from}->${e.to}`).toBeGreaterThan(drawn.boxes.get(e.from)?.layer ?? 0);
    }
    expect(drawn.shapes.every((s) => s !== null)).toBe(true);
    const taken = new Set([...drawn.boxes.values()].map((b) => `${b.x},${b.y}`));
    expect(taken.size).toBe(1000);
  });
});
