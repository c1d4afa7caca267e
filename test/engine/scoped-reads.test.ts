/** What the HTTP API's workflow scopes read (DESIGN §13): runs of some workflows, reviews with their workflow. */
import { describe, expect, it } from "vitest";
import type { Task } from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";

describe("reads by workflow", () => {
  it("lists runs of the given workflows only, newest first, a page at a time; none for an empty list", async () => {
    const { engine } = await testEngine({ agents: { writer: (task: Task) => task.node_id } });
    for (const id of ["a", "b", "c"])
      await engine.registerWorkflow({ id, nodes: [{ node_id: "n", agent_type: "writer" }] });
    const started: string[] = [];
    for (const id of ["a", "b", "c", "a", "b", "c"]) started.push((await engine.startRun(id)).run_id);
    const all = await engine.listRuns();
    const ab = await engine.listRuns({ workflow_ids: ["a", "b"] });
    expect(ab).toEqual(all.filter((r) => r.workflow_id !== "c"));
    expect(ab.map((r) => r.run_id).sort()).toEqual([started[0], started[1], started[3], started[4]].sort());
    const page = await engine.listRuns({ workflow_ids: ["a", "b"], limit: 2, before: ab[1]?.run_id });
    expect(page).toEqual(ab.slice(2, 4));
    expect(await engine.listRuns({ workflow_ids: [] })).toEqual([]);
  });

  it("gives each pending review its run's workflow", async () => {
    const { engine } = await testEngine();
    await engine.registerWorkflow({
      id: "approve",
      nodes: [{ node_id: "check", agent_type: "human_review", timeout: 60, payload: { title: "ok?" } }],
    });
    const asked = nextEvent(engine, (e) => e.type === "review.requested");
    const run = await engine.startRun("approve");
    await asked;
    expect(await engine.listReviews()).toEqual([
      expect.objectContaining({ run_id: run.run_id, workflow_id: "approve", node_id: "check" }),
    ]);
  });
});
