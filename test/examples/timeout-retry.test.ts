/** examples/timeout-retry: exponential backoff and an attempt that hangs past its timeout. */
import { describe, expect, it } from "vitest";
import agents from "../../examples/timeout-retry/agents.js";
import { fake } from "../../src/index.js";
import { nodeOf, runExample, START } from "./example.js";

describe("examples/timeout-retry", () => {
  it("the flaky call succeeds on attempt 3, the hung one on attempt 2 after its 0.5 s timeout", async () => {
    const t = await runExample("timeout-retry", agents);
    const run = await t.engine.startRun("timeout-retry");
    const done = await t.result(run.run_id);
    expect(done.output).toEqual({ report: { flaky_api: { attempts: 3 }, slow_tool: { attempts: 2 } } });
    // flaky: retries after 0.1 s and 0.2 s; slow: the 0.5 s timeout, then 0.1 s: the run ends at 0.6 s.
    expect(t.calls("flaky").map((c) => c.at - START)).toEqual([0, 100, 300]);
    expect(t.calls("slow").map((c) => c.at - START)).toEqual([0, 600]);
    expect(t.clock.now() - START).toBe(600);
  });

  it("a tool that always hangs fails after its three attempts, and the run with it", async () => {
    const t = await runExample("timeout-retry", agents, { agents: { slow: fake.hangs() } });
    const run = await t.engine.startRun("timeout-retry");
    const done = await t.result(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(nodeOf(done, "slow_tool")).toMatchObject({ state: "FAILED", attempt: 3 });
    // Three 0.5 s attempts with 0.1 s and 0.2 s between them.
    expect(t.clock.now() - START).toBe(3 * 500 + 100 + 200);
  });
});
