import { describe, expect, it } from "vitest";
import { ConflictError, ForbiddenError, type RunEvent, type Task, ValidationError } from "../../../src/index.js";
import { nextEvent, testEngine } from "../../helpers.js";

const requested = (e: RunEvent) => e.type === "review.requested";

const reviewFlow = (extra: Record<string, unknown> = {}) => ({
  id: "approve",
  nodes: [
    { node_id: "draft", agent_type: "writer" },
    {
      node_id: "check",
      agent_type: "human_review",
      depends_on: ["draft"],
      timeout: 3600,
      payload: {
        title: "Publish {{ nodes.draft.output.title }}?",
        assignees: ["editor"],
        text: "{{ nodes.draft.output }}",
      },
      next_on_success: "publish",
      ...extra,
    },
    { node_id: "publish", agent_type: "writer" },
    { node_id: "fix", agent_type: "writer" },
  ],
});

async function reviewing(extra: Record<string, unknown> = {}) {
  const t = await testEngine({ agents: { writer: (task: Task) => ({ title: "t", node: task.node_id }) } });
  await t.engine.registerWorkflow(reviewFlow(extra));
  const asked = nextEvent(t.engine, requested);
  const run = await t.engine.startRun("approve");
  const event = await asked;
  return { ...t, run, event };
}

