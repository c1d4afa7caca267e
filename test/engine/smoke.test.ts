import { describe, expect, it } from "vitest";
import { testEngine } from "../helpers.js";

describe("fan-out and join", () => {
  it("runs 3 parallel nodes joined by an aggregator", async () => {
    const { engine } = await testEngine({
      agents: {
        collect: async (t) => ({
          platform: (t.payload as { p: string }).p,
          topic: (t.input as { topic: string }).topic,
        }),
      },
    });
    await engine.registerWorkflow({
      id: "fan",
      nodes: [
        { node_id: "a", agent_type: "collect", payload: { p: "a" } },
        { node_id: "b", agent_type: "collect", payload: { p: "b" } },
        { node_id: "c", agent_type: "collect", payload: { p: "c" } },
        { node_id: "join", agent_type: "aggregator", depends_on: ["a", "b", "c"] },
      ],
    });
    const run = await engine.startRun("fan", { input: { topic: "t" } });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.output).toEqual({
      join: { a: { platform: "a", topic: "t" }, b: { platform: "b", topic: "t" }, c: { platform: "c", topic: "t" } },
    });
  });
});
