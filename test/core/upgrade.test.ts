/**
 * Upgrading a run in flight (DESIGN §16), without a database: the rule (`upgradeRefusals`, every
 * reason) and the move (`upgrade`: new nodes get visits, readiness is settled over the new graph).
 */
import { describe, expect, it } from "vitest";
import { runState } from "../../src/core/scheduler.js";
import type { Visit } from "../../src/core/types.js";
import { upgrade, upgradeRefusals } from "../../src/core/upgrade.js";
import { graphOf, makeRun, type NodeInput, visit } from "./helpers.js";

const REVIEW = { node_id: "review", agent_type: "human_review" };
const V1: NodeInput[] = [{ node_id: "draft", next_on_success: "review" }, REVIEW];

/** A run of `nodes` (version 1) with these current visits. */
function runOf(nodes: NodeInput[], visits: Visit[], status: "RUNNING" | "SUCCEEDED" = "RUNNING") {
  return runState(makeRun({ status }), graphOf(nodes), visits);
}

/** v1's run waiting in its review: draft succeeded and fired it. */
function waitingInReview() {
  return runOf(V1, [
    visit("draft", "SUCCEEDED", { fired: ["review"], output: { text: "hi" } }),
    visit("review", "IN_REVIEW", { agent_type: "human_review", attempt: 1 }),
  ]);
}

