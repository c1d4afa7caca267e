/** examples/branch-merge: `when` cases choose a branch, `join: any` merges the one taken. */
import { describe, expect, it } from "vitest";
import agents from "../../examples/branch-merge/agents.js";
import { nodeOf, runExample } from "./example.js";

describe("examples/branch-merge", () => {
  it("a question takes the answer branch, a statement the summary branch", async () => {
    const t = await runExample("branch-merge", agents);
    const question = await t.engine.startRun("branch-merge", { input: { text: "is it durable?" } });
    const statement = await t.engine.startRun("branch-merge", { input: { text: "it is durable" } });
    const asked = await t.result(question.run_id);
    expect(asked.output).toEqual({ reply: { answer: { answer: "Answer to: is it durable?" } } });
    expect(nodeOf(asked, "summarize").state).toBe("SKIPPED");
    const told = await t.result(statement.run_id);
    expect(told.output).toEqual({ reply: { summarize: { summarize: "Summary of: it is durable" } } });
    expect(nodeOf(told, "answer").state).toBe("SKIPPED");
  });

  it("refuses a run without the text its input_schema requires", async () => {
    const t = await runExample("branch-merge", agents);
    await expect(t.engine.startRun("branch-merge", { input: {} })).rejects.toThrow(/text/);
  });
});
