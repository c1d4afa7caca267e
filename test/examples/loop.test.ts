/** examples/loop: draft, critique, revise until the score passes, bounded by max_visits. */
import { describe, expect, it } from "vitest";
import agents from "../../examples/loop/agents.js";
import { fake } from "../../src/index.js";
import { nodeOf, runExample } from "./example.js";

describe("examples/loop", () => {
  it("revises until the third critique passes", async () => {
    const t = await runExample("loop", agents);
    const run = await t.engine.startRun("loop");
    const done = await t.result(run.run_id);
    expect(done.output).toEqual({ publish: { published: "draft v3" } });
    expect(nodeOf(done, "critique")).toMatchObject({ state: "SUCCEEDED", visit: 3 });
    expect(t.calls("writer").map((c) => `${c.node_id}#${c.visit}`)).toEqual(["draft#1", "revise#1", "revise#2"]);
  });

  it("a critic that never passes stops the loop at max_visits: 5 and fails the run", async () => {
    const t = await runExample("loop", agents, { agents: { critic: fake.returns({ text: "meh", score: 0.1 }) } });
    const run = await t.engine.startRun("loop");
    const done = await t.result(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(t.calls("critic")).toHaveLength(5);
    expect(t.calls("publisher")).toHaveLength(0);
  });
});
