import { describe, expect, it } from "vitest";
import { NonRetryableError, type RunEvent, type Task } from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";

const isEvent = (type: string, node?: string) => (e: RunEvent) =>
  e.type === type && (node === undefined || e.node_id === node);

describe("retries and time", () => {
  it("retries with exponential backoff, observed through the injected clock", async () => {
    const startedAt: number[] = [];
    const { engine, clock } = await testEngine({
      agents: {
        flaky: (t: Task) => {
          startedAt.push(clock.now());
          if (t.attempt < 4) throw new Error(`502 Bad Gateway (attempt ${t.attempt})`);
          return { attempt: t.attempt };
        },
      },
    });
    await engine.registerWorkflow({
      id: "retry",
      nodes: [
        { node_id: "call", agent_type: "flaky", retry_count: 3, retry_interval: 10, retry_backoff: "exponential" },
      ],
    });
    const t0 = clock.now();
    const retrying = nextEvent(engine, isEvent("node.retrying"));
    const run = await engine.startRun("retry");
    expect((await retrying).data.retry_at).toBe(t0 + 10_000);

    // Just before the retry is due nothing runs; at the due time attempt 2 starts.
    await clock.advance(9_999);
    expect(startedAt).toHaveLength(1);
    let next = nextEvent(engine, isEvent("node.retrying"));
    await clock.advance(1);
    expect((await next).data).toMatchObject({ attempt: 2, retry_at: t0 + 10_000 + 20_000 });
    next = nextEvent(engine, isEvent("node.retrying"));
    await clock.advance(20_000);
    expect((await next).data).toMatchObject({ attempt: 3, retry_at: t0 + 30_000 + 40_000 });
    const done = engine.waitForRun(run.run_id);
    await clock.advance(40_000);
    const finished = await done;
    expect(finished.status).toBe("SUCCEEDED");
    expect(finished.output).toEqual({ call: { attempt: 4 } });
    expect(startedAt.map((t) => t - t0)).toEqual([0, 10_000, 30_000, 70_000]);
    expect(finished.nodes[0]).toMatchObject({ failures: 3, attempt: 4 });
  });

  it("caps backoff at retry_max_interval and keeps full jitter within [0, computed]", async () => {
    const { engine, clock } = await testEngine({
      random: () => 0.5,
      agents: {
        flaky: () => {
          throw new Error("down");
        },
      },
    });
    await engine.registerWorkflow({
      id: "cap",
      nodes: [
        {
          node_id: "call",
          agent_type: "flaky",
          retry_count: 1,
          retry_interval: 100,
          retry_backoff: "exponential",
          retry_max_interval: 60,
          retry_jitter: "full",
        },
      ],
    });
    const t0 = clock.now();
    const retrying = nextEvent(engine, isEvent("node.retrying"));
    await engine.startRun("cap");
    expect((await retrying).data.retry_at).toBe(t0 + 30_000); // min(100, 60) × 0.5
  });

  it("fails at once on NonRetryableError and after the budget with retries_exhausted", async () => {
    let calls = 0;
    const { engine, clock } = await testEngine({
      agents: {
        fatal: () => {
          calls += 1;
          throw new NonRetryableError("article deleted upstream");
        },
        flaky: () => {
          throw new Error("down");
        },
      },
    });
    await engine.registerWorkflow({ id: "fatal", nodes: [{ node_id: "a", agent_type: "fatal", retry_count: 5 }] });
    const fatal = await engine.waitForRun((await engine.startRun("fatal")).run_id);
    expect(fatal.status).toBe("FAILED");
    expect(fatal.nodes[0]).toMatchObject({ reason: "non_retryable", attempt: 1 });
    expect(calls).toBe(1);

    await engine.registerWorkflow({
      id: "budget",
      nodes: [{ node_id: "a", agent_type: "flaky", retry_count: 2, retry_interval: 1 }],
    });
    const retrying = (n: number) =>
      nextEvent(engine, (e) => e.type === "node.retrying" && e.run_id === run.run_id && e.data.attempt === n);
    const first = retrying(1);
    const run = await engine.startRun("budget");
    const done = engine.waitForRun(run.run_id);
    await first;
    const second = retrying(2);
    await clock.advance(1_000);
    await second;
    await clock.advance(1_000);
    const budget = await done;
    expect(budget.nodes[0]).toMatchObject({ state: "FAILED", reason: "retries_exhausted", failures: 3, attempt: 3 });
    expect(budget.error?.reason).toBe("retries_exhausted");
  });

  it("times out a hanging attempt, aborts its signal, and fences its late result", async () => {
    let release!: (v: unknown) => void;
    let aborted: unknown = null;
    const { engine, clock } = await testEngine({
      agents: {
        hang: (t: Task) => {
          t.signal.addEventListener("abort", () => {
            aborted = t.signal.reason;
          });
          return new Promise((resolve) => {
            release = resolve; // ignores the signal, like a badly behaved tool call
          });
        },
      },
    });
    await engine.registerWorkflow({
      id: "hang",
      nodes: [{ node_id: "a", agent_type: "hang", timeout: 5, retry_count: 0 }],
    });
    const started = nextEvent(engine, isEvent("node.started"));
    const run = await engine.startRun("hang");
    await started;
    const done = engine.waitForRun(run.run_id);
    await clock.advance(4_999);
    expect(aborted).toBeNull();
    await clock.advance(1);
    const failed = await done;
    expect(failed.status).toBe("FAILED");
    expect(failed.nodes[0]).toMatchObject({ state: "FAILED", reason: "retries_exhausted" });
    expect(failed.nodes[0]?.error?.reason).toBe("timeout");
    expect(aborted).toBeInstanceOf(Error);

    const fenced = nextEvent(engine, isEvent("result.fenced"));
    release({ late: true });
    expect((await fenced).data).toMatchObject({ attempt: 1, result: "success" });
    const after = await engine.getRun(run.run_id);
    expect(after.nodes[0]?.state).toBe("FAILED");
    expect(after.nodes[0]?.output).toBeNull();
  });

  it("expires the run at its TTL: FAILED with run_timeout, in-flight attempts cancelled and aborted", async () => {
    let aborted = false;
    const { engine, clock } = await testEngine({
      agents: {
        hang: (t: Task) =>
          new Promise((_resolve, reject) => {
            t.signal.addEventListener("abort", () => {
              aborted = true;
              reject(t.signal.reason);
            });
          }),
      },
    });
    await engine.registerWorkflow({
      id: "ttl",
      timeout: 60,
      nodes: [
        { node_id: "a", agent_type: "hang", timeout: 3600 },
        { node_id: "b", agent_type: "hang", depends_on: ["a"] },
      ],
    });
    const started = nextEvent(engine, isEvent("node.started"));
    const run = await engine.startRun("ttl");
    await started;
    const done = engine.waitForRun(run.run_id);
    await clock.advance(60_000);
    const expired = await done;
    expect(expired.status).toBe("FAILED");
    expect(expired.end_cause).toBe("ttl");
    expect(expired.error?.reason).toBe("run_timeout");
    expect(Object.fromEntries(expired.nodes.map((n) => [n.node_id, n.state]))).toEqual({
      a: "CANCELLED",
      b: "SKIPPED",
    });
    expect(aborted).toBe(true);
  });

  it("fails an attempt whose agent stops heartbeating (lease_expired); a heartbeat renews the lease", async () => {
    let task: Task | null = null;
    const { engine, clock } = await testEngine({
      agents: {
        beat: (t: Task) => {
          task = t;
          return new Promise(() => undefined);
        },
      },
    });
    await engine.registerWorkflow({
      id: "hb",
      nodes: [{ node_id: "a", agent_type: "beat", timeout: 300, heartbeat_timeout: 10, retry_count: 0 }],
    });
    const started = nextEvent(engine, isEvent("node.started"));
    const run = await engine.startRun("hb");
    await started;
    await clock.advance(5_000);
    expect(await (task as unknown as Task).heartbeat()).toBe(true); // lease now ends at 15 s
    await clock.advance(5_000);
    expect((await engine.getRun(run.run_id)).nodes[0]?.state).toBe("RUNNING");
    const done = engine.waitForRun(run.run_id);
    await clock.advance(5_000);
    const failed = await done;
    expect(failed.nodes[0]?.error?.reason).toBe("lease_expired");
    expect(await (task as unknown as Task).heartbeat()).toBe(false);
  });
});
