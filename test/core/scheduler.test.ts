import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkRoute } from "../../src/core/branching.js";
import {
  claim,
  currentVisit,
  type Decision,
  ENGINE_HOLDER,
  emptyChanges,
  endRun,
  executionId,
  failAttempt,
  failVisit,
  interrupt,
  type RunState,
  renewLease,
  runState,
  settle,
  startRunState,
  succeed,
} from "../../src/core/scheduler.js";
import { deriveRunStatus, isTerminal } from "../../src/core/states.js";
import type { Json, Visit } from "../../src/core/types.js";
import { validateWorkflow, type WorkflowGraph } from "../../src/definition/index.js";
import { graphOf, makeRun, type NodeInput, visit } from "./helpers.js";

const T0 = 1_000;
const targets = (...t: string[]): Decision => ({ kind: "targets", targets: t });
const NONE: Decision = { kind: "targets", targets: [] };
const boom = { message: "boom", reason: "error" };

function start(nodes: NodeInput[], extra: Record<string, unknown> = {}): RunState {
  return startRunState(makeRun(), graphOf(nodes, extra), T0);
}

const cur = (rs: RunState, id: string) => currentVisit(rs, id);

/** Starts a new change set, as the engine does after each transaction commits. */
function fresh(rs: RunState): RunState {
  rs.changes = emptyChanges();
  return rs;
}

/** Events as `type` or `type:node`. */
function events(rs: RunState): string[] {
  return rs.changes.events.map((e) => (e.node_id ? `${e.type}:${e.node_id}` : e.type));
}

const key = (v: Visit) => `${v.node_id}:${v.visit}`;
const keys = (vs: Iterable<Visit>) => [...vs].map(key).sort();

/** Claims the current visit of each node and returns it. */
function run(rs: RunState, now: number, ...ids: string[]): Visit[] {
  return ids.map((id) => {
    const v = cur(rs, id);
    claim(rs, v, "w1", now);
    return v;
  });
}

/** Claims and succeeds the current visit of `id`. */
function complete(rs: RunState, id: string, output: Json, decision: Decision, now: number): Visit {
  const v = cur(rs, id);
  if (v.state !== "RUNNING") claim(rs, v, "w1", now);
  succeed(rs, v, output, decision, now);
  return v;
}

describe("startRunState", () => {
  const nodes: NodeInput[] = [
    { node_id: "a", next_on_success: [{ when: "output.go = true", to: "g" }] },
    { node_id: "b" },
    { node_id: "c", depends_on: ["a", "b"] },
    { node_id: "g" },
  ];

  it("creates one PENDING visit 1 per node and makes the start nodes ready", () => {
    const rs = start(nodes);
    expect(rs.graph.startNodes).toEqual(["a", "b"]);
    for (const id of ["a", "b", "c", "g"]) {
      const v = cur(rs, id);
      expect(v).toMatchObject({
        run_id: "run1",
        node_id: id,
        visit: 1,
        execution_id: `run1:${id}:1`,
        state: "PENDING",
        is_current: true,
        attempt: 0,
        failures: 0,
        prior_starts: 0,
        created_at: T0,
        fired: null,
      });
    }
    expect(cur(rs, "a").ready_at).toBe(T0);
    expect(cur(rs, "b").ready_at).toBe(T0);
    expect(cur(rs, "c").ready_at).toBeNull();
    expect(cur(rs, "g").ready_at).toBeNull();
    expect(rs.run.status).toBe("RUNNING");
    expect(rs.run.ended_at).toBeNull();
    expect(rs.changes.ended).toBe(false);
  });

  it("emits run.started, then node.ready for the start nodes in document order", () => {
    const rs = start(nodes);
    expect(events(rs)).toEqual(["run.started", "node.ready:a", "node.ready:b"]);
    const [started, readyA] = rs.changes.events;
    expect(started).toMatchObject({
      run_id: "run1",
      trace_id: "trace1",
      at: T0,
      node_id: null,
      visit: null,
      data: { workflow_id: "core-test", workflow_version: 1 },
    });
    expect(readyA).toMatchObject({ node_id: "a", visit: 1, at: T0, data: {} });
  });

  it("inserts every visit, updates none, and lists the ready ones", () => {
    const rs = start(nodes);
    expect(keys(rs.changes.inserted)).toEqual(["a:1", "b:1", "c:1", "g:1"]);
    expect(rs.changes.updated.size).toBe(0);
    expect(keys(rs.changes.readied)).toEqual(["a:1", "b:1"]);
    expect(rs.changes.cancelled).toEqual([]);
  });

  it("resolves a template-free payload when the visit becomes ready", () => {
    const rs = start([
      { node_id: "a", payload: { k: 1 } },
      { node_id: "b", payload: { t: "{{ input.x }}" } },
    ]);
    expect(cur(rs, "a").payload).toEqual({ k: 1 });
    // A templated payload is resolved by the engine outside the transaction.
    expect(cur(rs, "b").payload).toBeNull();
  });
});

