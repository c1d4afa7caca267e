/** An admin deciding a review *as* one of its assignees (DESIGN §13), recorded as such. */
import { describe, expect, it } from "vitest";
import { ForbiddenError, type Task } from "../../../src/index.js";
import { nextEvent, testEngine } from "../../helpers.js";

async function reviewing(assignees: unknown) {
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
    const { engine, run, decided } = await reviewing(["finance", "legal"]);
    await engine.review(run.run_id, "check", { decision: "approve", by: "legal", admin: "ops" });
    expect(await decided()).toEqual({ decision: "approve", by: "legal", comment: null, admin: "ops" });
    const done = await engine.waitForRun(run.run_id);
    expect(done.nodes[0]?.output).toMatchObject({ decision: "approve", by: "legal" });
  });

  it("refuses an admin deciding as itself when it is not an assignee, saying to choose one", async () => {
    const { engine, run, decided } = await reviewing(["finance", "legal"]);
    const refused = engine.review(run.run_id, "check", { decision: "approve", by: "ops", admin: "ops" });
    await expect(refused).rejects.toThrow(ForbiddenError);
    await expect(refused).rejects.toThrow(/choose one with by \(one of: finance, legal\)/);
    expect(await decided()).toBeNull();
    expect((await engine.getRun(run.run_id)).nodes[0]?.state).toBe("IN_REVIEW");
  });

  it("refuses an admin deciding as someone who is not an assignee", async () => {
    const { engine, run } = await reviewing(["finance"]);
    await expect(
      engine.review(run.run_id, "check", { decision: "reject", by: "mallory", admin: "ops" }),
    ).rejects.toThrow(/mallory may not decide check: assignees are finance/);
  });

  it("records an admin deciding a review without assignees as itself, once", async () => {
    const { engine, run, decided } = await reviewing(undefined);
    await engine.review(run.run_id, "check", { decision: "reject", by: "ops", admin: "ops" });
    expect(await decided()).toEqual({ decision: "reject", by: "ops", comment: null });
  });
});
