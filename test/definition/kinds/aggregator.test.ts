/** `aggregator`'s rules: `payload.sources`, when given, lists nodes it depends on. */
import { describe, expect, it } from "vitest";
import { validateWorkflow } from "../../../src/definition/index.js";
import { errorsOf, expectOneError, expectValid, withNode } from "./helpers.js";

const sources = [{ node_id: "a" }, { node_id: "b" }];
const collecting = (node: Record<string, unknown>) => withNode("aggregator", node, sources);

describe("aggregator: sources", () => {
  it("accepts no payload (it collects depends_on), or sources among depends_on", () => {
    expectValid(collecting({ depends_on: ["a", "b"] }));
    expectValid(collecting({ depends_on: ["a", "b"], payload: { sources: ["b"] } }));
  });

  it("refuses sources that are not a list of node ids", () => {
    for (const s of ["a", [1], { a: true }]) {
      expectOneError(
        collecting({ depends_on: ["a"], payload: { sources: s } }),
        "nodes[2].payload.sources",
        "must be a list of node ids",
      );
    }
  });

  it("refuses a source it does not depend on, saying to add it to depends_on", () => {
    expectOneError(
      collecting({ depends_on: ["a"], payload: { sources: ["a", "b"] } }),
      "nodes[2].payload.sources[1]",
      'source "b" is not in depends_on: an aggregator collects only nodes it waits for; add it to depends_on',
    );
  });

  it("refuses a source that is no node, suggesting the nearest", () => {
    const errors = errorsOf(collecting({ depends_on: ["a"], payload: { sources: ["a", "bb"] } }));
    expect(errors.map((e) => e.path)).toEqual(["nodes[2].payload.sources[1]"]);
    expect(errors[0]?.message).toMatch(/"bb"/);
  });

  it("refuses a secret in its payload: it stores what it collects", () => {
    const result = validateWorkflow(collecting({ depends_on: ["a"], payload: { note: "{{ secrets.KEY }}" } }));
    expect(result.ok).toBe(false);
    expect(result.errors.map((e) => e.message).join("\n")).toContain(
      "an aggregator node's payload cannot hold secrets: they go only to agents",
    );
  });

  it("compiles its sources into the graph: payload.sources, else depends_on", () => {
    const given = validateWorkflow(collecting({ depends_on: ["a", "b"], payload: { sources: ["b", "b"] } }));
    const implied = validateWorkflow(collecting({ depends_on: ["a", "b"] }));
    if (!given.ok || !implied.ok) throw new Error("expected valid definitions");
    expect(given.graph.nodes.get("k")?.sources).toEqual(["b"]);
    expect(implied.graph.nodes.get("k")?.sources).toEqual(["a", "b"]);
  });
});