describe("claim, renewLease and succeed", () => {
  it("claim starts an attempt with its deadline and lease", () => {
    const rs = fresh(
      start([
        { node_id: "a", timeout: 10 },
        { node_id: "b", timeout: 10, heartbeat_timeout: 2 },
      ]),
    );
    const [a, b] = run(rs, 5_000, "a", "b") as [Visit, Visit];
    expect(a).toMatchObject({
      state: "RUNNING",
      attempt: 1,
      holder: "w1",
      ready_at: null,
      started_at: 5_000,
      deadline_at: 15_000,
      lease_expires_at: 15_000,
    });
    expect(b).toMatchObject({ deadline_at: 15_000, lease_expires_at: 7_000 });
    expect(events(rs)).toEqual(["node.started:a", "node.started:b"]);
    expect(rs.changes.events[0]?.data).toEqual({ attempt: 1, holder: "w1" });
    expect(keys(rs.changes.updated)).toEqual(["a:1", "b:1"]);
    expect(rs.changes.inserted.size).toBe(0);
  });

  it("renewLease extends the lease but never past the deadline", () => {
    const rs = start([{ node_id: "b", timeout: 10, heartbeat_timeout: 2 }]);
    const [b] = run(rs, 5_000, "b") as [Visit];
    fresh(rs);
    renewLease(rs, b, 6_000);
    expect(b.lease_expires_at).toBe(8_000);
    renewLease(rs, b, 14_000);
    expect(b.lease_expires_at).toBe(15_000);
    expect(keys(rs.changes.updated)).toEqual(["b:1"]);
    expect(rs.changes.events).toEqual([]);
  });

  it("succeed records the output, fires the decision and readies what it activates", () => {
    const rs = start([
      { node_id: "a", next_on_success: [{ when: "output.go = true", to: "g" }] },
      { node_id: "b" },
      { node_id: "c", depends_on: ["a", "b"] },
      { node_id: "g" },
    ]);
    const [a] = run(rs, 2_000, "a", "b") as [Visit];
    fresh(rs);
    succeed(rs, a, { go: true }, targets("g"), 3_000);
    expect(a).toMatchObject({
      state: "SUCCEEDED",
      output: { go: true },
      fired: ["g"],
      ended_at: 3_000,
      holder: null,
      deadline_at: null,
      lease_expires_at: null,
    });
    const g = cur(rs, "g");
    expect(g).toMatchObject({ state: "PENDING", ready_at: 3_000, trigger: { node_id: "a", visit: 1 } });
    expect(cur(rs, "c").ready_at).toBeNull(); // still waits for b
    expect(events(rs)).toEqual(["node.succeeded:a", "node.ready:g"]);
    expect(rs.changes.events[0]?.data).toEqual({ attempt: 1, fired: ["g"] });
    expect(rs.changes.events[1]?.data).toEqual({ trigger: { node_id: "a", visit: 1 } });
    expect(keys(rs.changes.updated)).toEqual(["a:1", "g:1"]);
    expect(rs.changes.inserted.size).toBe(0);
    expect(keys(rs.changes.readied)).toEqual(["g:1"]);
  });

  it("a decision with no case holding records branch.none and fires nothing", () => {
    const rs = start([{ node_id: "a", next_on_success: [{ when: "output.go = true", to: "g" }] }, { node_id: "g" }]);
    fresh(rs);
    complete(rs, "a", { go: false }, { kind: "none" }, 2_000);
    expect(events(rs)).toEqual([
      "node.started:a",
      "node.succeeded:a",
      "branch.none:a",
      "node.skipped:g",
      "run.succeeded",
    ]);
    expect(cur(rs, "a").fired).toEqual([]);
    expect(cur(rs, "g")).toMatchObject({ state: "SKIPPED", reason: "branch_not_taken" });
  });
});

describe("SKIPPED cascade", () => {
  // a chooses l1 or r1; l2..l4 hang under l1 with join all; m merges l3 and r1 with join any.
  const nodes: NodeInput[] = [
    { node_id: "a", next_on_success: [{ when: "output.left = true", to: "l1" }, { to: "r1" }] },
    { node_id: "l1" },
    { node_id: "l2", depends_on: ["l1"] },
    { node_id: "l3", depends_on: ["l2"] },
    { node_id: "l4", depends_on: ["l3"], join: "all" },
    { node_id: "r1" },
    { node_id: "m", depends_on: ["l3", "r1"], join: "any" },
    { node_id: "done", depends_on: ["l2", "r1"], join: "all_done" },
  ];

  it("skips the branch not taken and every join-all node under it, transitively, in the same call", () => {
    const rs = start(nodes);
    run(rs, 2_000, "a");
    fresh(rs);
    succeed(rs, cur(rs, "a"), { left: false }, targets("r1"), 3_000);

    expect(cur(rs, "l1")).toMatchObject({ state: "SKIPPED", reason: "branch_not_taken", ended_at: 3_000 });
    for (const id of ["l2", "l3", "l4"]) {
      expect(cur(rs, id), id).toMatchObject({ state: "SKIPPED", reason: "dependency_unmet", ended_at: 3_000 });
    }
    expect(cur(rs, "r1")).toMatchObject({ state: "PENDING", ready_at: 3_000, trigger: { node_id: "a", visit: 1 } });
    // m (any) and done (all_done) still wait for r1.
    expect(cur(rs, "m")).toMatchObject({ state: "PENDING", ready_at: null });
    expect(cur(rs, "done")).toMatchObject({ state: "PENDING", ready_at: null });

    const skipped = events(rs).filter((e) => e.startsWith("node.skipped"));
    expect(skipped).toEqual(["node.skipped:l1", "node.skipped:l2", "node.skipped:l3", "node.skipped:l4"]);
    expect(events(rs)).toContain("node.ready:r1");
    expect(rs.changes.events.find((e) => e.node_id === "l2")?.data).toEqual({ reason: "dependency_unmet" });
    expect(keys(rs.changes.updated)).toEqual(["a:1", "l1:1", "l2:1", "l3:1", "l4:1", "r1:1"]);
    expect(rs.changes.inserted.size).toBe(0);
    expect(rs.run.ended_at).toBeNull();
  });

  it("lets an any-join merge and an all_done step run after the skipped branch, then ends with the sinks' outputs", () => {
    const rs = start(nodes);
    complete(rs, "a", { left: false }, targets("r1"), 2_000);
    complete(rs, "r1", { r: 1 }, NONE, 3_000);
    expect(cur(rs, "m").ready_at).toBe(3_000);
    expect(cur(rs, "done").ready_at).toBe(3_000);
    complete(rs, "m", { m: 1 }, NONE, 4_000);
    expect(rs.run.ended_at).toBeNull();
    fresh(rs);
    complete(rs, "done", { d: 1 }, NONE, 5_000);

    expect(rs.graph.sinks).toEqual(["l4", "m", "done"]);
    expect(rs.run).toMatchObject({ status: "SUCCEEDED", end_cause: null, ended_at: 5_000, error: null });
    // Only SUCCEEDED sinks: l4 was skipped.
    expect(rs.run.output).toEqual({ m: { m: 1 }, done: { d: 1 } });
    expect(events(rs).at(-1)).toBe("run.succeeded");
    expect(rs.changes.ended).toBe(true);
    expect(rs.changes.runUpdated).toBe(true);
  });

  it("skips the whole chain when the taken branch's merge can no longer be met", () => {
    const rs = start(nodes);
    complete(rs, "a", { left: true }, targets("l1"), 2_000);
    expect(cur(rs, "r1")).toMatchObject({ state: "SKIPPED", reason: "branch_not_taken" });
    expect(cur(rs, "l1").ready_at).toBe(2_000);
    complete(rs, "l1", null, NONE, 3_000);
    complete(rs, "l2", null, NONE, 4_000);
    // done (all_done) is ready once l2 and the skipped r1 are terminal.
    expect(cur(rs, "done").ready_at).toBe(4_000);
  });
});

