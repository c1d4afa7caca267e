/**
 * Review assignees fail closed (DESIGN §13): a template that gives anything but a non-empty
 * list of names fails the review visit (`template_error`) instead of letting anyone decide.
 */
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { ForbiddenError, type RunEvent, type Task } from "../../../src/index.js";
import { describeSqlite, nextEvent, testEngine } from "../../helpers.js";

const flow = {
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

async function engine() {
  const t = await testEngine({ agents: { writer: (_task: Task) => ({ title: "t" }) } });
  await t.engine.registerWorkflow(flow);
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
      const e = await engine();
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
    const e = await engine();
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
