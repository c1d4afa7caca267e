/**
 * The `map` node (DESIGN §11.1) on both stores: an item of an agent is a row holding its own
 * attempts (an item of a workflow, or one that undoes, a child run), at most max_concurrency at a
 * time, outputs in item order, tolerated failures, retries, cancellation, redrive and loops.
 * Synchronised by the agents' own calls (promises the test resolves), never by sleeping.
 */
import { describe, expect, it } from "vitest";
import { type Engine, NonRetryableError, type Task, ValidationError } from "../../../src/index.js";
import { nextEvent, testEngine } from "../../helpers.js";

const mapFlow = (payload: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  id: "fanout",
  nodes: [
    { node_id: "plan", agent_type: "planner" },
    { node_id: "answer", agent_type: "map", depends_on: ["plan"], payload, ...extra },
    { node_id: "report", agent_type: "echo", depends_on: ["answer"], payload: { got: "{{ nodes.answer.output }}" } },
  ],
});

/** The planner's list is the run input's `items`. */
const planner = (t: Task) => ({ items: (t.input as { items: unknown[] }).items });
const echo = (t: Task) => t.payload as Record<string, unknown>;
const each = (payload: Record<string, unknown> = { n: "{{ item }}", at: "{{ index }}" }) => ({
  agent_type: "square",
  payload,
});
const items = "{{ nodes.plan.output.items }}";

