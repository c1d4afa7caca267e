/** examples/content-publish: a retried 502, a rework loop, three publishers, and a saga when one hangs. */
import { describe, expect, it } from "vitest";
import agents from "../../examples/content-publish/agents.js";
import type { Task } from "../../src/index.js";
import { nodeOf, runExample, START } from "./example.js";

describe("examples/content-publish", () => {
  it("retries platform b's 502 after 0.2 s, loops through rework once, publishes to three platforms", async () => {
    const t = await runExample("content-publish", agents);
    const run = await t.engine.startRun("content-publish", { input: { topic: "durable agents" } });
    const done = await t.result(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(nodeOf(done, "fetch_b")).toMatchObject({ state: "SUCCEEDED", attempt: 2 });
    expect(nodeOf(done, "review")).toMatchObject({ state: "SUCCEEDED", visit: 2 });
    expect(nodeOf(done, "rework")).toMatchObject({ state: "SKIPPED", visit: 2 });
    expect(Object.keys((done.output as { summary: object }).summary).sort()).toEqual([
      "publish_a",
      "publish_b",
      "publish_c",
    ]);
    // The only wait was the retry's 0.2 s: skipped, not slept.
    expect(t.clock.now() - START).toBe(200);
  });

  it("a publisher that hangs past its 30 s timeout four times fails the run, which unpublishes all three, the failed one first", async () => {
    const hangsOnC = (task: Task) =>
      (task.payload as { platform: string }).platform === "c"
        ? new Promise((_resolve, reject) => task.signal.addEventListener("abort", () => reject(task.signal.reason)))
        : agents.publisher(task);
    const t = await runExample("content-publish", agents, { agents: { publisher: hangsOnC } });
    const run = await t.engine.startRun("content-publish", { input: { topic: "durable agents" } });
    const done = await t.result(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(nodeOf(done, "publish_c")).toMatchObject({ state: "FAILED", attempt: 4 });
    // The failing visit first (its attempts may have posted), then the published ones, newest first.
    const undone = t.calls("unpublisher").map((c) => (c.payload as { platform: string }).platform);
    expect(undone[0]).toBe("c");
    expect(undone.slice(1).sort()).toEqual(["a", "b"]);
    expect(done.compensations.map((c) => [c.node_id, c.state])).toEqual(
      undone.map((p) => [`publish_${p}`, "SUCCEEDED"]),
    );
    // 0.2 s for the 502's retry, then four 30 s attempts with exponential backoff 0.2, 0.4, 0.8 s.
    expect(t.clock.now() - START).toBe(200 + 4 * 30_000 + 200 + 400 + 800);
  });
});
