/** What a fork keeps (core/fork.ts), without an engine: the keep rule, the copies, the refusals. */
import { describe, expect, it } from "vitest";
import { forkRegion, forkRunState } from "../../src/core/fork.js";
import { runState } from "../../src/core/scheduler.js";
import type { Compensation } from "../../src/core/types.js";
import { ValidationError } from "../../src/errors.js";
import { graphOf, makeRun, visit } from "./helpers.js";

// a, then b (its failure handled by h), c and s beside it; d joins b and c; x after a, forked from.
const NODES = [
  { node_id: "a" },
  { node_id: "b", depends_on: ["a"], next_on_failure: "h" },
  { node_id: "h" },
  { node_id: "c", depends_on: ["a"] },
  { node_id: "s", depends_on: ["a"] },
  { node_id: "d", depends_on: ["b", "c"] },
  { node_id: "x", depends_on: ["a"] },
  { node_id: "y", depends_on: ["x"] },
];
const graph = graphOf(NODES);

/** A FAILED source whose visits ended every way a visit can. */
function source() {
  const undoneH: Compensation = {
    run_id: "run1",
    seq: 1,
    node_id: "h",
    visit: 1,
    execution_id: "run1:h:1:compensate",
    agent_type: "undo",
    state: "SUCCEEDED",
    output: null,
    error: null,
    reason: null,
    failures: 0,
    attempt: 1,
    interruptions: 0,
    ready_at: null,
    deadline_at: null,
    lease_expires_at: null,
    holder: null,
    created_at: 5,
    started_at: 5,
    ended_at: 6,
  };
  return runState(
    makeRun({ status: "FAILED", ended_at: 9, input: { topic: "cats" } }),
    graph,
    [
      visit("a", "SUCCEEDED", { output: { facts: 1 }, fired: [], attempt: 1, started_at: 1, ended_at: 2 }),
      visit("b", "FAILED", { handled: true, fired: ["h"], reason: "agent_error", attempt: 2, failures: 2 }),
      visit("h", "SUCCEEDED", { output: { handled: true }, fired: [], trigger: { node_id: "b", visit: 1 } }),
      visit("c", "FAILED", { reason: "agent_error" }),
      visit("s", "SKIPPED", { reason: "branch_not_taken" }),
      visit("d", "SKIPPED", { reason: "run_failed" }),
      visit("x", "SUCCEEDED", { output: { old: true }, fired: [] }),
      visit("y", "SUCCEEDED", { output: { old: true }, fired: [] }),
    ],
    [undoneH],
  );
}

const forkRow = () =>
  makeRun({ run_id: "fork1", input: { topic: "owls" }, forked_from: { run_id: "run1", node_id: "x" } });

describe("forkRegion", () => {
  it("is the node and everything downstream of it", () => {
    expect([...forkRegion(graph, "x")]).toEqual(["x", "y"]);
    expect([...forkRegion(graph, "a")].sort()).toEqual(["a", "b", "c", "d", "h", "s", "x", "y"]);
  });
});

describe("forkRunState", () => {
  it("keeps the visits before `from` that ended as meant, copied under the new ids, and gives every other node a fresh visit", () => {
    const src = source();
    const before = structuredClone({ run: src.run, current: [...src.current.values()] });
    const { rs, kept } = forkRunState(
      src,
      forkRow(),
      graph,
      { from: "x", payloads: { x: { edited: 1 } }, input_edited: true },
      100,
    );

    // Kept: a success, a handled failure, a branch skip. Not: an undone success (h), an
    // unhandled failure (c), a skip by the run's end (d), `from` and what follows (x, y).
    expect(kept).toEqual([
      { node_id: "a", visit: 1 },
      { node_id: "b", visit: 1 },
      { node_id: "s", visit: 1 },
    ]);
    const a = rs.current.get("a");
    expect(a).toMatchObject({ run_id: "fork1", execution_id: "fork1:a:1", state: "SUCCEEDED", output: { facts: 1 } });
    expect(rs.current.get("b")).toMatchObject({ state: "FAILED", handled: true, fired: ["h"], attempt: 2 });
    expect(rs.current.get("s")).toMatchObject({ state: "SKIPPED", reason: "branch_not_taken" });
    // Fresh visits, made ready by what was kept: h by b's failure edge, c and x after a.
    for (const id of ["h", "c", "x"]) {
      expect(rs.current.get(id), id).toMatchObject({ run_id: "fork1", visit: 1, state: "PENDING", ready_at: 100 });
    }
    expect(rs.current.get("x")?.payload).toEqual({ edited: 1 });
    expect(rs.current.get("c")?.payload).toEqual({}); // resolved as a start resolves it (no template)
    // d joins b, whose kept failure was handled: skipped again, as in the source's first pass.
    expect(rs.current.get("d")).toMatchObject({ run_id: "fork1", visit: 1, state: "SKIPPED" });
    expect(rs.current.get("y")).toMatchObject({ state: "PENDING", ready_at: null });
    expect(rs.changes.inserted.size).toBe(NODES.length);

    expect(rs.changes.events.slice(0, 2)).toMatchObject([
      { run_id: "fork1", type: "run.started" },
      {
        run_id: "fork1",
        type: "run.forked",
        data: {
          from_run_id: "run1",
          from_node_id: "x",
          copied: ["a", "b", "s"],
          input_edited: true,
          payloads_edited: ["x"],
          source_version: 1,
          version: 1,
        },
      },
    ]);
    expect(rs.run).toMatchObject({
      run_id: "fork1",
      status: "RUNNING",
      created_at: 100,
      deadline_at: 100 + 86_400_000,
    });
    // The source is read, never changed.
    expect({ run: src.run, current: [...src.current.values()] }).toEqual(before);
    expect(src.changes.events).toEqual([]);
  });

  it("refuses payloads of kept or unknown nodes, naming each", () => {
    const refused = (() => {
      try {
        forkRunState(
          source(),
          forkRow(),
          graph,
          { from: "x", payloads: { a: {}, zz: {}, y: {} }, input_edited: false },
          1,
        );
      } catch (e) {
        return e;
      }
    })();
    expect(refused).toBeInstanceOf(ValidationError);
    expect((refused as ValidationError).problems.map((p) => p.path)).toEqual(["payloads.a", "payloads.zz"]);
  });

  it("refuses a version without a kept node, or with it as another agent_type", () => {
    const other = graphOf([{ node_id: "a", agent_type: "other" }, ...NODES.slice(1).filter((n) => n.node_id !== "s")]);
    const refused = (() => {
      try {
        forkRunState(
          source(),
          makeRun({ run_id: "fork1", workflow_version: 2 }),
          other,
          { from: "x", payloads: {}, input_edited: false },
          1,
        );
      } catch (e) {
        return e;
      }
    })();
    expect((refused as ValidationError).problems).toEqual([
      { path: "nodes.a", message: "is other in version 2, worker in the source" },
      { path: "nodes.s", message: "is not in version 2" },
    ]);
  });
});