describe("safety net", () => {
  // With a validated graph the incremental re-checks reach every PENDING visit whose inputs
  // change (depends_on and forward edges are acyclic, `affected` lists both, and a loop reset
  // re-checks its whole region), so some PENDING visit could always move. The property at the
  // end of this file drives random valid workflows and checks that the net never fires. Here it
  // is reached with a hand-made state: b's dependency a SUCCEEDED but b was never re-checked.
  const graph = graphOf([{ node_id: "a" }, { node_id: "b", depends_on: ["a"] }, { node_id: "c" }]);

  function stuck(others: Visit[]): RunState {
    return runState(makeRun(), graph, [
      visit("a", "SUCCEEDED", { output: { a: 1 }, fired: [] }),
      visit("b", "PENDING"),
      ...others,
    ]);
  }

  it("skips PENDING visits as unreachable with a run.warning when nothing is active, ready or due", () => {
    const rs = stuck([visit("c", "SUCCEEDED", { output: { c: 1 }, fired: [] })]);
    settle(rs, [], 9_000);
    expect(cur(rs, "b")).toMatchObject({ state: "SKIPPED", reason: "unreachable", ended_at: 9_000 });
    expect(events(rs)).toEqual(["run.warning", "node.skipped:b", "run.succeeded"]);
    expect(String(rs.changes.events[0]?.data.message)).toMatch(/\bb\b.*unreachable/);
    expect(rs.changes.events[1]?.data).toEqual({ reason: "unreachable" });
    expect(rs.run).toMatchObject({ status: "SUCCEEDED", ended_at: 9_000, output: { c: { c: 1 } } });
  });

  it.each([
    ["RUNNING", visit("c", "RUNNING", { attempt: 1 })],
    ["RETRYING", visit("c", "RETRYING", { attempt: 1, ready_at: 20_000 })],
    ["IN_REVIEW", visit("c", "IN_REVIEW")],
    ["PENDING and ready", visit("c", "PENDING", { ready_at: 8_000 })],
  ])("does not fire while a visit is %s", (_label, c) => {
    const rs = stuck([c]);
    settle(rs, [], 9_000);
    expect(cur(rs, "b").state).toBe("PENDING");
    expect(rs.changes.events).toEqual([]);
    expect(rs.run.ended_at).toBeNull();
  });
});

describe("run output", () => {
  it("is { <sink>: output } of the SUCCEEDED sinks only", () => {
    const rs = start([
      { node_id: "a", next_on_failure: "h" },
      { node_id: "b", depends_on: ["a"] },
      { node_id: "h" },
      { node_id: "s" },
    ]);
    expect(rs.graph.sinks).toEqual(["b", "h", "s"]);
    run(rs, 2_000, "a", "s");
    failAttempt(rs, cur(rs, "a"), boom, false, 3_000);
    expect(cur(rs, "a")).toMatchObject({ state: "FAILED", handled: true, fired: ["h"], reason: "non_retryable" });
    expect(cur(rs, "b")).toMatchObject({ state: "SKIPPED", reason: "dependency_unmet" });
    complete(rs, "h", { h: true }, NONE, 4_000);
    complete(rs, "s", ["s"], NONE, 5_000);
    // A handled failure does not fail the run.
    expect(rs.run).toMatchObject({ status: "SUCCEEDED", output: { h: { h: true }, s: ["s"] } });
  });

  it("runs an aggregator inline, collecting its sources' outputs", () => {
    const rs = start([
      { node_id: "a" },
      { node_id: "b" },
      { node_id: "agg", agent_type: "aggregator", depends_on: ["a", "b"], payload: { sources: ["a"] } },
    ]);
    complete(rs, "a", { x: 1 }, NONE, 2_000);
    fresh(rs);
    complete(rs, "b", { y: 2 }, NONE, 3_000);
    expect(cur(rs, "agg")).toMatchObject({ state: "SUCCEEDED", output: { a: { x: 1 } }, attempt: 1 });
    expect(events(rs)).toEqual([
      "node.started:b",
      "node.succeeded:b",
      "node.ready:agg",
      "node.started:agg",
      "node.succeeded:agg",
      "run.succeeded",
    ]);
    expect(rs.changes.events[3]?.data).toMatchObject({ holder: ENGINE_HOLDER });
    expect(rs.run.output).toEqual({ agg: { a: { x: 1 } } });
  });
});

describe("$end", () => {
  function endScenario() {
    const rs = start([
      { node_id: "a", next_on_success: [{ when: "output.stop = true", to: "x" }] },
      { node_id: "b" },
      { node_id: "c" },
      { node_id: "d", depends_on: ["a"] },
      { node_id: "x" },
      { node_id: "r", agent_type: "human_review" },
    ]);
    run(rs, 2_000, "a", "b", "c");
    failAttempt(rs, cur(rs, "c"), boom, true, 2_500, () => 0);
    cur(rs, "r").state = "IN_REVIEW"; // as the engine does when it opens the review
    fresh(rs);
    succeed(rs, cur(rs, "a"), { final: 42 }, { kind: "end" }, 3_000);
    return rs;
  }

  it("finishes the run SUCCEEDED with the output of the node that returned $end", () => {
    const rs = endScenario();
    expect(rs.run).toMatchObject({
      status: "SUCCEEDED",
      end_cause: "end",
      output: { final: 42 },
      ended_at: 3_000,
      error: null,
    });
    expect(cur(rs, "a")).toMatchObject({ state: "SUCCEEDED", fired: [], output: { final: 42 } });
    expect(rs.changes.ended).toBe(true);
  });

  it("cancels the active visits (listing the running ones) and skips the PENDING ones", () => {
    const rs = endScenario();
    // The cancelled attempt keeps its holder until it returns (compensation waits for it).
    expect(cur(rs, "b")).toMatchObject({ state: "CANCELLED", reason: "run_end", holder: "w1", ended_at: 3_000 });
    expect(cur(rs, "b").lease_expires_at).toBeNull();
    expect(cur(rs, "c")).toMatchObject({ state: "CANCELLED", reason: "run_end", ready_at: null });
    expect(cur(rs, "r")).toMatchObject({ state: "CANCELLED", reason: "run_end" });
    expect(cur(rs, "d")).toMatchObject({ state: "SKIPPED", reason: "run_end" });
    expect(cur(rs, "x")).toMatchObject({ state: "SKIPPED", reason: "run_end" });
    // Only b had an attempt in flight to abort.
    expect(keys(rs.changes.cancelled)).toEqual(["b:1"]);
  });

  it("emits the end events in order and touches exactly the visits it changed", () => {
    const rs = endScenario();
    expect(events(rs)).toEqual([
      "node.succeeded:a",
      "node.cancelled:b",
      "node.cancelled:c",
      "node.skipped:d",
      "node.skipped:x",
      "node.cancelled:r",
      "run.succeeded",
    ]);
    expect(rs.changes.events[0]?.data).toEqual({ attempt: 1, fired: [], end: true });
    expect(rs.changes.events.at(-1)?.data).toEqual({ status: "SUCCEEDED", end_cause: "end" });
    expect(keys(rs.changes.updated)).toEqual(["a:1", "b:1", "c:1", "d:1", "r:1", "x:1"]);
    expect(rs.changes.inserted.size).toBe(0);
  });
});

