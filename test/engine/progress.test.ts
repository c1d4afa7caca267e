/**
 * task.progress (DESIGN §11.6): live only, throttled per attempt on the engine's clock (the first
 * value at once, the latest of a window at its end), dropped once the attempt no longer holds
 * its visit, and never stored.
 */
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { Subscribers } from "../../src/engine/subscribers.js";
import {
  createTestEngine,
  type Engine,
  type LiveEvent,
  type ProgressEvent,
  type RunEvent,
  type Task,
} from "../../src/index.js";
import { capturedLogger, testEngine } from "../helpers.js";

/** A handler that hands its task to the test and returns when told. */
function controlled() {
  const tasks: Task[] = [];
  const finishers: (() => void)[] = [];
  let started: () => void = () => {};
  const handler = (task: Task) =>
    new Promise((resolve) => {
      tasks.push(task);
      finishers.push(() => resolve({ done: true }));
      started();
    });
  /** Resolves once `n` attempts have started. */
  const running = (n: number) =>
    new Promise<void>((resolve) => {
      started = () => {
        if (tasks.length >= n) resolve();
      };
      started();
    });
  return { handler, tasks, finishers, running };
}

const progressOf = (events: LiveEvent[]) =>
  events.filter((e): e is ProgressEvent => e.type === "node.progress").map((e) => e.data.progress);

async function engineWith(handler: (task: Task) => unknown, options: { progressIntervalMs?: number } = {}) {
  const { logger, lines } = capturedLogger();
  const { engine, clock } = await testEngine({ agents: { streamer: handler }, logger, ...options });
  await engine.registerWorkflow({ id: "stream", nodes: [{ node_id: "s", agent_type: "streamer" }] });
  return { engine, clock, lines };
}

function listen(engine: Engine, runId?: string): LiveEvent[] {
  const got: LiveEvent[] = [];
  engine.subscribe((e) => got.push(e), runId === undefined ? {} : { run_id: runId });
  return got;
}

describe("task.progress", () => {
  it("delivers the first value at once, the latest of each window at its end, and nothing after the attempt ends", async () => {
    const c = controlled();
    const { engine, clock, lines } = await engineWith(c.handler);
    const got = listen(engine);
    const run = await engine.startRun("stream");
    await c.running(1);
    const task = c.tasks[0] as Task;

    task.progress("a");
    expect(progressOf(got)).toEqual(["a"]);
    task.progress("b");
    task.progress({ page: 3, of: 10 });
    expect(progressOf(got)).toEqual(["a"]); // within the window: waiting, the latest replacing the earlier
    await clock.advance(50);
    expect(progressOf(got)).toEqual(["a", { page: 3, of: 10 }]);

    task.progress("d"); // a window began with the trailing delivery
    await clock.advance(49);
    expect(progressOf(got)).toEqual(["a", { page: 3, of: 10 }]);
    await clock.advance(1);
    expect(progressOf(got)).toEqual(["a", { page: 3, of: 10 }, "d"]);

    // Not JSON: dropped, one warning for the attempt.
    task.progress({ when: new Date(0) });
    task.progress(() => 1);
    expect(lines.filter((l) => l.msg.includes("progress dropped"))).toHaveLength(1);
    expect(lines[0]?.msg).toContain("progress.when is a Date");

    await clock.advance(50);
    task.progress("e"); // the window had ended: at once
    task.progress("f"); // waits for the window's end, which comes after the attempt's
    expect(progressOf(got)).toEqual(["a", { page: 3, of: 10 }, "d", "e"]);
    c.finishers[0]?.();
    await engine.waitForRun(run.run_id);
    task.progress("g"); // the attempt no longer holds its visit
    await clock.advance(1000);
    expect(progressOf(got)).toEqual(["a", { page: 3, of: 10 }, "d", "e"]);

    const first = got.find((e): e is ProgressEvent => e.type === "node.progress");
    expect(first).toEqual({
      run_id: run.run_id,
      type: "node.progress",
      node_id: "s",
      visit: 1,
      trace_id: run.trace_id,
      at: expect.any(Number),
      data: { attempt: 1, progress: "a" },
    });
    // Never stored: the run's history has no progress, and progress arrived in order before its end.
    const stored = await engine.listEvents(run.run_id);
    expect(stored.some((e) => (e.type as string) === "node.progress")).toBe(false);
    const types = got.map((e) => e.type);
    expect(types.lastIndexOf("node.progress")).toBeLessThan(types.indexOf("node.succeeded"));
  });

  it("copies the value: a change after the call is not seen", async () => {
    const c = controlled();
    const { engine } = await engineWith(c.handler);
    const got = listen(engine);
    await engine.startRun("stream");
    await c.running(1);
    const value = { lines: ["one"] };
    c.tasks[0]?.progress(value);
    value.lines.push("two");
    expect(progressOf(got)).toEqual([{ lines: ["one"] }]);
    c.finishers[0]?.();
  });

  it("with progressIntervalMs 0 delivers every value", async () => {
    const c = controlled();
    const { engine } = await engineWith(c.handler, { progressIntervalMs: 0 });
    const got = listen(engine);
    await engine.startRun("stream");
    await c.running(1);
    for (let i = 0; i < 5; i++) c.tasks[0]?.progress(i);
    expect(progressOf(got)).toEqual([0, 1, 2, 3, 4]);
    c.finishers[0]?.();
  });

  it("drops progress of a cancelled attempt, a pending value too", async () => {
    const c = controlled();
    const { engine, clock } = await engineWith(c.handler);
    const got = listen(engine);
    const run = await engine.startRun("stream");
    await c.running(1);
    const task = c.tasks[0] as Task;
    task.progress("a");
    task.progress("b"); // pending
    await engine.cancelRun(run.run_id);
    await clock.advance(100);
    task.progress("c");
    expect(progressOf(got)).toEqual(["a"]);
    c.finishers[0]?.();
  });

  it("reaches listeners of all runs and of its own run only", async () => {
    const c = controlled();
    const { engine } = await engineWith(c.handler);
    const all = listen(engine);
    const one = await engine.startRun("stream");
    const two = await engine.startRun("stream");
    const mine = listen(engine, one.run_id);
    const theirs = listen(engine, two.run_id);
    await c.running(2);
    for (const task of c.tasks) task.progress(task.run_id);
    expect(progressOf(all).sort()).toEqual([one.run_id, two.run_id].sort());
    expect(progressOf(mine)).toEqual([one.run_id]);
    expect(progressOf(theirs)).toEqual([two.run_id]);
    for (const f of c.finishers) f();
  });
});

