/**
 * The aggregator inline: a ready aggregator whose edges need no expression runs in the
 * transaction that made it ready (`settle`), collecting `{ <source>: output }` of its SUCCEEDED
 * sources; one whose edges need one is left ready for its built-in handler.
 */
import { describe, expect, it } from "vitest";
import { claim, ENGINE_HOLDER, failAttempt, startRunState } from "../../../src/core/scheduler.js";
import { parseWorkflowOrThrow } from "../../../src/definition/index.js";
import { makeRun } from "../helpers.js";
import { complete, cur, engineStarts, events, fresh, start, T0 } from "./helpers.js";

const sources = [{ node_id: "a" }, { node_id: "b" }];
const agg = (extra: Record<string, unknown> = {}) => ({
  node_id: "sum",
  agent_type: "aggregator",
  depends_on: ["a", "b"],
  ...extra,
});

describe("aggregator", async () => {
  it("is claimed like an agent's node when it does not run inline", async () => {
    expect(engineStarts(start([...sources, agg()]), "sum")).toBe(false);
  });

  it("runs inline as its last source succeeds: SUCCEEDED with its sources' outputs, by the engine", async () => {
    const rs = start([...sources, agg({ next_on_success: "after" }), { node_id: "after" }]);
    complete(rs, "a", { x: 1 }, T0);
    fresh(rs);
    complete(rs, "b", [2], T0 + 5);
    const v = cur(rs, "sum");
    expect(v).toMatchObject({ state: "SUCCEEDED", attempt: 1, output: { a: { x: 1 }, b: [2] }, ended_at: T0 + 5 });
    expect(events(rs)).toEqual([
      "node.started:b",
      "node.succeeded:b",
      "node.ready:sum",
      "node.started:sum",
      "node.succeeded:sum",
      "node.ready:after",
    ]);
    expect(rs.changes.events.find((e) => e.type === "node.started" && e.node_id === "sum")?.data).toMatchObject({
      holder: ENGINE_HOLDER,
    });
  });

  it("collects only payload.sources, and only those that SUCCEEDED", async () => {
    const rs = start([
      ...sources,
      { node_id: "c", retry_count: 0, next_on_failure: "handle" },
      { node_id: "handle" },
      agg({ depends_on: ["a", "b", "c"], payload: { sources: ["b", "c"] }, join: "all_done" }),
    ]);
    complete(rs, "a", 1, T0);
    complete(rs, "b", 2, T0);
    const c = cur(rs, "c");
    claim(rs, c, "w1", T0);
    failAttempt(rs, c, { message: "boom", reason: "error" }, false, T0 + 1);
    expect(c.state).toBe("FAILED");
    expect(cur(rs, "sum")).toMatchObject({ state: "SUCCEEDED", output: { b: 2 } });
  });

  it("is left ready for its handler when an edge needs an expression, or it has a decide hook", async () => {
    for (const extra of [
      { next_on_success: [{ when: "output.a.x = 1", to: "after" }, { to: "after" }] },
      { decide: "pick", next_on_success: "after" },
    ]) {
      const rs = start([...sources, agg(extra), { node_id: "after" }]);
      complete(rs, "a", { x: 1 }, T0);
      complete(rs, "b", 2, T0);
      expect(cur(rs, "sum")).toMatchObject({ state: "PENDING", ready_at: T0, attempt: 0 });
    }
  });

  it("fails invalid_output, not retried, when the outputs together pass the output limit", async () => {
    const { graph } = parseWorkflowOrThrow(
      { id: "core-test", nodes: [...sources, agg()].map((n) => ({ agent_type: "worker", ...n })) },
      { maxOutputBytes: 20 },
    );
    const rs = startRunState(makeRun(), graph, T0);
    complete(rs, "a", "0123456789", T0);
    complete(rs, "b", "0123456789", T0);
    const v = cur(rs, "sum");
    expect(v).toMatchObject({ state: "FAILED", reason: "invalid_output", attempt: 1 });
    expect(v.error?.message).toMatch(
      /^the aggregator's output is \d+ bytes, over the limit of 20 \(maxPayloadBytes\): list fewer sources/,
    );
  });
});