describe("failures", () => {
  it("an unhandled failure ends the run FAILED and cancels its active siblings", () => {
    const rs = start([{ node_id: "a" }, { node_id: "b" }, { node_id: "c" }, { node_id: "d", depends_on: ["a", "b"] }]);
    run(rs, 2_000, "a", "b");
    fresh(rs);
    failAttempt(rs, cur(rs, "b"), { message: "bad input", reason: "error" }, false, 3_000);

    expect(cur(rs, "b")).toMatchObject({
      state: "FAILED",
      reason: "non_retryable",
      handled: false,
      fired: [],
      failures: 1,
      ended_at: 3_000,
      error: { message: "bad input", reason: "error" },
    });
    expect(cur(rs, "a")).toMatchObject({ state: "CANCELLED", reason: "run_failed" });
    expect(cur(rs, "c")).toMatchObject({ state: "SKIPPED", reason: "run_failed", ready_at: null });
    expect(cur(rs, "d")).toMatchObject({ state: "SKIPPED", reason: "run_failed" });
    expect(keys(rs.changes.cancelled)).toEqual(["a:1"]);
    expect(rs.run).toMatchObject({ status: "FAILED", end_cause: "failed", output: null, ended_at: 3_000 });
    expect(rs.run.error?.message).toMatch(/node b failed \(non_retryable\): bad input/);
    expect(rs.run.error?.reason).toBe("non_retryable");
    expect(events(rs)).toEqual(["node.failed:b", "node.cancelled:a", "node.skipped:c", "node.skipped:d", "run.failed"]);
    expect(rs.changes.events[0]?.data).toMatchObject({ reason: "non_retryable", handled: false, attempt: 1 });
    expect(rs.changes.events.at(-1)?.data).toMatchObject({ status: "FAILED", end_cause: "failed" });
    expect(keys(rs.changes.updated)).toEqual(["a:1", "b:1", "c:1", "d:1"]);
  });

  it("retries a retryable failure with backoff until the budget is spent, then fails retries_exhausted", () => {
    const rs = start([
      { node_id: "a", retry_count: 2, retry_interval: 10, retry_backoff: "exponential", retry_jitter: "full" },
      { node_id: "b" },
    ]);
    const a = cur(rs, "a");
    run(rs, 2_000, "b");
    claim(rs, a, "w1", 2_000);
    fresh(rs);
    failAttempt(rs, a, boom, true, 3_000, () => 0.5);
    expect(a).toMatchObject({ state: "RETRYING", failures: 1, attempt: 1, ready_at: 8_000, holder: null, error: boom });
    expect(events(rs)).toEqual(["node.retrying:a"]);
    expect(rs.changes.events[0]?.data).toMatchObject({ attempt: 1, retry_at: 8_000 });
    expect(keys(rs.changes.updated)).toEqual(["a:1"]);

    claim(rs, a, "w2", 8_000);
    expect(a).toMatchObject({ state: "RUNNING", attempt: 2, started_at: 2_000 });
    failAttempt(rs, a, boom, true, 9_000, () => 0.5);
    expect(a).toMatchObject({ state: "RETRYING", failures: 2, ready_at: 19_000 });

    claim(rs, a, "w3", 19_000);
    failAttempt(rs, a, boom, true, 20_000, () => 0.5);
    expect(a).toMatchObject({ state: "FAILED", failures: 3, attempt: 3, reason: "retries_exhausted" });
    expect(rs.run.status).toBe("FAILED");
    expect(cur(rs, "b")).toMatchObject({ state: "CANCELLED", reason: "run_failed" });
  });

  it("a handled failure fires next_on_failure and the run goes on", () => {
    const rs = start([{ node_id: "a", next_on_failure: "h" }, { node_id: "h" }]);
    const [a] = run(rs, 2_000, "a") as [Visit];
    fresh(rs);
    failVisit(rs, a, "rejected", null, 3_000);
    expect(a).toMatchObject({
      state: "FAILED",
      handled: true,
      fired: ["h"],
      reason: "rejected",
      error: { message: "rejected", reason: "rejected" },
    });
    expect(cur(rs, "h")).toMatchObject({ ready_at: 3_000, trigger: { node_id: "a", visit: 1 } });
    expect(events(rs)).toEqual(["node.failed:a", "node.ready:h"]);
    expect(rs.run.ended_at).toBeNull();
  });
});

