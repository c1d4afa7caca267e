/** cancelRun: active nodes cancelled, their attempts aborted, late results fenced. */
import { describe, expect, it } from "vitest";
import { ConflictError, type Task } from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";

describe("cancelRun", () => {
  it("cancels active nodes, aborts their attempts, fences late results, and refuses a second cancel", async () => {
    let aborted = false;
    let release!: () => void;
    const { engine } = await testEngine({
      agents: {
        slow: (t: Task) =>
          new Promise((resolve) => {
            t.signal.addEventListener("abort", () => {
              aborted = true;
            });
            release = () => resolve("late");
          }),
      },
    });
    await engine.registerWorkflow({
      id: "cancel",
      nodes: [
        { node_id: "a", agent_type: "slow" },
        { node_id: "b", agent_type: "slow", depends_on: ["a"] },
      ],
    });
    const started = nextEvent(engine, (e) => e.type === "node.started");
    const run = await engine.startRun("cancel");
    await started;
    const cancelled = await engine.cancelRun(run.run_id, { reason: "changed my mind" });
    expect(cancelled.status).toBe("CANCELLED");
    const after = await engine.getRun(run.run_id);
    expect(after.nodes.map((n) => [n.node_id, n.state])).toEqual([
      ["a", "CANCELLED"],
      ["b", "SKIPPED"],
    ]);
    expect(aborted).toBe(true);
    const fenced = nextEvent(engine, (e) => e.type === "result.fenced");
    release();
    await fenced;
    const released = (await engine.getRun(run.run_id)).nodes[0];
    expect(released).toMatchObject({ state: "CANCELLED", holder: null }); // the late result released it
    await expect(engine.cancelRun(run.run_id)).rejects.toBeInstanceOf(ConflictError);
  });
});