describe("upgradeRefusals", () => {
  it("allows a version that adds a node after a waiting review", () => {
    const v2 = graphOf([
      { node_id: "draft", next_on_success: "review" },
      { ...REVIEW, next_on_success: "publish" },
      { node_id: "publish" },
    ]);
    expect(upgradeRefusals(waitingInReview(), v2)).toEqual([]);
  });

  it("allows changes to what has not run: payloads, settings, a waiting visit's edges", () => {
    const rs = runOf(
      [{ node_id: "a", next_on_success: "b" }, { node_id: "b", next_on_success: "c" }, { node_id: "c" }],
      [visit("a", "SUCCEEDED", { fired: ["b"] }), visit("b", "PENDING", { ready_at: 5 }), visit("c")],
    );
    const v2 = graphOf([
      { node_id: "a", next_on_success: "b", retry_count: 5, payload: { x: 1 } },
      { node_id: "b", next_on_success: ["c", "d"] },
      { node_id: "c" },
      { node_id: "d" },
    ]);
    expect(upgradeRefusals(rs, v2)).toEqual([]);
  });

  it("refuses a version without a node the run has a visit of, and names the edge a finished visit fired into it", () => {
    const v3 = graphOf([{ node_id: "draft" }]);
    expect(upgradeRefusals(waitingInReview(), v3)).toEqual([
      'node "draft" fired the edge draft → review (next_on_success), which the new version no longer has',
      'node "review" has a visit (IN_REVIEW) but the new version has no such node',
    ]);
  });

  it("refuses rewiring the edge that led to a waiting review (docs/concepts.md's third example)", () => {
    const v4 = graphOf([
      { node_id: "draft", next_on_success: "check" },
      { node_id: "check", next_on_success: "review" },
      REVIEW,
    ]);
    expect(upgradeRefusals(waitingInReview(), v4)).toEqual([
      'node "draft" fired the edge draft → review (next_on_success), which the new version no longer has',
    ]);
  });

  it("refuses a node whose agent_type changed, saying when its kind changed too", () => {
    const rs = runOf([{ node_id: "a" }, { node_id: "b" }], [visit("a", "SUCCEEDED", { fired: [] }), visit("b")]);
    const v2 = graphOf([
      { node_id: "a", agent_type: "writer" },
      { node_id: "b", agent_type: "human_review" },
    ]);
    expect(upgradeRefusals(rs, v2)).toEqual([
      'node "a" changed agent_type from "worker" to "writer"',
      'node "b" changed agent_type from "worker" to "human_review" (kind task → human_review)',
    ]);
  });

  it("refuses rewiring an edge a finished visit fired, and keeps a success's and a failure's edges apart", () => {
    const nodes: NodeInput[] = [
      { node_id: "a", next_on_success: "b", next_on_failure: "fix" },
      { node_id: "b" },
      { node_id: "fix" },
    ];
    const succeeded = runOf(nodes, [visit("a", "SUCCEEDED", { fired: ["b"] }), visit("b"), visit("fix")]);
    const failed = runOf(nodes, [visit("a", "FAILED", { fired: ["fix"], handled: true }), visit("b"), visit("fix")]);
    const rewired = graphOf([
      { node_id: "a", next_on_success: "fix", next_on_failure: "b" },
      { node_id: "b" },
      { node_id: "fix" },
    ]);
    expect(upgradeRefusals(succeeded, rewired)).toEqual([
      'node "a" fired the edge a → b (next_on_success), which the new version no longer has',
    ]);
    expect(upgradeRefusals(failed, rewired)).toEqual([
      'node "a" fired the edge a → fix (next_on_failure), which the new version no longer has',
    ]);
    // The edges a visit did not fire may change.
    const moreFailures = graphOf([
      { node_id: "a", next_on_success: "b", next_on_failure: ["fix", "b"] },
      { node_id: "b" },
      { node_id: "fix" },
    ]);
    expect(upgradeRefusals(succeeded, moreFailures)).toEqual([]);
  });

  it("refuses an edge that kept its target but changed direction (forward ↔ loop-back)", () => {
    const rs = runOf(
      [{ node_id: "a", next_on_success: "b" }, { node_id: "b" }],
      [visit("a", "SUCCEEDED", { fired: ["b"] }), visit("b")],
    );
    const reordered = graphOf([
      { node_id: "b", next_on_success: "a" },
      { node_id: "a", next_on_success: [{ when: "output.again", to: "b" }], max_visits: 3 },
    ]);
    expect(upgradeRefusals(rs, reordered)).toEqual([
      'node "a" fired the edge a → b, which is a loop-back in the new version',
    ]);
  });

  it("refuses a visit a loop-back activated when the new version drops that loop-back", () => {
    const loop: NodeInput[] = [
      { node_id: "write", next_on_success: "check", max_visits: 3 },
      { node_id: "check", next_on_success: [{ when: "output.ok", to: "done" }, { to: "write" }] },
      { node_id: "done" },
    ];
    const rs = runOf(loop, [
      visit("write", "RUNNING", {
        visit: 2,
        loop_activated: true,
        trigger: { node_id: "check", visit: 1 },
        attempt: 1,
      }),
      visit("check", "PENDING", { visit: 2 }),
      visit("done"),
    ]);
    const noLoop = graphOf([
      { node_id: "write", next_on_success: "check" },
      { node_id: "check", next_on_success: "done" },
      { node_id: "done" },
    ]);
    expect(upgradeRefusals(rs, noLoop)).toEqual([
      'node "write" has an attempt running; migrate once it ends',
      'node "write" was activated by the loop-back from "check", which the new version no longer has',
    ]);
    // The same loop: only the running attempt refuses.
    expect(upgradeRefusals(rs, graphOf(loop))).toEqual(['node "write" has an attempt running; migrate once it ends']);
  });

  it("refuses a run with an attempt running, a map's items or a child run in flight", () => {
    const nodes: NodeInput[] = [
      { node_id: "t" },
      { node_id: "m", agent_type: "map", payload: { items: "{{ input.list }}", each: { agent_type: "worker" } } },
      { node_id: "c", agent_type: "workflow", payload: { workflow_id: "other" } },
    ];
    const rs = runOf(nodes, [
      visit("t", "RUNNING", { attempt: 1, holder: "engine-1" }),
      visit("m", "RUNNING", { agent_type: "map", attempt: 1 }),
      visit("c", "RUNNING", { agent_type: "workflow", attempt: 1 }),
    ]);
    expect(upgradeRefusals(rs, graphOf(nodes))).toEqual([
      'node "t" has an attempt running; migrate once it ends',
      'node "m" is a map with items in flight; migrate once it ends',
      'node "c" has a child run running; migrate once it ends',
    ]);
  });

  it("allows visits that wait without an attempt: retrying, ready, in review, waiting", () => {
    const nodes: NodeInput[] = [
      { node_id: "r" },
      { node_id: "p" },
      REVIEW,
      { node_id: "s", agent_type: "sleep", payload: { seconds: 60 } },
    ];
    const rs = runOf(nodes, [
      visit("r", "RETRYING", { attempt: 1, failures: 1, ready_at: 10 }),
      visit("p", "PENDING", { ready_at: 5 }),
      visit("review", "IN_REVIEW", { agent_type: "human_review", attempt: 1 }),
      visit("s", "WAITING", { agent_type: "sleep", attempt: 1 }),
    ]);
    expect(upgradeRefusals(rs, graphOf(nodes))).toEqual([]);
  });

  it("gives every reason, in the order of the run's nodes", () => {
    const rs = runOf(
      [{ node_id: "a", next_on_success: "b" }, { node_id: "b" }, { node_id: "c" }],
      [visit("a", "SUCCEEDED", { fired: ["b"] }), visit("b", "RUNNING", { attempt: 1 }), visit("c")],
    );
    const v2 = graphOf([{ node_id: "a" }, { node_id: "b", agent_type: "other" }]);
    expect(upgradeRefusals(rs, v2)).toEqual([
      'node "a" fired the edge a → b (next_on_success), which the new version no longer has',
      'node "b" changed agent_type from "worker" to "other"',
      'node "b" has an attempt running; migrate once it ends',
      'node "c" has a visit (PENDING) but the new version has no such node',
    ]);
  });

  it("refuses a run that is not RUNNING, with that reason alone", () => {
    const rs = runOf([{ node_id: "a" }], [visit("a", "SUCCEEDED", { fired: [] })], "SUCCEEDED");
    expect(upgradeRefusals(rs, graphOf([{ node_id: "b" }]))).toEqual([
      "the run is SUCCEEDED: only a RUNNING run moves",
    ]);
  });
});