describe("loop-back reset", () => {
  const nodes: NodeInput[] = [
    { node_id: "start" },
    { node_id: "side", depends_on: ["start"] },
    {
      node_id: "review",
      depends_on: ["start"],
      next_on_success: [{ when: "output.ok = true", to: "publish" }, { to: ["fix", "notify"] }],
    },
    { node_id: "fix", next_on_success: "review" },
    { node_id: "notify" },
    { node_id: "publish" },
    { node_id: "summary", depends_on: ["publish"] },
  ];

  /** Runs up to fix firing its loop-back while side and notify are still running. */
  function loopScenario() {
    const rs = start(nodes);
    complete(rs, "start", { s: 1 }, NONE, 2_000);
    run(rs, 3_000, "side");
    complete(rs, "review", { ok: false }, targets("fix", "notify"), 4_000);
    run(rs, 5_000, "notify", "fix");
    const old = Object.fromEntries(
      ["start", "side", "review", "fix", "notify", "publish", "summary"].map((id) => [id, cur(rs, id)]),
    );
    fresh(rs);
    succeed(rs, cur(rs, "fix"), { fixed: true }, targets("review"), 6_000);
    return { rs, old: old as Record<string, Visit> };
  }

  it("computes the loop's region: the target and everything downstream of it", () => {
    const graph = graphOf(nodes);
    expect(graph.regions.get("review")).toEqual(["review", "fix", "notify", "publish", "summary"]);
    expect(graph.isForward("fix", "review")).toBe(false);
  });

  it("gives every region node a new visit (visit + 1, fresh execution_id) and keeps the rest", () => {
    const { rs, old } = loopScenario();
    for (const id of ["review", "fix", "notify", "publish", "summary"]) {
      const v = cur(rs, id);
      expect(v, id).not.toBe(old[id]);
      expect(v).toMatchObject({
        visit: 2,
        execution_id: executionId("run1", id, 2),
        is_current: true,
        fired: null,
        attempt: 0,
        failures: 0,
        created_at: 6_000,
      });
      expect(v.execution_id).toBe(`run1:${id}:2`);
      expect(old[id]?.is_current, id).toBe(false);
    }
    // Outside the region: the same visits, untouched, their decisions kept.
    expect(cur(rs, "start")).toBe(old.start);
    expect(cur(rs, "start")).toMatchObject({ state: "SUCCEEDED", fired: [], is_current: true });
    expect(cur(rs, "side")).toBe(old.side);
    expect(cur(rs, "side")).toMatchObject({ state: "RUNNING", is_current: true, holder: "w1" });
  });

  it("activates the target from the loop-back and counts earlier starts", () => {
    const { rs } = loopScenario();
    expect(cur(rs, "review")).toMatchObject({
      state: "PENDING",
      loop_activated: true,
      trigger: { node_id: "fix", visit: 1 },
      ready_at: 6_000,
      prior_starts: 1,
    });
    expect(cur(rs, "fix")).toMatchObject({ state: "PENDING", ready_at: null, prior_starts: 1, loop_activated: false });
    expect(cur(rs, "notify")).toMatchObject({ prior_starts: 1, ready_at: null });
    // publish and summary were skipped, never started.
    expect(cur(rs, "publish")).toMatchObject({ prior_starts: 0, ready_at: null });
    expect(cur(rs, "summary")).toMatchObject({ prior_starts: 0, ready_at: null });
  });

  it("cancels the active visits in the region and lists the running ones", () => {
    const { rs, old } = loopScenario();
    expect(old.notify).toMatchObject({ state: "CANCELLED", reason: "loop_reset", holder: "w1", ended_at: 6_000 });
    expect(old.fix).toMatchObject({ state: "SUCCEEDED", fired: ["review"], output: { fixed: true } });
    expect(old.publish).toMatchObject({ state: "SKIPPED", reason: "branch_not_taken" });
    expect(rs.changes.cancelled).toEqual([old.notify]);
    expect(rs.run.ended_at).toBeNull();
  });

  it("emits the reset events in order and touches exactly the region's old and new visits", () => {
    const { rs } = loopScenario();
    expect(events(rs)).toEqual(["node.succeeded:fix", "loop.reset:fix", "node.cancelled:notify", "node.ready:review"]);
    expect(rs.changes.events[1]?.data).toEqual({
      target: "review",
      region: ["review", "fix", "notify", "publish", "summary"],
    });
    expect(rs.changes.events[3]?.data).toEqual({ trigger: { node_id: "fix", visit: 1 } });
    expect(keys(rs.changes.inserted)).toEqual(["fix:2", "notify:2", "publish:2", "review:2", "summary:2"]);
    expect(keys(rs.changes.updated)).toEqual(["fix:1", "notify:1", "publish:1", "review:1", "summary:1"]);
    expect(keys(rs.changes.readied)).toEqual(["review:2"]);
  });

  it("forgets decisions inside the region: the next round branches afresh and the run ends SUCCEEDED", () => {
    const { rs } = loopScenario();
    fresh(rs);
    complete(rs, "review", { ok: true }, targets("publish"), 7_000);
    expect(cur(rs, "review")).toMatchObject({ visit: 2, attempt: 1, fired: ["publish"] });
    expect(cur(rs, "fix")).toMatchObject({ visit: 2, state: "SKIPPED", reason: "branch_not_taken" });
    expect(cur(rs, "notify")).toMatchObject({ visit: 2, state: "SKIPPED", reason: "branch_not_taken" });
    expect(cur(rs, "publish")).toMatchObject({ visit: 2, ready_at: 7_000, trigger: { node_id: "review", visit: 2 } });
    expect(rs.changes.inserted.size).toBe(0);
    complete(rs, "publish", { p: 1 }, NONE, 8_000);
    complete(rs, "summary", { sum: 1 }, NONE, 9_000);
    expect(rs.run.ended_at).toBeNull(); // side still runs
    succeed(rs, cur(rs, "side"), { side: 1 }, NONE, 10_000);
    expect(rs.graph.sinks).toEqual(["side", "fix", "notify", "summary"]);
    expect(rs.run).toMatchObject({ status: "SUCCEEDED", output: { side: { side: 1 }, summary: { sum: 1 } } });
  });

  it("keeps a decision made outside the region: it still activates the region node in the next round", () => {
    const rs = start([
      { node_id: "a" },
      { node_id: "gate", next_on_success: [{ when: "output.go = true", to: "w" }] },
      { node_id: "r", depends_on: ["a"] },
      { node_id: "w", depends_on: ["r"] },
      { node_id: "back", depends_on: ["w"], next_on_success: [{ when: "output.again = true", to: "r" }] },
    ]);
    expect(rs.graph.regions.get("r")).toEqual(["r", "w", "back"]);
    complete(rs, "a", null, NONE, 2_000);
    const gate = complete(rs, "gate", { go: true }, targets("w"), 2_000);
    complete(rs, "r", null, NONE, 3_000);
    expect(cur(rs, "w")).toMatchObject({ visit: 1, ready_at: 3_000, trigger: { node_id: "gate", visit: 1 } });
    complete(rs, "w", null, NONE, 4_000);
    fresh(rs);
    complete(rs, "back", { again: true }, targets("r"), 5_000);
    expect(cur(rs, "gate")).toBe(gate);
    expect(gate).toMatchObject({ visit: 1, fired: ["w"], is_current: true });
    expect(rs.changes.updated.has(gate)).toBe(false);
    // w's new visit is activated again by gate's kept decision and waits only for r's new visit.
    expect(cur(rs, "w")).toMatchObject({ visit: 2, ready_at: null, trigger: { node_id: "gate", visit: 1 } });
    complete(rs, "r", null, NONE, 6_000);
    expect(cur(rs, "w")).toMatchObject({ visit: 2, ready_at: 6_000, trigger: { node_id: "gate", visit: 1 } });
  });

  it("re-checks a region node that is still PENDING and forgets an activation from inside the region", () => {
    // b is gated by a (inside the region of a); it was made ready, then c loops back to a.
    const rs = start([
      { node_id: "a", next_on_success: "b" },
      { node_id: "b", depends_on: ["c"], join: "all_done" },
      { node_id: "c", depends_on: ["a"], next_on_success: [{ when: "output.again = true", to: "a" }] },
    ]);
    complete(rs, "a", null, targets("b"), 2_000);
    expect(cur(rs, "b")).toMatchObject({ trigger: { node_id: "a", visit: 1 }, ready_at: null });
    fresh(rs);
    complete(rs, "c", null, targets("a"), 3_000);
    expect(cur(rs, "b")).toMatchObject({ visit: 1, state: "PENDING", trigger: null, ready_at: null });
    expect(cur(rs, "a")).toMatchObject({ visit: 2, ready_at: 3_000 });
    expect(cur(rs, "c")).toMatchObject({ visit: 2, state: "PENDING" });
    expect(keys(rs.changes.inserted)).toEqual(["a:2", "c:2"]);
    expect(keys(rs.changes.updated)).toEqual(["a:1", "b:1", "c:1"]);
  });
});