/** A deferred promise (Node 20 has no Promise.withResolvers). */
function deferred<T = void>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Resolves once `n` calls are waiting. */
function gate() {
  const waiting: { task: Task; release: (v: unknown) => void; fail: (e: unknown) => void }[] = [];
  const watchers: { n: number; done: () => void }[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const agent = (task: Task) => {
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    const d = deferred<unknown>();
    waiting.push({ task, release: d.resolve, fail: d.reject });
    for (const w of watchers.splice(0)) {
      if (waiting.length >= w.n) w.done();
      else watchers.push(w);
    }
    return d.promise.finally(() => {
      inFlight -= 1;
    });
  };
  const waitFor = (n: number) =>
    new Promise<void>((done) => {
      if (waiting.length >= n) done();
      else watchers.push({ n, done });
    });
  return { agent, waiting, waitFor, max: () => maxInFlight };
}

/** A planner and a map of its items, both allowed to run again in a loop. */
const loopedMap = [
  { node_id: "plan", agent_type: "planner", max_visits: 3 },
  {
    node_id: "answer",
    agent_type: "map",
    depends_on: ["plan"],
    max_visits: 3,
    payload: { items: "{{ nodes.plan.output.items }}", each: { agent_type: "square", payload: { v: "{{ item }}" } } },
  },
];

async function runMap(engine: Engine, list: unknown[]) {
  const run = await engine.startRun("fanout", { input: { items: list } });
  return run.run_id;
}

describe("map", () => {
  it("runs each item once with item and index in its templates; outputs in item order whatever order they finish", async () => {
    const g = gate();
    const { engine } = await testEngine({ agents: { planner, echo, square: g.agent } });
    await engine.registerWorkflow(mapFlow({ items, each: each(), max_concurrency: 8 }));
    const list = [3, 1, 4, 1, 5, 9, 2, 6];
    const runId = await runMap(engine, list);
    await g.waitFor(8);
    // Finish in a scrambled order: the output keeps the list's order.
    for (const i of [5, 2, 7, 0, 3, 6, 1, 4]) {
      const w = g.waiting[i];
      const p = w?.task.payload as { n: number; at: number };
      w?.release({ sq: p.n * p.n, at: p.at });
    }
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("SUCCEEDED");
    const answer = done.nodes.find((n) => n.node_id === "answer");
    expect(answer?.output).toEqual(list.map((n, at) => ({ sq: n * n, at })));
    expect(answer?.items).toMatchObject({ total: 8, succeeded: 8, failed: 0, running: 0 });
    expect(done.output).toMatchObject({ report: { got: list.map((n, at) => ({ sq: n * n, at })) } });
    // An item of an agent is a row holding its own attempts, not a run: its task names the map
    // visit and its index, its input is the item.
    const first = g.waiting.find((w) => (w.task.payload as { at: number }).at === 0)?.task;
    expect(first).toMatchObject({
      run_id: runId,
      node_id: "answer",
      visit: 1,
      attempt: 1,
      input: 3,
      item: { index: 0 },
    });
    expect(first?.execution_id).toBe(`${runId}:answer:1~0`);
    const { items: rows } = await engine.listMapItems(runId, "answer");
    expect(rows).toHaveLength(8);
    expect(rows[0]).toMatchObject({
      index: 0,
      state: "SUCCEEDED",
      agent_type: "square",
      attempt: 1,
      child_run_id: null,
    });
    expect(rows[0]?.output).toEqual({ sq: 9, at: 0 });
    expect(await engine.listRuns({ workflow_id: "fanout/answer" })).toHaveLength(0);
  });

  it("never runs more than max_concurrency items at once, and starts the next as one ends", async () => {
    const g = gate();
    const { engine } = await testEngine({ agents: { planner, echo, square: g.agent } });
    await engine.registerWorkflow(mapFlow({ items, each: each(), max_concurrency: 3 }));
    const runId = await runMap(
      engine,
      Array.from({ length: 20 }, (_, i) => i),
    );
    for (let released = 0; released < 20; released++) {
      await g.waitFor(Math.min(released + 3, 20));
      const running = await engine.getRun(runId);
      expect(running.nodes.find((n) => n.node_id === "answer")?.items?.running).toBeLessThanOrEqual(3);
      g.waiting[released]?.release({ i: released });
    }
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("SUCCEEDED");
    expect(g.max()).toBe(3);
    expect(g.waiting).toHaveLength(20);
  });

  it("an empty list succeeds at once with []", async () => {
    const { engine } = await testEngine({ agents: { planner, echo, square: () => ({}) } });
    await engine.registerWorkflow(mapFlow({ items, each: each() }));
    const done = await engine.waitForRun(await runMap(engine, []));
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.find((n) => n.node_id === "answer")?.output).toEqual([]);
  });

  it("tolerated failures leave null slots and succeed; one more fails the map (items_failed) and cancels what runs", async () => {
    const fails = new Set([1, 3]);
    const square = (t: Task) => {
      const n = t.payload as { n: number };
      if (fails.has(n.n)) throw new Error(`item ${n.n} is broken`);
      return { ok: n.n };
    };
    const { engine } = await testEngine({ agents: { planner, echo, square } });
    await engine.registerWorkflow(
      mapFlow({ items, each: each(), tolerated_failures: 2 }, { retry_count: 1, retry_interval: 0 }),
    );
    const ok = await engine.waitForRun(await runMap(engine, [0, 1, 2, 3, 4]));
    expect(ok.status).toBe("SUCCEEDED");
    const answer = ok.nodes.find((n) => n.node_id === "answer");
    expect(answer?.output).toEqual([{ ok: 0 }, null, { ok: 2 }, null, { ok: 4 }]);
    expect(answer?.items).toMatchObject({ total: 5, succeeded: 3, failed: 2 });

    fails.add(4);
    const bad = await engine.waitForRun(await runMap(engine, [0, 1, 2, 3, 4]));
    expect(bad.status).toBe("FAILED");
    const failed = bad.nodes.find((n) => n.node_id === "answer");
    expect(failed).toMatchObject({ state: "FAILED", reason: "items_failed" });
    expect(failed?.error?.message).toContain("3 of 5 items failed, more than the 2 tolerated");
  });

  it("tolerated_failure_percent: past the percentage the map fails and the items still running are cancelled", async () => {
    const g = gate();
    const { engine } = await testEngine({ agents: { planner, echo, square: g.agent } });
    await engine.registerWorkflow(
      mapFlow({ items, each: each(), max_concurrency: 4, tolerated_failure_percent: 25 }, { retry_count: 0 }),
    );
    const runId = await runMap(engine, [0, 1, 2, 3, 4, 5, 6, 7]); // 25% of 8: 2 may fail
    await g.waitFor(4);
    g.waiting[0]?.fail(new Error("no"));
    await g.waitFor(5);
    g.waiting[1]?.fail(new Error("no"));
    await g.waitFor(6);
    g.waiting[2]?.fail(new Error("no"));
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("FAILED");
    expect(done.nodes.find((n) => n.node_id === "answer")).toMatchObject({ state: "FAILED", reason: "items_failed" });
    // The items that were running were cancelled (their signals aborted); the rest never started.
    for (const w of g.waiting.slice(3)) expect(w.task.signal.aborted).toBe(true);
    expect(g.waiting).toHaveLength(6);
    const { items: rows } = await engine.listMapItems(runId, "answer");
    expect(rows.map((r) => r.state)).toEqual([
      "FAILED",
      "FAILED",
      "FAILED",
      "CANCELLED",
      "CANCELLED",
      "CANCELLED",
      "PENDING",
      "PENDING",
    ]);
  });

  it("retries an item with the node's retry settings, in its own run", async () => {
    const calls = new Map<number, number>();
    const square = (t: Task) => {
      const n = (t.payload as { n: number }).n;
      calls.set(n, (calls.get(n) ?? 0) + 1);
      if (n === 2 && (calls.get(n) ?? 0) < 3) throw new Error("flaky");
      return { n, attempt: t.attempt };
    };
    const { engine } = await testEngine({ agents: { planner, echo, square } });
    await engine.registerWorkflow(mapFlow({ items, each: each() }, { retry_count: 2, retry_interval: 0 }));
    const done = await engine.waitForRun(await runMap(engine, [1, 2, 3]));
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.find((n) => n.node_id === "answer")?.output).toEqual([
      { n: 1, attempt: 1 },
      { n: 2, attempt: 3 },
      { n: 3, attempt: 1 },
    ]);
  });

  it("an item's attempt past the node's timeout is aborted and retried; its late result is fenced", async () => {
    const late = deferred<unknown>();
    const started = deferred();
    const retried = deferred();
    const tasks: Task[] = [];
    const square = (t: Task) => {
      tasks.push(t);
      if (t.attempt === 1) {
        started.resolve();
        return late.promise; // holds past the timeout
      }
      retried.resolve();
      return { n: (t.payload as { n: number }).n, attempt: t.attempt };
    };
    const { engine, clock } = await testEngine({ agents: { planner, echo, square } });
    await engine.registerWorkflow(mapFlow({ items, each: each() }, { timeout: 10, retry_count: 1, retry_interval: 0 }));
    const runId = await runMap(engine, [7]);
    await started.promise;
    await clock.advance(10_001);
    await retried.promise;
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.find((n) => n.node_id === "answer")?.output).toEqual([{ n: 7, attempt: 2 }]);
    expect(tasks[0]?.signal.aborted).toBe(true);
    expect(tasks.map((t) => t.execution_id)).toEqual([`${runId}:answer:1~0`, `${runId}:answer:1~0`]);
    const [row] = (await engine.listMapItems(runId, "answer")).items;
    expect(row).toMatchObject({ state: "SUCCEEDED", attempt: 2, failures: 1, error: null });
    const retrying = (await engine.listEvents(runId)).find((e) => e.type === "item.retrying");
    expect(retrying).toMatchObject({ node_id: "answer", visit: 1, data: { index: 0, attempt: 1 } });
    expect(retrying?.data.error).toMatchObject({ reason: "timeout" });
    // The first attempt answers after all: its result is fenced, nothing changes.
    const fenced = nextEvent(engine, (e) => e.type === "result.fenced");
    late.resolve({ n: "late" });
    expect((await fenced).data).toMatchObject({ execution_id: `${runId}:answer:1~0`, attempt: 1 });
    expect((await engine.listMapItems(runId, "answer")).items[0]?.output).toEqual({ n: 7, attempt: 2 });
  });

  it("an item's heartbeat renews its lease past heartbeat_timeout; without one it expires", async () => {
    const started = deferred();
    const beatNow = deferred();
    const beaten = deferred<boolean>();
    const finish = deferred<unknown>();
    const square = async (t: Task) => {
      const index = (t.payload as { at: number }).at;
      if (index === 1) return finish.promise; // sends no heartbeat: its lease expires
      started.resolve();
      await beatNow.promise;
      beaten.resolve(await t.heartbeat());
      await finish.promise;
      return { ok: index };
    };
    const { engine, clock } = await testEngine({ agents: { planner, echo, square } });
    await engine.registerWorkflow(
      mapFlow({ items, each: each(), tolerated_failures: 1 }, { heartbeat_timeout: 30, timeout: 3600, retry_count: 0 }),
    );
    const runId = await runMap(engine, [0, 1]);
    await started.promise;
    await clock.advance(20_000);
    beatNow.resolve();
    expect(await beaten.promise).toBe(true); // item 0's lease: 30 s from now
    // Past the first heartbeat timeout: the item that sent none fails lease_expired, item 0 runs on.
    const expired = nextEvent(engine, (e) => e.type === "item.failed");
    await clock.advance(10_001);
    expect((await expired).data).toMatchObject({ index: 1, reason: "retries_exhausted" });
    const failed = await engine.listMapItems(runId, "answer");
    // Its error's reason says why it failed for good, as a failed item run's does; the message what happened.
    expect(failed.items[1]).toMatchObject({ state: "FAILED", error: { reason: "retries_exhausted" } });
    expect(failed.items[1]?.error?.message).toContain("sent no heartbeat in time");
    finish.resolve(null);
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.find((n) => n.node_id === "answer")?.output).toEqual([{ ok: 0 }, null]);
  });

  it("each: { workflow_id } runs a child workflow per item (its input the item by default)", async () => {
    const { engine } = await testEngine({ agents: { planner, echo, square: (t: Task) => t.payload as object } });
    await engine.registerWorkflow({
      id: "one",
      nodes: [{ node_id: "sq", agent_type: "square", payload: { got: "{{ input }}" } }],
    });
    await engine.registerWorkflow(mapFlow({ items, each: { workflow_id: "one" }, max_concurrency: 2 }));
    const done = await engine.waitForRun(await runMap(engine, ["a", "b", "c"]));
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.find((n) => n.node_id === "answer")?.output).toEqual([
      { sq: { got: "a" } },
      { sq: { got: "b" } },
      { sq: { got: "c" } },
    ]);
  });

  it("cancelling the run mid-map cancels the running items and starts no more", async () => {
    const g = gate();
    const { engine } = await testEngine({ agents: { planner, echo, square: g.agent } });
    await engine.registerWorkflow(mapFlow({ items, each: each(), max_concurrency: 3 }));
    const runId = await runMap(
      engine,
      Array.from({ length: 10 }, (_, i) => i),
    );
    await g.waitFor(3);
    g.waiting[0]?.release({ ok: true });
    await g.waitFor(4);
    await engine.cancelRun(runId, { reason: "enough" });
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("CANCELLED");
    for (const w of g.waiting.slice(1)) {
      expect(w.task.signal.aborted).toBe(true);
      expect((await engine.getRun(w.task.run_id)).status).toBe("CANCELLED");
    }
    const answer = done.nodes.find((n) => n.node_id === "answer");
    expect(answer?.state).toBe("CANCELLED");
    expect(g.waiting).toHaveLength(4);
  });

  it("the run's TTL ends a map mid-way: the running items are cancelled with it", async () => {
    const g = gate();
    const { engine, clock } = await testEngine({ agents: { planner, echo, square: g.agent } });
    await engine.registerWorkflow({ ...mapFlow({ items, each: each(), max_concurrency: 2 }), timeout: 60 });
    const runId = await runMap(engine, [1, 2, 3, 4]);
    await g.waitFor(2);
    await clock.advance(61_000);
    const done = await engine.waitForRun(runId);
    expect(done).toMatchObject({ status: "FAILED", end_cause: "ttl" });
    for (const w of g.waiting) {
      expect(w.task.signal.aborted).toBe(true);
      expect(["CANCELLED", "FAILED"]).toContain((await engine.getRun(w.task.run_id)).status);
    }
    expect(g.waiting).toHaveLength(2);
  });

  it("a cancel that compensates waits for the running items to end, then undoes the map", async () => {
    const g = gate();
    const undone: unknown[] = [];
    const undo = (t: Task) => {
      undone.push(t.payload);
      return {};
    };
    const { engine } = await testEngine({ agents: { planner, echo, square: g.agent, undo } });
    await engine.registerWorkflow(
      mapFlow({ items, each: each(), max_concurrency: 2 }, { compensation: { agent_type: "undo", payload: { x: 1 } } }),
    );
    const runId = await runMap(engine, [1, 2, 3]);
    await g.waitFor(2);
    await engine.cancelRun(runId, { compensate: true });
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("CANCELLED");
    expect(undone).toEqual([{ x: 1 }]);
    for (const w of g.waiting) expect((await engine.getRun(w.task.run_id)).status).toBe("CANCELLED");
  });

  it("a redrive re-runs only the items that did not succeed", async () => {
    const broken = new Set([1, 4]);
    const calls: number[] = [];
    const square = (t: Task) => {
      const n = (t.payload as { n: number }).n;
      calls.push(n);
      if (broken.has(n)) throw new Error(`item ${n} is broken`);
      return { n };
    };
    const { engine } = await testEngine({ agents: { planner, echo, square } });
    // One at a time, one failure tolerated: 0 ok, 1 fails, 2 and 3 ok, 4 fails the map, 5 never runs.
    await engine.registerWorkflow(
      mapFlow({ items, each: each(), max_concurrency: 1, tolerated_failures: 1 }, { retry_count: 0 }),
    );
    const runId = await runMap(engine, [0, 1, 2, 3, 4, 5]);
    const failed = await engine.waitForRun(runId);
    expect(failed.status).toBe("FAILED");
    expect(calls).toEqual([0, 1, 2, 3, 4]);
    calls.length = 0;
    broken.clear();
    await engine.retryRun(runId);
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("SUCCEEDED");
    const answer = done.nodes.find((n) => n.node_id === "answer");
    expect(answer).toMatchObject({ visit: 2, items: { total: 6, succeeded: 6 } });
    expect(answer?.output).toEqual([0, 1, 2, 3, 4, 5].map((n) => ({ n })));
    expect(calls).toEqual([1, 4, 5]); // the items that succeeded were carried over, not run again
  });

  it("a map inside a loop gets fresh items each round", async () => {
    const seen: string[] = [];
    let round = 0;
    const { engine } = await testEngine({
      agents: {
        planner: () => {
          round += 1;
          return { items: [`r${round}a`, `r${round}b`] };
        },
        square: (t: Task) => {
          seen.push((t.payload as { v: string }).v);
          return { got: (t.payload as { v: string }).v };
        },
        check: (t: Task) => {
          const again = round < 2;
          return again ? t.route(["plan"], { round }) : t.route("$end", { round });
        },
      },
    });
    await engine.registerWorkflow({
      id: "loop",
      nodes: [
        ...loopedMap,
        {
          node_id: "check",
          agent_type: "check",
          depends_on: ["answer"],
          max_visits: 3,
          next_on_success: "plan",
        },
      ],
    });
    const run = await engine.startRun("loop", { input: {} });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    // Each round's two items run at once, in either order; the second round's after the first's.
    expect(seen.slice(0, 2).sort()).toEqual(["r1a", "r1b"]);
    expect(seen.slice(2).sort()).toEqual(["r2a", "r2b"]);
    expect(done.nodes.find((n) => n.node_id === "answer")).toMatchObject({
      visit: 2,
      output: [{ got: "r2a" }, { got: "r2b" }],
    });
  });

  it("a failed run compensates a map node that declares compensation, once, with the outputs as self.output", async () => {
    const undone: unknown[] = [];
    const { engine } = await testEngine({
      agents: {
        planner,
        square: (t: Task) => ({ n: (t.payload as { n: number }).n }),
        echo: () => {
          throw new NonRetryableError("the report is refused");
        },
        undo: (t: Task) => {
          undone.push(t.payload);
          return {};
        },
      },
    });
    await engine.registerWorkflow(
      mapFlow(
        { items, each: each() },
        { compensation: { agent_type: "undo", payload: { outputs: "{{ self.output }}" } } },
      ),
    );
    const done = await engine.waitForRun(await runMap(engine, [1, 2]));
    expect(done.status).toBe("FAILED");
    expect(undone).toEqual([{ outputs: [{ n: 1 }, { n: 2 }] }]);
  });

  it("a failed run undoes the items that succeeded, newest first, one at a time, each in its own run", async () => {
    const order: number[] = [];
    let undoing = 0;
    let most = 0;
    const { engine } = await testEngine({
      agents: {
        planner,
        square: (t: Task) => ({ n: (t.payload as { n: number }).n }),
        echo: () => {
          throw new NonRetryableError("the report is refused");
        },
        unsquare: async (t: Task) => {
          undoing += 1;
          most = Math.max(most, undoing);
          order.push((t.payload as { n: number }).n);
          await Promise.resolve();
          undoing -= 1;
          return {};
        },
      },
    });
    await engine.registerWorkflow(
      mapFlow({
        items,
        max_concurrency: 1, // items end in index order, so newest first is the reverse
        each: { ...each(), compensation: { agent_type: "unsquare", payload: { n: "{{ self.output.n }}" } } },
      }),
    );
    const runId = await runMap(engine, [1, 2, 3]);
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("FAILED");
    expect(order).toEqual([3, 2, 1]);
    expect(most).toBe(1);
    expect(done.compensations).toEqual([expect.objectContaining({ node_id: "answer", state: "SUCCEEDED" })]);
    const page = await engine.listMapItems(runId, "answer");
    expect(page.items.map((i) => i.state)).toEqual(["CANCELLED", "CANCELLED", "CANCELLED"]);
    for (const i of page.items) expect((await engine.getRun(i.child_run_id ?? "")).status).toBe("CANCELLED");
  });

  it("a map that fails (items_failed) undoes the items that had succeeded", async () => {
    const undone: number[] = [];
    const { engine } = await testEngine({
      agents: {
        planner,
        echo,
        square: (t: Task) => {
          const n = (t.payload as { n: number }).n;
          if (n === 3) throw new NonRetryableError("three is broken");
          return { n };
        },
        unsquare: (t: Task) => {
          undone.push((t.payload as { n: number }).n);
          return {};
        },
      },
    });
    await engine.registerWorkflow(
      mapFlow({
        items,
        max_concurrency: 1,
        each: { ...each(), compensation: { agent_type: "unsquare", payload: { n: "{{ self.output.n }}" } } },
      }),
    );
    const done = await engine.waitForRun(await runMap(engine, [1, 2, 3, 4]));
    expect(done.status).toBe("FAILED");
    expect(done.nodes.find((n) => n.node_id === "answer")?.reason).toBe("items_failed");
    // The failed item undid its own attempt as it failed (DESIGN §6: a failing visit is undone,
    // it may have left partial effects: self.output is null); then the map undid 2, then 1.
    expect(undone).toEqual([null, 2, 1]);
  });

  it("a loop that resets the map's region mid-map cancels its running items; the next round maps afresh", async () => {
    const g = gate();
    let round = 0;
    const { engine } = await testEngine({
      agents: {
        planner: () => {
          round += 1;
          return { items: [`r${round}a`, `r${round}b`] };
        },
        square: g.agent,
        // Round 1: once both items run, loop back; round 2: let the map finish.
        watcher: async () => {
          if (round === 1) await g.waitFor(2);
          return { again: round === 1 };
        },
      },
    });
    await engine.registerWorkflow({
      id: "reset",
      nodes: [
        ...loopedMap,
        {
          node_id: "watcher",
          agent_type: "watcher",
          depends_on: ["plan"],
          max_visits: 3,
          next_on_success: [{ when: "output.again = true", to: "plan" }],
        },
      ],
    });
    const run = await engine.startRun("reset", { input: {} });
    await g.waitFor(4); // round 2's items are running too
    const [first, second] = [g.waiting.slice(0, 2), g.waiting.slice(2)];
    for (const w of first) expect(w.task.signal.aborted).toBe(true);
    const { items: cancelled } = await engine.listMapItems(run.run_id, "answer", { visit: 1 });
    expect(cancelled.map((r) => r.state)).toEqual(["CANCELLED", "CANCELLED"]);
    for (const w of second) w.release({ got: (w.task.payload as { v: string }).v });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.find((n) => n.node_id === "answer")).toMatchObject({
      visit: 2,
      output: [{ got: "r2a" }, { got: "r2b" }],
    });
  });

  it("refuses a list that is not an array, or longer than max_items, with template_error", async () => {
    const { engine } = await testEngine({ agents: { planner, echo, square: () => ({}) } });
    await engine.registerWorkflow(mapFlow({ items, each: each(), max_items: 3 }));
    const long = await engine.waitForRun(await runMap(engine, [1, 2, 3, 4]));
    expect(long.nodes.find((n) => n.node_id === "answer")).toMatchObject({ state: "FAILED", reason: "template_error" });
    expect(long.nodes.find((n) => n.node_id === "answer")?.error?.message).toContain("more than max_items (3)");
    const notList = await engine.startRun("fanout", { input: { items: { a: 1 } } });
    const done = await engine.waitForRun(notList.run_id);
    expect(done.nodes.find((n) => n.node_id === "answer")?.error?.message).toContain("must be a JSON array");
  });

  it("fails the visit when the assembled output is over the size limit, saying what to do", async () => {
    const { engine } = await testEngine({
      maxPayloadBytes: 4096,
      agents: { planner, echo, square: () => ({ text: "x".repeat(1000) }) },
    });
    await engine.registerWorkflow(mapFlow({ items, each: each() }));
    const done = await engine.waitForRun(await runMap(engine, [1, 2, 3, 4, 5, 6]));
    const answer = done.nodes.find((n) => n.node_id === "answer");
    expect(answer).toMatchObject({ state: "FAILED", reason: "output_too_large" });
    expect(answer?.error?.message).toContain("return less from each item");
  });

  it("validates its payload and refuses when/decide on it", async () => {
    const { engine } = await testEngine({ agents: { planner, echo, square: () => ({}) } });
    const refused = async (payload: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
      const e = await engine.registerWorkflow(mapFlow(payload, extra)).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ValidationError);
      return (e as ValidationError).problems.map((p) => `${p.path}: ${p.message}`).join("\n");
    };
    expect(await refused({ each: each() })).toContain("nodes[1].payload.items: is required");
    expect(await refused({ items })).toContain("nodes[1].payload.each: is required");
    expect(await refused({ items, each: { agent_type: "a", workflow_id: "b" } })).toContain(
      "has both agent_type and workflow_id",
    );
    expect(await refused({ items, each: each(), max_concurrency: 0 })).toContain(
      "max_concurrency: must be an integer from 1",
    );
    expect(await refused({ items, each: each() }, { next_on_success: [{ when: "true", to: "report" }] })).toContain(
      'cannot branch with "when"',
    );
    expect(
      await refused(
        { items, each: { ...each(), compensation: { agent_type: "undo" } } },
        { compensation: { agent_type: "undo" } },
      ),
    ).toContain("cannot declare its own: undo per item, or once for the map, not both");
    await expect(engine.startRun("fanout/answer", { version: 1 })).rejects.toThrow(/item workflow of a map node/);
  });

  it("runs 10,000 items", async () => {
    const { engine } = await testEngine({
      agents: { planner, echo, square: (t: Task) => (t.payload as { n: number }).n },
    });
    await engine.registerWorkflow(mapFlow({ items, each: each({ n: "{{ item }}" }), max_concurrency: 200 }));
    const list = Array.from({ length: 10_000 }, (_, i) => i);
    const done = await engine.waitForRun(await runMap(engine, list));
    expect(done.status).toBe("SUCCEEDED");
    const out = done.nodes.find((n) => n.node_id === "answer")?.output as number[];
    expect(out).toHaveLength(10_000);
    expect(out.every((n, i) => n === i)).toBe(true);
  }, 180_000);
});
