import { describe, expect, it } from "vitest";
import { z } from "zod";
import { PendingReviewSchema, VisitSchema } from "../../src/http/schemas.js";
import { nextEvent } from "../helpers.js";
import { bearer, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

/** A run of the review workflow waiting at `check` (assignees: alice). */
async function waitingForReview(options: { open?: boolean } = {}) {
  const t = await testApi(options);
  await t.engine.registerWorkflow(WORKFLOWS.review);
  const asked = nextEvent(t.engine, (e) => e.type === "review.requested");
  const run = await t.engine.startRun("review");
  await asked;
  const decide = (token: string | null, body: object, node = "check") =>
    t.app.inject({
      method: "POST",
      url: `/v1/runs/${run.run_id}/nodes/${node}/review`,
      headers: token === null ? {} : bearer(token),
      payload: body,
    });
  return { ...t, run, decide };
}

describe("reviews", () => {
  it("lists what waits for a decision", async () => {
    const { app, run } = await waitingForReview();
    const res = await app.inject({ url: "/v1/reviews?status=pending", headers: bearer(TOKENS.alice) });
    expect(res.statusCode).toBe(200);
    const { reviews } = z.object({ reviews: z.array(PendingReviewSchema) }).parse(res.json());
    expect(reviews).toEqual([
      expect.objectContaining({ run_id: run.run_id, node_id: "check", title: "Publish t?", assignees: ["alice"] }),
    ]);
    const bad = await app.inject({ url: "/v1/reviews?status=done", headers: bearer(TOKENS.alice) });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details.problems[0].path).toBe("query.status");
  });

  it("lists the reviews of the runs named by run_ids only, at most 100 of them", async () => {
    const { app, run } = await waitingForReview();
    const list = async (runIds: string) =>
      (await app.inject({ url: `/v1/reviews?run_ids=${runIds}`, headers: bearer(TOKENS.alice) })).json();
    expect((await list(`other,${run.run_id}`)).reviews.map((r: { run_id: string }) => r.run_id)).toEqual([run.run_id]);
    expect((await list("other")).reviews).toEqual([]);
    const tooMany = await list(Array.from({ length: 101 }, (_, i) => `run-${i}`).join(","));
    expect(tooMany.error.details.problems[0]).toMatchObject({ path: "query.run_ids" });
    expect(tooMany.error.details.problems[0].message).toMatch(/100/);
    expect((await list("a,,b")).error.details.problems[0].path).toMatch(/^query\.run_ids/);
  });

  it("a reviewer's approval is recorded under the token's name, and the run goes on", async () => {
    const { engine, run, decide } = await waitingForReview();
    const res = await decide(TOKENS.alice, { decision: "approve", comment: "ship it", output: { edited: true } });
    expect(res.statusCode).toBe(200);
    const visit = VisitSchema.parse(res.json());
    expect(visit).toMatchObject({ node_id: "check", state: "SUCCEEDED" });
    expect(visit.output).toEqual({ decision: "approve", by: "alice", comment: "ship it", output: { edited: true } });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
  });

  it("refuses a reviewer the node's assignees exclude (403), then takes the assignee's decision", async () => {
    const { decide } = await waitingForReview();
    const bob = await decide(TOKENS.bob, { decision: "approve" });
    expect(bob.statusCode).toBe(403);
    expect(bob.json().error.code).toBe("forbidden");
    expect((await decide(TOKENS.alice, { decision: "reject", comment: "no" })).statusCode).toBe(200);
  });

  it("a reviewer decides only as itself: a different by is a 403", async () => {
    const { decide } = await waitingForReview();
    const res = await decide(TOKENS.bob, { decision: "approve", by: "alice" });
    expect(res.statusCode).toBe(403);
    expect(res.json().error.message).toContain('decides as "bob"');
  });

  it("a second decision is a 409, and the first one stands", async () => {
    const { engine, run, decide } = await waitingForReview();
    expect((await decide(TOKENS.alice, { decision: "approve" })).statusCode).toBe(200);
    const second = await decide(TOKENS.alice, { decision: "reject" });
    expect(second.statusCode).toBe(409);
    expect(second.json().error.code).toBe("conflict");
    const check = (await engine.getRun(run.run_id)).nodes.find((n) => n.node_id === "check");
    expect(check?.state).toBe("SUCCEEDED");
  });

  it("a decision for another review round (execution_id) is a 409", async () => {
    const { decide } = await waitingForReview();
    const res = await decide(TOKENS.alice, { decision: "approve", execution_id: "an-older-round" });
    expect(res.statusCode).toBe(409);
  });

  it("bad decisions are 400 with paths; unknown runs and nodes are 404", async () => {
    const { decide, app } = await waitingForReview();
    const bad = await decide(TOKENS.alice, { decision: "maybe", extra: 1 });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details.problems.map((p: { path: string }) => p.path)).toEqual(["body.decision", "body"]);
    expect((await decide(TOKENS.alice, { decision: "approve" }, "ghost")).statusCode).toBe(404);
    const unknownRun = await app.inject({
      method: "POST",
      url: "/v1/runs/nope/nodes/check/review",
      headers: bearer(TOKENS.alice),
      payload: { decision: "approve" },
    });
    expect(unknownRun.statusCode).toBe(404);
  });

  it("an admin decides as a named assignee, recorded with the admin's name", async () => {
    const { engine, run, decide } = await waitingForReview();
    const res = await decide(TOKENS.admin, { decision: "approve", by: "alice", comment: "on the phone" });
    expect(res.statusCode).toBe(200);
    expect(res.json().output).toMatchObject({ decision: "approve", by: "alice" });
    const decided = (await engine.listEvents(run.run_id)).find((e) => e.type === "review.decided");
    expect(decided?.data).toEqual({ decision: "approve", by: "alice", comment: "on the phone", admin: "ops" });
    expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
  });

  it("an admin without by on a review with assignees is told to choose one, and nothing is decided", async () => {
    const { engine, run, decide } = await waitingForReview();
    const res = await decide(TOKENS.admin, { decision: "approve" });
    expect(res.statusCode).toBe(403);
    expect(res.json().error.message).toContain("choose one with by (one of: alice)");
    const notAssignee = await decide(TOKENS.admin, { decision: "approve", by: "mallory" });
    expect(notAssignee.statusCode).toBe(403);
    expect((await engine.getRun(run.run_id)).nodes.find((n) => n.node_id === "check")?.state).toBe("IN_REVIEW");
  });

  it("an admin decides a review without assignees as itself", async () => {
    const t = await testApi();
    const { assignees: _a, ...payload } = (WORKFLOWS.review.nodes[1]?.payload ?? {}) as Record<string, unknown>;
    await t.engine.registerWorkflow({
      ...WORKFLOWS.review,
      nodes: WORKFLOWS.review.nodes.map((n) => (n.node_id === "check" ? { ...n, payload } : n)),
    });
    const asked = nextEvent(t.engine, (e) => e.type === "review.requested");
    const run = await t.engine.startRun("review");
    await asked;
    const res = await t.app.inject({
      method: "POST",
      url: `/v1/runs/${run.run_id}/nodes/check/review`,
      headers: bearer(TOKENS.admin),
      payload: { decision: "reject" },
    });
    expect(res.statusCode).toBe(200);
    const decided = (await t.engine.listEvents(run.run_id)).find((e) => e.type === "review.decided");
    expect(decided?.data).toEqual({ decision: "reject", by: "ops", comment: null });
  });

  it("with no tokens configured, the decision is made as the body's by", async () => {
    const { decide } = await waitingForReview({ open: true });
    const res = await decide(null, { decision: "approve", by: "alice" });
    expect(res.statusCode).toBe(200);
    expect(res.json().output).toMatchObject({ by: "alice" });
  });
});
