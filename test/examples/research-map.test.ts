/** examples/research-map: a planner's five questions answered by a map, four at a time, one retried. */
import { describe, expect, it } from "vitest";
import agents from "../../examples/research-map/agents.js";
import { nodeOf, runExample, START } from "./example.js";

interface Report {
  title: string;
  questions: number;
  most_researchers_at_once: number;
  report: string;
}

describe("examples/research-map", () => {
  it("answers the five questions four at a time (the rate-limited one retried) and reports them in order", async () => {
    const t = await runExample("research-map", agents);
    const run = await t.engine.startRun("research-map", { input: { topic: "durable agents" } });
    const done = await t.result(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(nodeOf(done, "answer")).toMatchObject({ state: "SUCCEEDED", items: { total: 5, succeeded: 5 } });
    const report = (done.output as unknown as { report: Report }).report;
    expect(report.title).toBe("Research report: durable agents");
    expect(report.most_researchers_at_once).toBeGreaterThan(1);
    expect(report.most_researchers_at_once).toBeLessThanOrEqual(4);
    expect(report.report.split("\n").filter((line) => line.startsWith("## "))).toEqual([
      "## 1. What is durable agents?",
      "## 2. Why does durable agents matter?",
      "## 3. How does durable agents work?",
      "## 4. What can go wrong with durable agents?",
      "## 5. What comes next for durable agents?",
    ]);
    expect(report.report.match(/found on attempt 1\./g)).toHaveLength(4);
    // The third question's retry waited its 0.1 s in its own item run; nothing else waited.
    const third = t.calls("researcher").filter((c) => (c.payload as { number: number }).number === 3);
    expect(third.map((c) => [c.attempt, c.at - START])).toEqual([
      [1, 0],
      [2, 100],
    ]);
  });
});
