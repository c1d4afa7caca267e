import { describe, expect, it } from "vitest";
import { type CompiledNode, parseWorkflowOrThrow, type WorkflowGraph } from "../../src/definition/index.js";
import { caseStudy, wf } from "./fixtures.js";

function graphOf(json: unknown): WorkflowGraph {
  return parseWorkflowOrThrow(json).graph;
}

function node(graph: WorkflowGraph, id: string): CompiledNode {
  const n = graph.nodes.get(id);
  if (!n) throw new Error(`no node ${id}`);
  return n;
}

describe("effective settings", () => {
  it("uses built-in defaults when neither node nor defaults set a field", () => {
    const n = node(graphOf(wf([{ node_id: "a" }])), "a");
    expect(n).toMatchObject({
      retry_count: 3,
      retry_interval: 30,
      retry_backoff: "fixed",
      retry_max_interval: 3600,
      retry_jitter: "none",
      timeout: 300,
      heartbeat_timeout: null,
      max_visits: 10,
      join: "all",
    });
  });

  it("takes the node value first, then defaults", () => {
    const g = graphOf(
      wf(
        [
          { node_id: "a", retry_count: 0, timeout: 5 },
          { node_id: "b", depends_on: ["a"], join: "any" },
        ],
        {
          defaults: {
            retry_count: 5,
            retry_interval: 2.5,
            retry_backoff: "exponential",
            retry_max_interval: 60,
            retry_jitter: "full",
            timeout: 100,
            heartbeat_timeout: 20,
            max_visits: 3,
          },
        },
      ),
    );
    expect(node(g, "a")).toMatchObject({ retry_count: 0, timeout: 5, retry_interval: 2.5, max_visits: 3 });
    expect(node(g, "b")).toMatchObject({
      retry_count: 5,
      retry_interval: 2.5,
      retry_backoff: "exponential",
      retry_max_interval: 60,
      retry_jitter: "full",
      timeout: 100,
      heartbeat_timeout: 20,
      max_visits: 3,
      join: "any",
    });
  });

  it("gives human_review its own timeout or the workflow timeout, ignoring defaults, and no retries", () => {
    const g = graphOf(
      wf(
        [
          { node_id: "r1", agent_type: "human_review" },
          { node_id: "r2", agent_type: "human_review", timeout: 50 },
        ],
        { timeout: 7200, defaults: { timeout: 10, retry_count: 4, retry_interval: 1 } },
      ),
    );
    expect(node(g, "r1")).toMatchObject({ timeout: 7200, retry_count: 0, retry_interval: 30 });
    expect(node(g, "r2").timeout).toBe(50);
  });

  it("defaults the workflow timeout to 86400 and keeps node retry fields unset in the definition", () => {
    const { workflow } = parseWorkflowOrThrow(wf([{ node_id: "a" }]));
    expect(workflow.timeout).toBe(86400);
    expect(workflow.defaults).toEqual({});
    expect(workflow.nodes[0]).toEqual({ node_id: "a", agent_type: "worker", payload: {}, depends_on: [], join: "all" });
  });
});

