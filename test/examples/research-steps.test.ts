/** examples/research-steps: a retry resumes after the last recorded step (task.step). */
import { describe, expect, it } from "vitest";
import agents, { calls } from "../../examples/research-steps/agents.js";
import { runExample } from "./example.js";

describe("examples/research-steps", () => {
  it("the retry after a rate limit gets the plan and the first search from their records", async () => {
    const t = await runExample("research-steps", agents);
    const run = await t.engine.startRun("research-steps", { input: { question: "durable agents" } });
    const done = await t.result(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.output).toMatchObject({
      research: { summary: "2 topics researched", attempts: 2 },
    });
    // The plan and the first search ran once; the search that failed ran again, then the summary.
    expect(calls).toEqual([
      "plan",
      "search durable agents: history",
      "search durable agents: today",
      "search durable agents: today",
      "summarize",
    ]);
    const steps = await t.engine.listSteps(run.run_id, "research");
    expect(steps.map((s) => [s.name, s.attempt])).toEqual([
      ["plan", 1],
      ["search:0", 1],
      ["search:1", 2],
      ["summarize", 2],
    ]);
  });
});