describe("loop-back reset of a region holding a PENDING loop target", () => {
  // n2 is gated by n0 and n1 and loops on itself; n1 loops back to n0, whose region holds n2.
  const nodes: NodeInput[] = [
    { node_id: "n0", next_on_success: [{ when: "output.go = true", to: "n2" }] },
    {
      node_id: "n1",
      depends_on: ["n0"],
      next_on_success: [
        { when: "output.go = true", to: "n2" },
        { when: "output.again = true", to: "n0" },
      ],
    },
    { node_id: "n2", next_on_success: [{ when: "output.again = true", to: "n2" }] },
  ];

  function scenario() {
    const rs = start(nodes);
    complete(rs, "n0", { go: true }, targets("n2"), 2_000);
    run(rs, 3_000, "n1", "n2");
    // n2 loops on itself: its visit 2 is made (and activated) by that loop-back.
    succeed(rs, cur(rs, "n2"), { again: true }, targets("n2"), 4_000);
    expect(cur(rs, "n2")).toMatchObject({ visit: 2, loop_activated: true, ready_at: 4_000 });
    // Before n2's visit 2 is claimed, n1 loops back to n0: n2 is in n0's region and still PENDING.
    fresh(rs);
    succeed(rs, cur(rs, "n1"), { again: true }, targets("n0"), 5_000);
    return rs;
  }

  it("keeps the PENDING row of n2 but forgets its activation, which came from inside the region", () => {
    const rs = scenario();
    expect(rs.graph.regions.get("n0")).toEqual(["n0", "n1", "n2"]);
    const n2 = cur(rs, "n2");
    expect(n2).toMatchObject({ visit: 2, state: "PENDING", trigger: null });
    // DESIGN §4: the new round of n0's region starts afresh; n2 is gated by n0 and n1, whose new
    // visits have not decided yet, so n2 must wait for them.
    expect(n2.loop_activated).toBe(false);
    expect(n2.ready_at).toBeNull();
    expect(events(rs)).not.toContain("node.ready:n2");
  });

  it("skips n2 in the new round when neither n0 nor n1 fires into it", () => {
    const rs = scenario();
    complete(rs, "n0", { go: false }, NONE, 6_000);
    complete(rs, "n1", { go: false }, NONE, 7_000);
    expect(cur(rs, "n2")).toMatchObject({ state: "SKIPPED", reason: "branch_not_taken", attempt: 0 });
    expect(rs.run.status).toBe("SUCCEEDED");
  });

  it("does not run a waiting loop target early after an outer loop resets its gate", () => {
    // t is gated by s and waits for d; x loops back to t; y loops back to p, whose region holds t.
    const rs = start([
      { node_id: "p" },
      { node_id: "s", depends_on: ["p"], next_on_success: [{ when: "output.go = true", to: "t" }] },
      { node_id: "d", depends_on: ["p"] },
      { node_id: "t", depends_on: ["d"] },
      { node_id: "z", depends_on: ["p"] },
      {
        node_id: "x",
        depends_on: ["t", "z"],
        join: "any",
        next_on_success: [{ when: "output.again = true", to: "t" }],
      },
      { node_id: "y", depends_on: ["z"], next_on_success: [{ when: "output.again = true", to: "p" }] },
    ]);
    complete(rs, "p", null, NONE, 2_000);
    run(rs, 2_000, "d");
    complete(rs, "s", { go: false }, NONE, 3_000);
    expect(cur(rs, "t")).toMatchObject({ state: "SKIPPED", reason: "branch_not_taken" });
    complete(rs, "z", null, NONE, 4_000);
    complete(rs, "x", { again: true }, targets("t"), 5_000);
    expect(cur(rs, "t")).toMatchObject({ visit: 2, state: "PENDING", loop_activated: true, ready_at: null });
    complete(rs, "y", { again: true }, targets("p"), 6_000);
    expect(cur(rs, "d")).toMatchObject({ visit: 2, state: "PENDING" });
    complete(rs, "p", null, NONE, 7_000);
    complete(rs, "d", null, NONE, 8_000);
    // s's new visit is ready but has not decided: t must not be ready yet.
    expect(cur(rs, "s")).toMatchObject({ visit: 2, state: "PENDING", ready_at: 7_000 });
    expect(cur(rs, "t")).toMatchObject({ state: "PENDING", ready_at: null });
  });
});