describe("graph of the DESIGN case study", () => {
  const g = graphOf(caseStudy());

  it("keeps document order", () => {
    expect(g.order).toEqual([
      "fetch_a",
      "fetch_b",
      "fetch_c",
      "review",
      "human_check",
      "publish_a",
      "publish_b",
      "publish_c",
      "summary",
    ]);
    expect([...g.nodes.keys()]).toEqual(g.order);
    expect(node(g, "review").index).toBe(3);
  });

  it("orients edges by document order", () => {
    expect(g.isForward("review", "publish_a")).toBe(true);
    expect(g.isForward("review", "human_check")).toBe(true);
    expect(g.isForward("human_check", "review")).toBe(false);
    expect(node(g, "human_check").loopBackTargets).toEqual(["review"]);
    expect(node(g, "review").loopBackTargets).toEqual([]);
  });

  it("knows which nodes are gated and by whom", () => {
    const gated = g.order.filter((id) => node(g, id).gated);
    expect(gated).toEqual(["human_check", "publish_a", "publish_b", "publish_c"]);
    expect(node(g, "publish_b").incomingForward).toEqual(["review"]);
    // A loop-back does not gate its target: review stays free.
    expect(node(g, "review").gated).toBe(false);
    expect(node(g, "review").incomingForward).toEqual([]);
  });

  it("lists start nodes, sinks, dependents and what a terminal visit affects", () => {
    expect(g.startNodes).toEqual(["fetch_a", "fetch_b", "fetch_c"]);
    expect(g.sinks).toEqual(["human_check", "summary"]);
    expect(node(g, "fetch_a").dependents).toEqual(["review"]);
    expect(node(g, "review").affected).toEqual(["human_check", "publish_a", "publish_b", "publish_c"]);
    expect(node(g, "publish_a").affected).toEqual(["summary"]);
    expect(node(g, "human_check").affected).toEqual([]);
  });

  it("computes the region of the loop-back", () => {
    expect([...g.regions.keys()]).toEqual(["review"]);
    expect(g.regions.get("review")).toEqual([
      "review",
      "human_check",
      "publish_a",
      "publish_b",
      "publish_c",
      "summary",
    ]);
  });

  it("normalizes the edges", () => {
    const review = node(g, "review");
    expect(review.successCases?.map((c) => c.to)).toEqual([["publish_a", "publish_b", "publish_c"], ["human_check"]]);
    expect(review.successCases?.[0]?.when).not.toBeNull();
    expect(review.successCases?.[1]?.when).toBeNull();
    expect(review.successTargets).toEqual(["publish_a", "publish_b", "publish_c", "human_check"]);
    expect(node(g, "human_check").successCases).toEqual([{ when: null, to: ["review"] }]);
    expect(node(g, "summary").successCases).toBeNull();
    expect(node(g, "summary").failureTargets).toEqual([]);
  });

  it("compiles payloads only where they hold templates", () => {
    expect(node(g, "fetch_a").payload?.readsNodes).toEqual([]);
    expect(node(g, "publish_a").payload).toBeNull();
    expect(node(g, "summary").sources).toEqual(["publish_a", "publish_b", "publish_c"]);
    expect(node(g, "fetch_a").sources).toEqual([]);
  });
});

describe("graph of a small loop", () => {
  // start -> work -> check; check loops back to work or goes on to done -> report.
  const g = graphOf(
    wf([
      { node_id: "start" },
      { node_id: "work", depends_on: ["start"] },
      {
        node_id: "check",
        depends_on: ["work"],
        next_on_success: [{ when: "output.again", to: "work" }, { to: "done" }],
        next_on_failure: "fix",
      },
      { node_id: "done" },
      { node_id: "report", depends_on: ["done"] },
      {
        node_id: "fix",
        agent_type: "aggregator",
        depends_on: ["work"],
        payload: { sources: ["work"] },
        next_on_success: "check",
      },
    ]),
  );

  it("finds the loop-backs and their regions", () => {
    expect(node(g, "check").loopBackTargets).toEqual(["work"]);
    expect(node(g, "fix").loopBackTargets).toEqual(["check"]);
    expect(g.regions.get("work")).toEqual(["work", "check", "done", "report", "fix"]);
    expect(g.regions.get("check")).toEqual(["check", "done", "report", "fix"]);
  });

  it("gates success and failure targets", () => {
    expect(node(g, "done").gated).toBe(true);
    expect(node(g, "fix").gated).toBe(true);
    expect(node(g, "fix").incomingForward).toEqual(["check"]);
    expect(node(g, "check").failureTargets).toEqual(["fix"]);
    expect(node(g, "check").affected).toEqual(["done", "fix"]);
    expect(node(g, "work").affected).toEqual(["check", "fix"]);
  });

  it("lists start nodes, sinks and aggregator sources", () => {
    expect(g.startNodes).toEqual(["start"]);
    expect(g.sinks).toEqual(["report", "fix"]);
    expect(node(g, "fix").sources).toEqual(["work"]);
    expect(g.isForward("check", "check")).toBe(false);
  });
});
