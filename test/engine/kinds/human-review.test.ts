/**
 * `human_review` (DESIGN §11, §13): a visit IN_REVIEW until a person decides or its timeout
 * passes; who may decide (assignees, fail closed, from a template) and an admin deciding as one
 * of them.
 */
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { ConflictError, ForbiddenError, type RunEvent, type Task, ValidationError } from "../../../src/index.js";
import { describeSqlite, nextEvent, testEngine } from "../../helpers.js";

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

/** An admin deciding a review *as* one of its assignees (DESIGN §13), recorded as such. */
async function reviewingFor(assignees: unknown) {
  const t = await testEngine({ agents: { writer: (task: Task) => ({ node: task.node_id }) } });
  await t.engine.registerWorkflow({
    id: "approve",
    nodes: [
      {
        node_id: "check",
        agent_type: "human_review",
        timeout: 3600,
        payload: { title: "ok?", ...(assignees === undefined ? {} : { assignees }) },
      },
    ],
  });
  const asked = nextEvent(t.engine, (e) => e.type === "review.requested");
  const run = await t.engine.startRun("approve");
  await asked;
  const decided = async () =>
    (await t.engine.listEvents(run.run_id)).find((e) => e.type === "review.decided")?.data ?? null;
  return { ...t, run, decided };
}

describe("deciding as an assignee", () => {
  it("records the assignee as who decided and the admin who did it for them", async () => {
    const { engine, run, decided } = await reviewingFor(["finance", "legal"]);
    await engine.review(run.run_id, "check", { decision: "approve", by: "legal", admin: "ops" });
    expect(await decided()).toEqual({ decision: "approve", by: "legal", comment: null, admin: "ops" });
    const done = await engine.waitForRun(run.run_id);
    expect(done.nodes[0]?.output).toMatchObject({ decision: "approve", by: "legal" });
  });

  it("refuses an admin deciding as itself when it is not an assignee, saying to choose one", async () => {
    const { engine, run, decided } = await reviewingFor(["finance", "legal"]);
    const refused = engine.review(run.run_id, "check", { decision: "approve", by: "ops", admin: "ops" });
    await expect(refused).rejects.toThrow(ForbiddenError);
    await expect(refused).rejects.toThrow(/choose one with by \(one of: finance, legal\)/);
    expect(await decided()).toBeNull();
    expect((await engine.getRun(run.run_id)).nodes[0]?.state).toBe("IN_REVIEW");
  });

  it("refuses an admin deciding as someone who is not an assignee", async () => {
    const { engine, run } = await reviewingFor(["finance"]);
    await expect(
      engine.review(run.run_id, "check", { decision: "reject", by: "mallory", admin: "ops" }),
    ).rejects.toThrow(/mallory may not decide check: assignees are finance/);
  });

  it("records an admin deciding a review without assignees as itself, once", async () => {
    const { engine, run, decided } = await reviewingFor(undefined);
    await engine.review(run.run_id, "check", { decision: "reject", by: "ops", admin: "ops" });
    expect(await decided()).toEqual({ decision: "reject", by: "ops", comment: null });
  });
});

/**
 * Review assignees fail closed (DESIGN §13): a template that gives anything but a non-empty
 * list of names fails the review visit (`template_error`) instead of letting anyone decide.
 */
const templatedFlow = {
  id: "approve",
  nodes: [
    { node_id: "draft", agent_type: "writer" },
    {
      node_id: "check",
      agent_type: "human_review",
      depends_on: ["draft"],
      timeout: 3600,
      payload: { title: "Publish?", assignees: "{{ input.approvers }}" },
    },
  ],
};

async function templatedEngine() {
  const t = await testEngine({ agents: { writer: (_task: Task) => ({ title: "t" }) } });
  await t.engine.registerWorkflow(templatedFlow);
  return t.engine;
}

describe("review assignees from a template", () => {
  for (const [what, approvers] of [
    ["a string", "alice"],
    ["an object", { alice: true }],
    ["an empty list", []],
    ["a list with a non-string", ["alice", 7]],
    ["nothing", undefined],
  ] as const) {
    it(`fails the review visit with template_error when the template gives ${what}`, async () => {
      const e = await templatedEngine();
      const input = approvers === undefined ? {} : { approvers };
      const run = await e.waitForRun((await e.startRun("approve", { input })).run_id);
      expect(run.status).toBe("FAILED");
      const check = run.nodes.find((n) => n.node_id === "check");
      expect(check).toMatchObject({ state: "FAILED", reason: "template_error" });
      expect(check?.error?.message).toContain("payload.assignees");
      expect(await e.listReviews({ status: "pending" })).toEqual([]);
    });
  }

  it("lets only the resolved assignees decide", async () => {
    const e = await templatedEngine();
    const asked = nextEvent(e, (ev: RunEvent) => ev.type === "review.requested");
    const run = await e.startRun("approve", { input: { approvers: ["alice", "bob"] } });
    expect((await asked).data).toMatchObject({ assignees: ["alice", "bob"] });
    await expect(e.review(run.run_id, "check", { decision: "approve", by: "mallory" })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    await expect(e.review(run.run_id, "check", { decision: "approve" })).rejects.toBeInstanceOf(ForbiddenError);
    await e.review(run.run_id, "check", { decision: "approve", by: "bob" });
    expect((await e.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
  });
});

describeSqlite("a version stored before assignees were validated", () => {
  it("still loads, and its string assignees admit nobody (fail closed)", async () => {
    const literal = {
      id: "old",
      nodes: [{ node_id: "check", agent_type: "human_review", payload: { title: "ok?", assignees: ["alice"] } }],
    };
    const first = await testEngine();
    await first.engine.registerWorkflow(literal);
    await first.engine.close();
    // What an older Skein accepted and stored: a string where a list belongs.
    const db = new Database(first.database.slice("sqlite:".length));
    const row = db.prepare("SELECT definition FROM workflows WHERE id = 'old'").get() as { definition: string };
    db.prepare("UPDATE workflows SET definition = ? WHERE id = 'old'").run(
      row.definition.replace('["alice"]', '"alice"'),
    );
    db.close();

    const { engine } = await testEngine({ database: first.database });
    const asked = nextEvent(engine, (ev: RunEvent) => ev.type === "review.requested");
    const run = await engine.startRun("old");
    expect((await asked).data).toMatchObject({ assignees: "alice" });
    expect(await engine.getRun(run.run_id)).toMatchObject({ status: "RUNNING" });
    await expect(engine.review(run.run_id, "check", { decision: "approve", by: "alice" })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
  });
});