describe("upgrade", () => {
  it("gives a node added after a waiting review a PENDING visit that waits for the review, and records the move", () => {
    const rs = waitingInReview();
    const v2 = graphOf([
      { node_id: "draft", next_on_success: "review" },
      { ...REVIEW, next_on_success: "publish" },
      { node_id: "publish" },
    ]);
    expect(upgrade(rs, v2, 2, 100)).toEqual(["publish"]);
    expect(rs.graph).toBe(v2);
    expect(rs.run.workflow_version).toBe(2);
    expect(rs.changes.runUpdated).toBe(true);
    const publish = rs.current.get("publish");
    expect(publish).toMatchObject({ state: "PENDING", ready_at: null, visit: 1, execution_id: "run1:publish:1" });
    expect([...rs.changes.inserted]).toEqual([publish]);
    expect(rs.changes.events.map((e) => [e.type, e.data])).toEqual([
      ["run.migrated", { from_version: 1, to_version: 2, added: ["publish"] }],
    ]);
    expect(rs.run.ended_at).toBeNull();
  });

  it("settles the new graph: a new node whose dependencies are met is ready, one on an edge not taken is skipped", () => {
    const rs = runOf(
      [{ node_id: "a", next_on_success: "b" }, { node_id: "b" }, { node_id: "hold", agent_type: "human_review" }],
      [
        visit("a", "SUCCEEDED", { fired: ["b"] }),
        visit("b", "SUCCEEDED", { fired: [] }),
        visit("hold", "IN_REVIEW", { agent_type: "human_review" }),
      ],
    );
    const v2 = graphOf([
      { node_id: "a", next_on_success: ["b", "side"] },
      { node_id: "b" },
      { node_id: "hold", agent_type: "human_review" },
      { node_id: "audit", depends_on: ["b"] },
      { node_id: "side" },
    ]);
    expect(upgradeRefusals(rs, v2)).toEqual([]);
    expect(upgrade(rs, v2, 2, 100)).toEqual(["audit", "side"]);
    expect(rs.current.get("audit")).toMatchObject({ state: "PENDING", ready_at: 100 });
    expect(rs.current.get("side")).toMatchObject({ state: "SKIPPED", reason: "branch_not_taken" });
    expect(rs.changes.events.map((e) => [e.type, e.node_id])).toEqual([
      ["run.migrated", null],
      ["node.ready", "audit"],
      ["node.skipped", "side"],
    ]);
  });
});