describe("progress and replaying subscriptions", () => {
  const progress = (value: string): ProgressEvent => ({
    run_id: "r1",
    type: "node.progress",
    node_id: "n",
    visit: 1,
    trace_id: "t",
    at: 0,
    data: { attempt: 1, progress: value },
  });
  const stored = (seq: number): RunEvent => ({
    run_id: "r1",
    type: "node.ready",
    node_id: "n",
    visit: 1,
    trace_id: "t",
    at: 0,
    data: {},
    seq,
  });

  it("a `from` replay delivers progress only once live, never what came while it read the history", async () => {
    const subscribers = new Subscribers(pino({ level: "silent" }));
    const got: string[] = [];
    await new Promise<void>((resolve) => {
      subscribers.replay(
        (e) => got.push(e.type === "node.progress" ? `p:${String(e.data.progress)}` : `s:${e.seq}`),
        "r1",
        {
          from: 0,
          readEvents: async (_id, { afterSeq }) => {
            subscribers.publishProgress(progress("while reading"));
            subscribers.publish([stored(2)]);
            return [stored(1), stored(2)].filter((e) => e.seq > afterSeq);
          },
          onLive: resolve,
        },
      );
    });
    subscribers.publishProgress(progress("live"));
    subscribers.publish([stored(3)]);
    expect(got).toEqual(["s:1", "s:2", "p:live", "s:3"]);
  });
});

describe("progress under createTestEngine", () => {
  it("reaches subscribers, every value, and runUntilIdle still finishes", async () => {
    const t = await createTestEngine({
      agents: {
        streamer: async (task: Task) => {
          for (let i = 1; i <= 3; i++) task.progress(`step ${i}`);
          return "done";
        },
      },
      workflows: [{ id: "stream", nodes: [{ node_id: "s", agent_type: "streamer" }] }],
    });
    try {
      const got = listen(t.engine);
      const run = await t.engine.startRun("stream");
      expect((await t.result(run.run_id)).status).toBe("SUCCEEDED");
      expect(progressOf(got)).toEqual(["step 1", "step 2", "step 3"]);
    } finally {
      await t.close();
    }
  });

  it("with a throttle a pending value neither holds up runUntilIdle nor arrives after the attempt", async () => {
    const t = await createTestEngine({
      progressIntervalMs: 50,
      agents: {
        streamer: async (task: Task) => {
          for (let i = 1; i <= 3; i++) task.progress(`step ${i}`);
          return "done";
        },
      },
      workflows: [{ id: "stream", nodes: [{ node_id: "s", agent_type: "streamer" }] }],
    });
    try {
      const got = listen(t.engine);
      const run = await t.engine.startRun("stream");
      expect((await t.result(run.run_id)).status).toBe("SUCCEEDED");
      expect(progressOf(got)).toEqual(["step 1"]);
      const next = t.clock.nextTimerAt(); // the pending value's timer was cleared with the attempt
      expect(next === null || next > t.clock.now() + 50).toBe(true);
    } finally {
      await t.close();
    }
  });
});