describe("max_visits", () => {
  const nodes = (extra: Record<string, unknown> = {}): NodeInput[] => [
    { node_id: "start" },
    {
      node_id: "review",
      depends_on: ["start"],
      max_visits: 2,
      next_on_success: [{ when: "output.ok = true", to: "done" }, { to: "fix" }],
      ...extra,
    },
    { node_id: "fix", next_on_success: "review" },
    { node_id: "done" },
    { node_id: "fallback" },
  ];

  function twoRounds(rs: RunState): void {
    complete(rs, "start", null, NONE, 2_000);
    for (const round of [1, 2]) {
      expect(cur(rs, "review")).toMatchObject({ visit: round, prior_starts: round - 1, ready_at: expect.any(Number) });
      complete(rs, "review", { ok: false }, targets("fix"), 2_000 + round * 1_000);
      fresh(rs);
      complete(rs, "fix", null, targets("review"), 2_500 + round * 1_000);
    }
  }

  it("fails a visit past max_visits from PENDING with max_visits_exceeded, without an attempt", () => {
    const rs = start(nodes(), {});
    twoRounds(rs);
    const review = cur(rs, "review");
    expect(review).toMatchObject({
      visit: 3,
      state: "FAILED",
      reason: "max_visits_exceeded",
      prior_starts: 2,
      attempt: 0,
      started_at: null,
      handled: false,
    });
    expect(review.error?.reason).toBe("max_visits_exceeded");
    expect(review.error?.message).toMatch(/max_visits \(2\)/);
    expect(events(rs)).not.toContain("node.started:review");
    expect(events(rs)).toContain("node.failed:review");
    expect(rs.run).toMatchObject({ status: "FAILED", end_cause: "failed" });
    expect(rs.run.error?.reason).toBe("max_visits_exceeded");
  });

  it("follows next_on_failure when the node declares it", () => {
    const g = [...nodes({ next_on_failure: "fallback" })];
    const rs = start(g);
    twoRounds(rs);
    expect(cur(rs, "review")).toMatchObject({ visit: 3, state: "FAILED", handled: true, fired: ["fallback"] });
    expect(cur(rs, "fix")).toMatchObject({ visit: 3, state: "SKIPPED", reason: "branch_not_taken" });
    expect(cur(rs, "done")).toMatchObject({ state: "SKIPPED", reason: "branch_not_taken" });
    expect(cur(rs, "fallback")).toMatchObject({ ready_at: 4_500, trigger: { node_id: "review", visit: 3 } });
    expect(rs.run.ended_at).toBeNull();
    complete(rs, "fallback", "fb", NONE, 6_000);
    expect(rs.run).toMatchObject({ status: "SUCCEEDED", output: { fallback: "fb" } });
  });
});

describe("interrupt", () => {
  it("makes a new attempt due now without spending the retry budget; the 3rd interruption fails the visit", () => {
    const rs = start([{ node_id: "a", retry_count: 1 }, { node_id: "b" }]);
    const a = cur(rs, "a");
    run(rs, 1_500, "b");
    claim(rs, a, "w1", 2_000);
    failAttempt(rs, a, boom, true, 2_500, () => 0);
    expect(a).toMatchObject({ state: "RETRYING", failures: 1 });

    claim(rs, a, "w1", 3_000);
    fresh(rs);
    interrupt(rs, a, 4_000);
    expect(a).toMatchObject({
      state: "RETRYING",
      ready_at: 4_000,
      failures: 1,
      interruptions: 1,
      attempt: 2,
      holder: null,
      deadline_at: null,
      lease_expires_at: null,
      execution_id: "run1:a:1",
    });
    expect(events(rs)).toEqual(["node.interrupted:a"]);
    expect(rs.changes.events[0]?.data).toEqual({ attempt: 2, interruptions: 1 });
    expect(keys(rs.changes.updated)).toEqual(["a:1"]);

    claim(rs, a, "w2", 5_000);
    interrupt(rs, a, 6_000);
    expect(a).toMatchObject({ state: "RETRYING", ready_at: 6_000, failures: 1, interruptions: 2, attempt: 3 });

    claim(rs, a, "w3", 7_000);
    fresh(rs);
    interrupt(rs, a, 8_000);
    expect(a).toMatchObject({ state: "FAILED", reason: "interrupted", failures: 1, interruptions: 3, attempt: 4 });
    expect(a.error?.reason).toBe("interrupted");
    expect(a.error?.message).toMatch(/interrupted 3 times/);
    expect(events(rs)).toEqual(["node.failed:a", "node.cancelled:b", "run.failed"]);
    expect(rs.run.status).toBe("FAILED");
  });
});