describe("human_review", () => {
  it("waits IN_REVIEW with the templated request, then an approval succeeds it and fires its edges", async () => {
    const { engine, run, event } = await reviewing();
    expect(event.data).toMatchObject({
      title: "Publish t?",
      assignees: ["editor"],
      data: { text: { title: "t", node: "draft" } },
    });
    const waiting = await engine.getRun(run.run_id);
    expect(waiting).toMatchObject({ status: "RUNNING", waiting_reviews: 1 });
    expect(await engine.listReviews({ status: "pending" })).toEqual([
      expect.objectContaining({
        run_id: run.run_id,
        node_id: "check",
        title: "Publish t?",
        assignees: ["editor"],
        trace_id: run.trace_id,
      }),
    ]);

    await engine.review(run.run_id, "check", {
      decision: "approve",
      by: "editor",
      comment: "ship it",
      output: { edited: true },
    });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.find((n) => n.node_id === "check")?.output).toEqual({
      decision: "approve",
      by: "editor",
      comment: "ship it",
      output: { edited: true },
    });
    expect(done.nodes.find((n) => n.node_id === "publish")?.state).toBe("SUCCEEDED");
    expect(await engine.listReviews()).toEqual([]);
  });

  it("lists the reviews of the runs asked for only, when runIds is given", async () => {
    const { engine, run } = await reviewing();
    const asked = nextEvent(engine, requested);
    const other = await engine.startRun("approve");
    await asked;
    // Listed by start time, then run id: two asked for in the same millisecond come in an order random to the test.
    const runsOf = async (runIds?: string[]) => (await engine.listReviews({ runIds })).map((r) => r.run_id).sort();
    const both = [run.run_id, other.run_id].sort();
    expect(await runsOf()).toEqual(both);
    expect(await runsOf([other.run_id])).toEqual([other.run_id]);
    expect(await runsOf([run.run_id, "no-such-run", other.run_id])).toEqual(both);
    expect(await runsOf([])).toEqual([]);
  });

  it("routes a rejection through next_on_failure", async () => {
    const { engine, run } = await reviewing({ next_on_failure: "fix" });
    await engine.review(run.run_id, "check", { decision: "reject", by: "editor", comment: "too long" });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    const states = Object.fromEntries(done.nodes.map((n) => [n.node_id, [n.state, n.reason]]));
    expect(states).toMatchObject({
      check: ["FAILED", "rejected"],
      publish: ["SKIPPED", "branch_not_taken"],
      fix: ["SUCCEEDED", null],
    });
  });

  it("fails the run on an unrouted rejection", async () => {
    const { engine, run } = await reviewing();
    await engine.review(run.run_id, "check", { decision: "reject", by: "editor" });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(done.error?.reason).toBe("rejected");
  });

  it("fails with review_timeout when nobody decides in time", async () => {
    const { engine, clock, run } = await reviewing({ next_on_failure: "fix" });
    await clock.advance(3_599_000);
    expect((await engine.getRun(run.run_id)).waiting_reviews).toBe(1);
    const done = engine.waitForRun(run.run_id);
    await clock.advance(1_000);
    const finished = await done;
    expect(finished.nodes.find((n) => n.node_id === "check")).toMatchObject({
      state: "FAILED",
      reason: "review_timeout",
    });
    expect(finished.nodes.find((n) => n.node_id === "fix")?.state).toBe("SUCCEEDED");
    await expect(engine.review(run.run_id, "check", { decision: "approve", by: "editor" })).rejects.toBeInstanceOf(
      ConflictError,
    );
  });

  it("lets exactly one of two concurrent decisions win", async () => {
    const { engine, run } = await reviewing();
    const results = await Promise.allSettled([
      engine.review(run.run_id, "check", { decision: "approve", by: "editor" }),
      engine.review(run.run_id, "check", { decision: "reject", by: "editor" }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
    const lost = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(lost.reason).toBeInstanceOf(ConflictError);
    const approveWon = results[0].status === "fulfilled";
    expect((await engine.waitForRun(run.run_id)).status).toBe(approveWon ? "SUCCEEDED" : "FAILED");
    const decided = (await engine.listEvents(run.run_id)).filter((e) => e.type === "review.decided");
    expect(decided).toHaveLength(1);
  });

  it("refuses a decision by someone not among the assignees, and one for another round", async () => {
    const { engine, run, event } = await reviewing();
    await expect(engine.review(run.run_id, "check", { decision: "approve", by: "intern" })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    await expect(
      engine.review(run.run_id, "check", { decision: "approve", by: "editor", execution_id: `${run.run_id}:check:9` }),
    ).rejects.toBeInstanceOf(ConflictError);
    await expect(engine.review(run.run_id, "check", { decision: "maybe" as never })).rejects.toBeInstanceOf(
      ValidationError,
    );
    await engine.review(run.run_id, "check", {
      decision: "approve",
      by: "editor",
      execution_id: String(event.data.execution_id),
    });
    expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
  });

  it("runs the seed's loop: an unavailable check goes to a person whose approval loops back to the check", async () => {
    const { engine } = await testEngine({
      agents: { checker: (t: Task) => ({ available: t.visit > 1 }), publisher: () => "published" },
    });
    await engine.registerWorkflow({
      id: "seed",
      nodes: [
        {
          node_id: "check",
          agent_type: "checker",
          next_on_success: [{ when: "output.available", to: "publish" }, { to: "ask" }],
        },
        {
          node_id: "ask",
          agent_type: "human_review",
          payload: { title: "Source unavailable: retry?" },
          next_on_success: "check",
        },
        { node_id: "publish", agent_type: "publisher" },
      ],
    });
    const asked = nextEvent(engine, requested);
    const run = await engine.startRun("seed");
    await asked;
    await engine.review(run.run_id, "ask", { decision: "approve", by: "ops" });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.output).toEqual({ publish: "published" });
    expect(done.nodes.find((n) => n.node_id === "check")).toMatchObject({ visit: 2, state: "SUCCEEDED" });
  });
});

describe("cancelRun", () => {
  it("cancels active nodes, aborts their attempts, fences late results, and refuses a second cancel", async () => {
    let aborted = false;
    let release!: () => void;
    const { engine } = await testEngine({
      agents: {
        slow: (t: Task) =>
          new Promise((resolve) => {
            t.signal.addEventListener("abort", () => {
              aborted = true;
            });
            release = () => resolve("late");
          }),
      },
    });
    await engine.registerWorkflow({
      id: "cancel",
      nodes: [
        { node_id: "a", agent_type: "slow" },
        { node_id: "b", agent_type: "slow", depends_on: ["a"] },
      ],
    });
    const started = nextEvent(engine, (e) => e.type === "node.started");
    const run = await engine.startRun("cancel");
    await started;
    const cancelled = await engine.cancelRun(run.run_id, { reason: "changed my mind" });
    expect(cancelled.status).toBe("CANCELLED");
    const after = await engine.getRun(run.run_id);
    expect(after.nodes.map((n) => [n.node_id, n.state])).toEqual([
      ["a", "CANCELLED"],
      ["b", "SKIPPED"],
    ]);
    expect(aborted).toBe(true);
    const fenced = nextEvent(engine, (e) => e.type === "result.fenced");
    release();
    await fenced;
    const released = (await engine.getRun(run.run_id)).nodes[0];
    expect(released).toMatchObject({ state: "CANCELLED", holder: null }); // the late result released it
    await expect(engine.cancelRun(run.run_id)).rejects.toBeInstanceOf(ConflictError);
  });
});
