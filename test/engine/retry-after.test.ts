import { describe, expect, it } from "vitest";
import { RetryableError, type RunEvent, type Task, ValidationError } from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";

const retrying = (e: RunEvent) => e.type === "node.retrying";

describe("Retry-After: a failure that says when to come back", () => {
  it("an in-process RetryableError with retryAfterMs replaces the backoff delay", async () => {
    const startedAt: number[] = [];
    const { engine, clock } = await testEngine({
      agents: {
        limited: (t: Task) => {
          startedAt.push(clock.now());
          if (t.attempt === 1) throw new RetryableError("429 Too Many Requests", { retryAfterMs: 7_000 });
          return { attempt: t.attempt };
        },
      },
    });
    await engine.registerWorkflow({
      id: "limited",
      nodes: [{ node_id: "call", agent_type: "limited", retry_count: 2, retry_interval: 60, retry_max_interval: 300 }],
    });
    const t0 = clock.now();
    const event = nextEvent(engine, retrying);
    const run = await engine.startRun("limited");
    const retry = await event;
    expect(retry.data.retry_at).toBe(t0 + 7_000);
    expect(retry.data.error).toMatchObject({ retry_after_ms: 7_000, name: "RetryableError" });

    // Not before the Retry-After (the backoff's 60 s would be later still), and at once after it.
    await clock.advance(6_999);
    expect(startedAt).toHaveLength(1);
    const done = engine.waitForRun(run.run_id);
    await clock.advance(1);
    expect((await done).status).toBe("SUCCEEDED");
    expect(startedAt.map((t) => t - t0)).toEqual([0, 7_000]);
  });

  it("is capped by retry_max_interval, and fails for good when no retry is left", async () => {
    const { engine } = await testEngine({
      agents: {
        limited: () => {
          throw new RetryableError("try tomorrow", { retryAfterMs: 86_400_000 });
        },
      },
    });
    await engine.registerWorkflow({
      id: "capped",
      nodes: [{ node_id: "call", agent_type: "limited", retry_count: 1, retry_max_interval: 30 }],
    });
    const event = nextEvent(engine, retrying);
    const run = await engine.startRun("capped");
    const retry = await event;
    expect((retry.data.retry_at as number) - retry.at).toBe(30_000);

    await engine.registerWorkflow({
      id: "none-left",
      nodes: [{ node_id: "call", agent_type: "limited", retry_count: 0 }],
    });
    const failed = await engine.waitForRun((await engine.startRun("none-left")).run_id);
    expect(failed.status).toBe("FAILED");
    expect(failed.nodes[0]).toMatchObject({ reason: "retries_exhausted", failures: 1 });
    await engine.cancelRun(run.run_id);
  });

  it("a worker's failure report carries error.retry_after_ms (a non-negative integer)", async () => {
    const { engine, clock } = await testEngine();
    await engine.registerWorkflow({
      id: "remote",
      nodes: [{ node_id: "call", agent_type: "remote", retry_count: 1, retry_interval: 60 }],
    });
    const run = await engine.startRun("remote");
    const w = { worker_id: "w1" };
    const [task] = await engine.claimTasks({ ...w, agent_types: ["remote"] });
    if (!task) throw new Error("no task claimed");
    await expect(
      engine.failTask(task.execution_id, { ...w, attempt: 1, error: { message: "429", retry_after_ms: -1 } }),
    ).rejects.toThrow(ValidationError);
    await expect(
      engine.failTask(task.execution_id, { ...w, attempt: 1, error: { message: "429", retry_after_ms: 1.5 } }),
    ).rejects.toThrow(/error\.retry_after_ms: must be a non-negative integer/);
    const t0 = clock.now();
    const event = nextEvent(engine, retrying);
    await engine.failTask(task.execution_id, { ...w, attempt: 1, error: { message: "429", retry_after_ms: 2_500 } });
    expect((await event).data.retry_at).toBe(t0 + 2_500);
    await clock.advance(2_499);
    expect(await engine.claimTasks({ ...w, agent_types: ["remote"] })).toHaveLength(0);
    await clock.advance(1);
    const [second] = await engine.claimTasks({ ...w, agent_types: ["remote"] });
    expect(second).toMatchObject({ execution_id: task.execution_id, attempt: 2 });
    await engine.cancelRun(run.run_id);
  });
});