describe("endRun", () => {
  it.each([
    ["cancelled", "CANCELLED", "run.cancelled"],
    ["ttl", "FAILED", "run.failed"],
  ] as const)("with cause %s: status %s", (cause, status, type) => {
    const rs = start([{ node_id: "a" }, { node_id: "b", depends_on: ["a"] }]);
    run(rs, 2_000, "a");
    fresh(rs);
    const error = cause === "ttl" ? { message: "run expired", reason: "ttl" } : null;
    endRun(rs, cause, error, 3_000);
    expect(rs.run).toMatchObject({ status, end_cause: cause, output: null, ended_at: 3_000 });
    expect(cur(rs, "a")).toMatchObject({ state: "CANCELLED", reason: `run_${cause}` });
    expect(cur(rs, "b")).toMatchObject({ state: "SKIPPED", reason: `run_${cause}` });
    expect(events(rs)).toEqual(["node.cancelled:a", "node.skipped:b", type]);
    if (error) expect(rs.run.error).toEqual(error);
    // A second end changes nothing.
    fresh(rs);
    endRun(rs, "failed", null, 4_000);
    expect(rs.run.status).toBe(status);
    expect(rs.changes.events).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// Random valid workflows, driven by random outcomes until the run ends.

interface Shape {
  n: number;
  deps: number[][];
  joins: ("all" | "any" | "all_done")[];
  cases: number[][][]; // per node: forward-target lists of success cases
  loopPick: (number | null)[]; // per node: index into its loop candidates, or none
  failure: number[][];
  retry: number[];
}

const shapeArb = fc.integer({ min: 2, max: 6 }).chain((n) =>
  fc.record({
    n: fc.constant(n),
    deps: fc.tuple(...Array.from({ length: n }, (_, i) => fc.subarray(range(i), { maxLength: Math.min(3, i) }))),
    joins: fc.tuple(
      ...Array.from({ length: n }, () => fc.constantFrom("all" as const, "any" as const, "all_done" as const)),
    ),
    cases: fc.tuple(
      ...Array.from({ length: n }, (_, i) =>
        i + 1 < n
          ? fc.array(fc.subarray(range(n).slice(i + 1), { minLength: 1 }), { maxLength: 2 })
          : fc.constant([] as number[][]),
      ),
    ),
    loopPick: fc.tuple(...Array.from({ length: n }, () => fc.option(fc.nat(20), { freq: 4 }))),
    failure: fc.tuple(
      ...Array.from({ length: n }, (_, i) => fc.oneof(fc.constant([] as number[]), fc.subarray(range(n).slice(i + 1)))),
    ),
    retry: fc.tuple(...Array.from({ length: n }, () => fc.integer({ min: 0, max: 1 }))),
  }),
);

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

function definitionOf(s: Shape): unknown {
  const id = (i: number) => `n${i}`;
  // Loop-back candidates of node i: itself and every node from which i is reachable.
  const flow: number[][] = range(s.n).map(() => []);
  s.deps.forEach((ds, i) => {
    for (const d of ds) flow[d]?.push(i);
  });
  s.cases.forEach((cs, i) => {
    for (const c of cs) for (const t of c) flow[i]?.push(t);
  });
  s.failure.forEach((fs, i) => {
    for (const t of fs) flow[i]?.push(t);
  });
  const reaches = (from: number, to: number): boolean => {
    const seen = new Set([from]);
    const queue = [from];
    for (let q = queue.shift(); q !== undefined; q = queue.shift()) {
      if (q === to) return true;
      for (const x of flow[q] ?? []) {
        if (seen.has(x)) continue;
        seen.add(x);
        queue.push(x);
      }
    }
    return false;
  };
  return {
    id: "random",
    nodes: range(s.n).map((i) => {
      const cases: { when?: string; to: string[] }[] = (s.cases[i] ?? []).map((c, k) => ({
        when: `output.case = ${k}`,
        to: c.map(id),
      }));
      const pick = s.loopPick[i];
      if (pick !== null && pick !== undefined) {
        const candidates = range(i + 1).filter((j) => j === i || reaches(j, i));
        cases.push({ when: "output.loop = true", to: [id(candidates[pick % candidates.length] as number)] });
      }
      return {
        node_id: id(i),
        agent_type: "worker",
        depends_on: (s.deps[i] ?? []).map(id),
        join: s.joins[i],
        retry_count: s.retry[i],
        retry_interval: 1,
        max_visits: 2,
        ...(cases.length > 0 ? { next_on_success: cases } : {}),
        ...((s.failure[i] ?? []).length > 0 ? { next_on_failure: (s.failure[i] ?? []).map(id) } : {}),
      };
    }),
  };
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Drives a run with random outcomes; returns every event and the state at the end. */
function simulate(graph: WorkflowGraph, seed: number) {
  const rnd = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  const rs = startRunState(makeRun(), graph, T0);
  const all = [...rs.changes.events];
  let now = T0;
  for (let step = 0; step < 2_000 && rs.run.ended_at === null; step++) {
    now += 1_000;
    rs.changes = emptyChanges();
    const movable = [...rs.current.values()].filter(
      (v) => (v.state === "PENDING" && v.ready_at !== null) || v.state === "RUNNING" || v.state === "RETRYING",
    );
    if (movable.length === 0) throw new Error("run is stuck: nothing movable but the run has not ended");
    const v = pick(movable);
    if (v.state !== "RUNNING") {
      claim(rs, v, "w", now);
    } else {
      const node = graph.nodes.get(v.node_id);
      if (!node) throw new Error("no node");
      const r = rnd();
      if (r < 0.6) {
        const cases = node.successCases ?? [];
        let decision: Decision;
        const d = rnd();
        if (d < 0.03) decision = { kind: "end" };
        else if (d < 0.13 || cases.length === 0) decision = { kind: "none" };
        else {
          // Prefer the loop-back case when there is one, so that loops nest and overlap.
          const loop = cases.find((c) => c.to.some((t) => !graph.isForward(node.id, t)));
          const chosen = loop && rnd() < 0.4 ? loop.to : pick(cases).to.filter(() => rnd() < 0.7);
          const checked = checkRoute(graph, node, chosen);
          if ("invalid" in checked) throw new Error(checked.invalid);
          decision = checked;
        }
        succeed(rs, v, { by: v.execution_id }, decision, now);
      } else if (r < 0.8) failAttempt(rs, v, boom, true, now, rnd);
      else if (r < 0.95) failAttempt(rs, v, boom, false, now, rnd);
      else interrupt(rs, v, now);
    }
    all.push(...rs.changes.events);
    for (const c of rs.current.values()) {
      // A loop activation names the loop-back that made the visit; one from a superseded round is forgotten.
      if (c.state === "PENDING" && c.loop_activated && c.trigger === null && graph.nodes.get(c.node_id)?.gated) {
        throw new Error(`gated visit ${c.execution_id} is loop-activated without a trigger`);
      }
    }
  }
  // A gated node becomes ready only through a forward edge that fired into it or a loop-back
  // edge that made its visit: either way the ready event names the visit that activated it.
  for (const e of all) {
    if (e.type !== "node.ready" || e.node_id === null) continue;
    const node = graph.nodes.get(e.node_id);
    if (!node?.gated) continue;
    const trigger = e.data.trigger as { node_id: string } | undefined;
    const loopSources = graph.order.filter((id) => graph.nodes.get(id)?.loopBackTargets.includes(node.id));
    if (!trigger || ![...node.incomingForward, ...loopSources].includes(trigger.node_id)) {
      throw new Error(`gated node ${e.node_id} visit ${e.visit} became ready without an activation`);
    }
  }
  return { rs, events: all };
}

/** Fixed so the property is deterministic; set SKEIN_FC_SEED to explore other samples. */
const PROPERTY_SEED = Number(process.env.SKEIN_FC_SEED ?? 8);

describe("property: random valid workflows", () => {
  it("always end, never need the safety net, activate gated nodes only by an edge, and end with a status the visits explain", () => {
    fc.assert(
      fc.property(shapeArb, fc.integer(), (shape, seed) => {
        const def = definitionOf(shape);
        const result = validateWorkflow(def);
        if (!result.ok) throw new Error(`generator made an invalid workflow: ${JSON.stringify(result.errors)}`);
        const { rs, events: evs } = simulate(result.graph, seed);

        expect(rs.run.ended_at).not.toBeNull();
        const visits = [...rs.current.values()];
        for (const v of visits) {
          expect(isTerminal(v.state), `${v.execution_id} ${v.state}`).toBe(true);
          expect(v.is_current).toBe(true);
          expect(v.reason).not.toBe("unreachable");
        }
        expect(evs.filter((e) => e.type === "run.warning")).toEqual([]);
        const ends = evs.filter((e) => e.type.startsWith("run.") && e.type !== "run.started");
        expect(ends).toHaveLength(1);
        expect(evs.at(-1)).toBe(ends[0]);
        expect(rs.run.status).toBe(deriveRunStatus({ visits, endCause: rs.run.end_cause }));
        if (rs.run.status === "SUCCEEDED" && rs.run.end_cause === null) {
          const expected = Object.fromEntries(
            result.graph.sinks.flatMap((id) => {
              const v = rs.current.get(id);
              return v?.state === "SUCCEEDED" ? [[id, v.output]] : [];
            }),
          );
          expect(rs.run.output).toEqual(expected);
        }
      }),
      { numRuns: 1000, seed: PROPERTY_SEED },
    );
  });
});
