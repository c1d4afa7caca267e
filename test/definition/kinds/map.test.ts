/** `map`'s rules (DESIGN §11.1): items, each, concurrency and tolerances; plain edges, no decide hook. */
import { describe, expect, it } from "vitest";
import { validateWorkflow } from "../../../src/definition/index.js";
import { errorsOf, expectOneError, expectValid, withNode } from "./helpers.js";

const EACH = { agent_type: "researcher", payload: { question: "{{ item }}" } };
const mapping = (payload: unknown, extra: Record<string, unknown> = {}) =>
  withNode("map", { payload, ...extra }, [{ node_id: "plan" }], [{ node_id: "after" }]);
const items = "{{ nodes.plan.output.questions }}";

describe("map: payload", () => {
  it("accepts items and each (an agent or a workflow per item) with limits and a tolerance", () => {
    expectValid(mapping({ items, each: EACH }, { depends_on: ["plan"], next_on_success: "after" }));
    expectValid(mapping({ items: [1, 2, 3], each: EACH, max_concurrency: 4, max_items: 100, tolerated_failures: 1 }));
    expectValid(mapping({ items: [], each: { workflow_id: "child", version: 2, input: { q: "{{ item }}" } } }));
    expectValid(mapping({ items: [1], each: EACH, tolerated_failure_percent: 12.5 }));
    expectValid(mapping({ items: [1], each: { ...EACH, compensation: { agent_type: "undo", payload: {} } } }));
  });

  it("refuses a payload that is not an object (the format's rule, before the kind's)", () => {
    const [first] = errorsOf(mapping([1, 2]));
    expect(first?.path).toBe("nodes[1].payload");
    expect(first?.message).toContain("expected an object");
  });

  it("refuses a missing items, and items that are not an array", () => {
    expectOneError(mapping({ each: EACH }), "nodes[1].payload.items", "is required: the list to map over");
    expectOneError(
      mapping({ items: 5, each: EACH }),
      "nodes[1].payload.items",
      "must be a JSON array (the list to map over), got number",
    );
  });

  it("refuses more items than max_items, saying to raise it or split the list", () => {
    expectOneError(
      mapping({ items: [1, 2, 3], each: EACH, max_items: 2 }),
      "nodes[1].payload.items",
      "has 3 items, more than max_items (2): raise max_items (at most 100000) or split the list",
    );
  });

  it("refuses limits out of range", () => {
    expectOneError(
      mapping({ items: [], each: EACH, max_concurrency: 0 }),
      "nodes[1].payload.max_concurrency",
      "must be an integer from 1 to 10000, got 0",
    );
    expectOneError(
      mapping({ items: [], each: EACH, max_items: 100_001 }),
      "nodes[1].payload.max_items",
      "must be an integer from 1 to 100000",
    );
    expectOneError(
      mapping({ items: [], each: EACH, tolerated_failures: -1 }),
      "nodes[1].payload.tolerated_failures",
      "must be an integer from 0 to 100000",
    );
    expectOneError(
      mapping({ items: [], each: EACH, tolerated_failure_percent: 101 }),
      "nodes[1].payload.tolerated_failure_percent",
      "must be a number from 0 to 100, got 101",
    );
  });

  it("refuses a count and a percentage of tolerated failures together", () => {
    expectOneError(
      mapping({ items: [], each: EACH, tolerated_failures: 1, tolerated_failure_percent: 10 }),
      "nodes[1].payload.tolerated_failure_percent",
      "give tolerated_failures (a count) or tolerated_failure_percent, not both",
    );
  });
});

describe("map: each", () => {
  it("refuses a missing each, and one that names both or neither of an agent and a workflow", () => {
    expectOneError(mapping({ items: [] }), "nodes[1].payload.each", "is required: what runs per item");
    expectOneError(
      mapping({ items: [], each: { agent_type: "a", workflow_id: "w" } }),
      "nodes[1].payload.each",
      "has both agent_type and workflow_id",
    );
    expectOneError(
      mapping({ items: [], each: { payload: {} } }),
      "nodes[1].payload.each",
      "needs agent_type (one agent per item",
    );
  });

  it("refuses a field each does not take, naming the ones it does", () => {
    expectOneError(
      mapping({ items: [], each: { ...EACH, input: {} } }),
      "nodes[1].payload.each.input",
      "is not a field of each here (it takes agent_type, payload, compensation)",
    );
    expectOneError(
      mapping({ items: [], each: { workflow_id: "w", payload: {} } }),
      "nodes[1].payload.each.payload",
      "(it takes workflow_id, version, input)",
    );
  });

  it("refuses a templated or empty name, and a map of maps", () => {
    expectOneError(
      mapping({ items: [], each: { agent_type: "{{ item }}" } }),
      "nodes[1].payload.each.agent_type",
      "must be a name (not a template)",
    );
    expectOneError(
      mapping({ items: [], each: { workflow_id: "" } }),
      "nodes[1].payload.each.workflow_id",
      "must be a name (not a template)",
    );
    expectOneError(
      mapping({ items: [], each: { agent_type: "map" } }),
      "nodes[1].payload.each.agent_type",
      'cannot be "map": map over a workflow that holds a map node instead',
    );
  });

  it("refuses an item payload that is not an object, and a malformed item compensation", () => {
    expectOneError(
      mapping({ items: [], each: { agent_type: "a", payload: "x" } }),
      "nodes[1].payload.each.payload",
      "must be an object (the item agent's payload)",
    );
    expectOneError(
      mapping({ items: [], each: { ...EACH, compensation: { payload: {} } } }),
      "nodes[1].payload.each.compensation",
      'must be { "agent_type": ..., "payload": { ... } }',
    );
  });

  it("refuses compensation on the map when its items declare their own", () => {
    const both = mapping(
      { items: [], each: { ...EACH, compensation: { agent_type: "undo" } } },
      { compensation: { agent_type: "undo_all" } },
    );
    expectOneError(
      both,
      "nodes[1].compensation",
      "cannot declare its own: undo per item, or once for the map, not both",
    );
  });
});

describe("map: edges and hooks", () => {
  it('refuses a decide hook and "when" on its edges, every problem reported', () => {
    const errors = errorsOf(
      mapping({ items: [], each: EACH }, { decide: "pick", next_on_success: [{ when: "output.ok", to: "after" }] }),
    );
    expect(errors.map((e) => e.path)).toEqual(["nodes[1].decide", "nodes[1].next_on_success"]);
    expect(errors[0]?.message).toContain("a map node has no decide hook");
    expect(errors[1]?.message).toContain('a map node cannot branch with "when" yet');
  });

  it("leaves each unresolved in the compiled node: every item resolves it in its own run", () => {
    const each = { agent_type: "researcher", payload: { q: "{{ nodes.plan.output.topic }}: {{ item }}" } };
    const literal = validateWorkflow(mapping({ items: [1, 2], each }, { depends_on: ["plan"] }));
    const templated = validateWorkflow(mapping({ items, each }, { depends_on: ["plan"] }));
    if (!literal.ok || !templated.ok) throw new Error("expected valid definitions");
    expect(literal.graph.nodes.get("k")?.payload).toBeNull();
    expect(templated.graph.nodes.get("k")?.payload?.reads).toEqual([
      { path: "nodes[1].payload.items", node_id: "plan" },
    ]);
  });
});
