/**
 * task.progress (DESIGN §11.6, §15): kept as the run's `node.progress` events, throttled per
 * attempt on the engine's clock (the first value at once, the latest of a window at its end,
 * text deltas joined), the attempt's last value before its result, nothing once the attempt no
 * longer holds its visit; delivered once committed, and replayed with the run's history.
 */
import { describe, expect, it } from "vitest";
import {
  createTestEngine,
  type Engine,
  type LiveEvent,
  type ProgressEvent,
  RetryableError,
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
  engine.subscribe(
    (e) => {
      got.push(e);
      for (const w of waiters.splice(0)) w();
    },
    runId === undefined ? {} : { run_id: runId },
  );
  return got;
}

const waiters: (() => void)[] = [];

/** Resolves once `events` hold `n` progress events (they are delivered after their commit). */
async function progressCount(events: LiveEvent[], n: number): Promise<void> {
  while (progressOf(events).length < n) await new Promise<void>((resolve) => waiters.push(resolve));
}

describe("task.progress", () => {
  it("keeps the first value at once, the latest of each window at its end, deltas joined, and the last before the result", async () => {
    const c = controlled();
    const { engine, clock, lines } = await engineWith(c.handler);
    const got = listen(engine);
    const run = await engine.startRun("stream");
    await c.running(1);
    const task = c.tasks[0] as Task;

    task.progress("a");
    await progressCount(got, 1);
    task.progress("b");
    task.progress({ page: 3, of: 10 }); // within the window: waiting, the latest replacing the earlier
    await clock.advance(50);
    await progressCount(got, 2);
    expect(progressOf(got)).toEqual(["a", { page: 3, of: 10 }]);

    // Text deltas within a window are joined, none lost; another kind of value sends them first.
    task.progress({ delta: "Hel" });
    task.progress({ delta: "lo" });
    task.progress({ turn: 2, delta: "!" });
    await progressCount(got, 3);
    expect(progressOf(got)[2]).toEqual({ delta: "Hello" });
    await clock.advance(50);
    await progressCount(got, 4);
    expect(progressOf(got)[3]).toEqual({ turn: 2, delta: "!" });

    // Not JSON: dropped, one warning for the attempt.
    task.progress({ when: new Date(0) });
    task.progress(() => 1);
    expect(lines.filter((l) => l.msg.includes("progress dropped"))).toHaveLength(1);
    expect(lines[0]?.msg).toContain("progress.when is a Date");

    await clock.advance(50);
    task.progress("e"); // the window had ended: at once
    task.progress("f"); // waits for the window's end: the attempt's end sends it, before its result
    c.finishers[0]?.();
    await engine.waitForRun(run.run_id);
    task.progress("g"); // the attempt no longer holds its visit
    await clock.advance(1000);
    expect(progressOf(got)).toEqual(["a", { page: 3, of: 10 }, { delta: "Hello" }, { turn: 2, delta: "!" }, "e", "f"]);

    const first = got.find((e): e is ProgressEvent => e.type === "node.progress");
    expect(first).toEqual({
      seq: expect.any(Number),
      run_id: run.run_id,
      type: "node.progress",
      node_id: "s",
      visit: 1,
      trace_id: run.trace_id,
      at: expect.any(Number),
      data: { attempt: 1, progress: "a" },
    });
    // Stored: the run's history holds what was delivered, in order, all before the node's end.
    const stored = await engine.listEvents(run.run_id);
    expect(stored.filter((e) => e.type === "node.progress")).toEqual(got.filter((e) => e.type === "node.progress"));
    const types = stored.map((e) => e.type);
    expect(types.lastIndexOf("node.progress")).toBeLessThan(types.indexOf("node.succeeded"));
    // A subscription from the start replays it.
    const replayed: LiveEvent[] = [];
    await new Promise<void>((resolve) => {
      engine.subscribe(
        (e) => {
          replayed.push(e);
          if (e.type === "run.succeeded") resolve();
        },
        { run_id: run.run_id, from: 0 },
      );
    });
    expect(progressOf(replayed)).toEqual(progressOf(got));
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
    await progressCount(got, 1);
    expect(progressOf(got)).toEqual([{ lines: ["one"] }]);
    c.finishers[0]?.();
  });

  it("with progressIntervalMs 0 keeps every value, in order", async () => {
    const c = controlled();
    const { engine } = await engineWith(c.handler, { progressIntervalMs: 0 });
    const got = listen(engine);
    await engine.startRun("stream");
    await c.running(1);
    for (let i = 0; i < 5; i++) c.tasks[0]?.progress(i);
    await progressCount(got, 5);
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
    await progressCount(all, 2);
    await progressCount(mine, 1);
    await progressCount(theirs, 1);
    expect(progressOf(all).sort()).toEqual([one.run_id, two.run_id].sort());
    expect(progressOf(mine)).toEqual([one.run_id]);
    expect(progressOf(theirs)).toEqual([two.run_id]);
    for (const f of c.finishers) f();
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

  it("with a throttle a pending value neither holds up runUntilIdle nor comes after the attempt's end", async () => {
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
      // The first at once; the latest of the window when the attempt ended, before its result.
      expect(progressOf(got)).toEqual(["step 1", "step 3"]);
      const types = got.filter((e) => e.run_id === run.run_id).map((e) => e.type);
      expect(types.lastIndexOf("node.progress")).toBeLessThan(types.indexOf("node.succeeded"));
      const next = t.clock.nextTimerAt(); // the pending value's timer was cleared with the attempt
      expect(next === null || next > t.clock.now() + 50).toBe(true);
    } finally {
      await t.close();
    }
  });
});

describe("kept progress, read per attempt (engine.listProgress)", () => {
  it("joins each attempt's deltas and marks a retried attempt's stream superseded", async () => {
    const t = await createTestEngine({
      agents: {
        streamer: async (task: Task) => {
          task.progress({ delta: `try ${task.attempt}: ` });
          task.progress({ page: task.attempt });
          task.progress({ delta: "half" });
          if (task.attempt === 1) throw new RetryableError("the provider broke off");
          task.progress({ delta: " and the rest" });
          return "done";
        },
      },
      workflows: [
        { id: "stream", nodes: [{ node_id: "s", agent_type: "streamer", retry_count: 1, retry_interval: 5 }] },
      ],
    });
    try {
      const run = await t.engine.startRun("stream");
      expect((await t.result(run.run_id)).status).toBe("SUCCEEDED");
      const streams = await t.engine.listProgress(run.run_id);
      const events = await t.engine.listEvents(run.run_id);
      const lastOf = (attempt: number) =>
        Math.max(...events.filter((e) => e.type === "node.progress" && e.data.attempt === attempt).map((e) => e.seq));
      expect(streams).toEqual([
        {
          node_id: "s",
          visit: 1,
          attempt: 1,
          text: "try 1: half",
          last: { page: 1 },
          events: 3,
          last_seq: lastOf(1),
          superseded: true,
        },
        {
          node_id: "s",
          visit: 1,
          attempt: 2,
          text: "try 2: half and the rest",
          last: { page: 2 },
          events: 4,
          last_seq: lastOf(2),
          superseded: false,
        },
      ]);
      await expect(t.engine.listProgress("no-such-run")).rejects.toMatchObject({ code: "not_found" });
    } finally {
      await t.close();
    }
  });
});
