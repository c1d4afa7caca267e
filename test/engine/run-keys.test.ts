/**
 * One active run per key and debounce (DESIGN §17), on both stores: a start with a key while a
 * run of its key is active queues (in order, across a restart), is refused, replaces the active
 * run, or answers it; starts within a debounce window make one run with the last input, which
 * begins when the window passes, a restart inside it included. On PostgreSQL, two engines
 * starting the same key at once still let only one run be active.
 */
import { describe, expect, it } from "vitest";
import { ConflictError, type Engine, type Run, ValidationError } from "../../src/index.js";
import { nextEvent, onPostgres, testEngine } from "../helpers.js";

/** An agent whose calls wait until the test lets each one go; records each call's input `n`. */
function gate() {
  const waiting: (() => void)[] = [];
  const seen: unknown[] = [];
  let running = 0;
  let most = 0;
  return {
    handler: async (task: { input: unknown }) => {
      seen.push((task.input as { n?: unknown }).n);
      running++;
      most = Math.max(most, running);
      await new Promise<void>((resolve) => waiting.push(resolve));
      running--;
      return { ok: true };
    },
    seen,
    most: () => most,
    waiting: () => waiting.length,
    release: () => waiting.shift()?.(),
  };
}

const CHAT = { id: "chat", nodes: [{ node_id: "reply", agent_type: "model" }] };

/** Resolves once the gate holds `n` calls (an attempt started and waits), without sleeping. */
async function holding(engine: Engine, g: ReturnType<typeof gate>, n: number): Promise<void> {
  while (g.waiting() < n) await nextEvent(engine, (e) => e.type === "node.started");
}

/** Run a of key "k" holds an attempt in the gate; b, started with cancel_active, replaced it. */
async function replaced() {
  const g = gate();
  const { engine } = await testEngine({ agents: { model: g.handler } });
  await engine.registerWorkflow(CHAT);
  const a = await engine.startRun("chat", { input: { n: 1 }, key: "k" });
  await holding(engine, g, 1);
  const b = await engine.startRun("chat", { input: { n: 2 }, key: "k", on_active: "cancel_active" });
  return { g, engine, a, b };
}

describe("startRun with a key", () => {
  it("queues starts behind the active run and begins them in order as each ends, across a restart", async () => {
    const g = gate();
    const first = await testEngine({ agents: { model: g.handler } });
    await first.engine.registerWorkflow(CHAT);
    const started = nextEvent(first.engine, (e) => e.type === "node.started");
    const a = await first.engine.startRun("chat", { input: { n: 1 }, key: "thread-1" });
    await started;
    expect(a.status).toBe("RUNNING");
    expect(a.key).toBe("thread-1");
    const b = await first.engine.startRun("chat", { input: { n: 2 }, key: "thread-1" });
    const c = await first.engine.startRun("chat", { input: { n: 3 }, key: "thread-1", on_active: "queue" });
    expect([b.status, c.status]).toEqual(["QUEUED", "QUEUED"]);
    expect(b.queued).toMatchObject({ reason: "key", on_active: "queue" });
    // Another key, and the same key of another workflow, are not held back.
    await first.engine.registerWorkflow({ ...CHAT, id: "chat2" });
    const other = await first.engine.startRun("chat", { input: { n: 9 }, key: "thread-2" });
    const otherWorkflow = await first.engine.startRun("chat2", { input: { n: 8 }, key: "thread-1" });
    expect([other.status, otherWorkflow.status]).toEqual(["RUNNING", "RUNNING"]);
    const queuedRead = await first.engine.getRun(b.run_id);
    expect(queuedRead.status).toBe("QUEUED");
    expect(queuedRead.nodes).toEqual([]);
    expect((await first.engine.listRuns({ status: "QUEUED" })).map((r) => r.run_id).sort()).toEqual(
      [b.run_id, c.run_id].sort(),
    );
    // Stopped with a's attempt in flight (not waited for): the next engine takes it over.
    await first.engine.close({ timeoutMs: 0 });

    // A new engine on the same database: the queue is the database's.
    const g2 = gate();
    const second = await testEngine({ agents: { model: g2.handler }, database: first.database, clock: first.clock });
    // The dead engine's attempts of a (and the other runs) come back to this one: let them all finish.
    await second.clock.advance(120_000);
    await holding(second.engine, g2, 3);
    for (let i = 0; i < 3; i++) g2.release();
    expect((await second.engine.waitForRun(a.run_id)).status).toBe("SUCCEEDED");
    await holding(second.engine, g2, 1);
    expect((await second.engine.getRun(b.run_id)).status).toBe("RUNNING");
    expect((await second.engine.getRun(c.run_id)).status).toBe("QUEUED");
    g2.release();
    expect((await second.engine.waitForRun(b.run_id)).status).toBe("SUCCEEDED");
    await holding(second.engine, g2, 1);
    g2.release();
    expect((await second.engine.waitForRun(c.run_id)).status).toBe("SUCCEEDED");
    // The thread's runs ran one at a time, in the order they were started.
    const thread = g2.seen.filter((n) => n === 1 || n === 2 || n === 3);
    expect(thread).toEqual([1, 2, 3]);
    const events = (await second.engine.listEvents(b.run_id)).map((e) => e.type);
    expect(events.slice(0, 2)).toEqual(["run.queued", "run.started"]);
  });

  it("reject refuses a start while a run of its key is active, naming it", async () => {
    const g = gate();
    const { engine } = await testEngine({ agents: { model: g.handler } });
    await engine.registerWorkflow(CHAT);
    const a = await engine.startRun("chat", { input: { n: 1 }, key: "k" });
    const refused = await engine.startRun("chat", { input: { n: 2 }, key: "k", on_active: "reject" }).catch((e) => e);
    expect(refused).toBeInstanceOf(ConflictError);
    expect(refused.message).toContain(a.run_id);
    expect(refused.message).toContain('key "k"');
    expect((await engine.listRuns({ workflow_id: "chat" })).map((r) => r.run_id)).toEqual([a.run_id]);
    await holding(engine, g, 1);
    g.release();
    await engine.waitForRun(a.run_id);
    // With nothing active, the same start begins.
    const b = await engine.startRun("chat", { input: { n: 3 }, key: "k", on_active: "reject" });
    expect(b.status).toBe("RUNNING");
  });

  it("skip answers the active run and starts nothing", async () => {
    const g = gate();
    const { engine } = await testEngine({ agents: { model: g.handler } });
    await engine.registerWorkflow(CHAT);
    const a = await engine.startRun("chat", { input: { n: 1 }, key: "k" });
    const answered = await engine.startRun("chat", { input: { n: 2 }, key: "k", on_active: "skip" });
    expect(answered.run_id).toBe(a.run_id);
    expect(answered.input).toEqual({ n: 1 });
    expect(await engine.listRuns({ workflow_id: "chat" })).toHaveLength(1);
  });

  it("cancel_active cancels the active run and begins the new one now", async () => {
    const { g, engine, a, b } = await replaced();
    expect(b.status).toBe("RUNNING");
    const cancelled = await engine.getRun(a.run_id);
    expect(cancelled.status).toBe("CANCELLED");
    expect(cancelled.error).toMatchObject({ reason: "replaced" });
    expect(cancelled.error?.message).toContain(b.run_id);
    await holding(engine, g, 2);
    g.release();
    g.release();
    expect((await engine.waitForRun(b.run_id)).status).toBe("SUCCEEDED");
    expect(g.seen).toEqual([1, 2]);
  });

  it("a retry of a run of the key is refused while another run of the key is active or queued, and makes it the active one after", async () => {
    const { g, engine, a, b } = await replaced();
    const c = await engine.startRun("chat", { input: { n: 3 }, key: "k" });
    expect(c.status).toBe("QUEUED");
    const whileActive = await engine.retryRun(a.run_id).catch((e) => e);
    expect(whileActive).toBeInstanceOf(ConflictError);
    expect(whileActive.message).toContain(`run ${b.run_id} of key "k" of workflow chat is active`);
    await holding(engine, g, 2);
    g.release(); // a's attempt, cancelled: its result is not taken
    g.release(); // b's: c begins
    expect((await engine.waitForRun(b.run_id)).status).toBe("SUCCEEDED");
    expect((await engine.getRun(a.run_id)).status).toBe("CANCELLED");
    await holding(engine, g, 1);
    expect((await engine.retryRun(a.run_id).catch((e) => e)).message).toContain(`run ${c.run_id} of key "k"`);
    g.release();
    expect((await engine.waitForRun(c.run_id)).status).toBe("SUCCEEDED");
    // The key is free: the retried run is its active run, and a start queues behind it.
    expect((await engine.retryRun(a.run_id)).status).toBe("RUNNING");
    const d = await engine.startRun("chat", { input: { n: 4 }, key: "k" });
    expect(d.status).toBe("QUEUED");
    await holding(engine, g, 1);
    g.release();
    expect((await engine.waitForRun(a.run_id)).status).toBe("SUCCEEDED");
    await holding(engine, g, 1);
    g.release();
    expect((await engine.waitForRun(d.run_id)).status).toBe("SUCCEEDED");
    expect(g.seen).toEqual([1, 2, 3, 1, 4]);
    expect(g.most()).toBe(2); // a's cancelled attempt and b's, never two of the key's active runs
  });

  it("a QUEUED run can be cancelled, and one that waits past its timeout fails", async () => {
    const g = gate();
    const { engine, clock } = await testEngine({ agents: { model: g.handler } });
    await engine.registerWorkflow({ ...CHAT, timeout: 60 });
    const a = await engine.startRun("chat", { input: { n: 1 }, key: "k" });
    const b = await engine.startRun("chat", { input: { n: 2 }, key: "k" });
    const c = await engine.startRun("chat", { input: { n: 3 }, key: "k" });
    const cancelled = await engine.cancelRun(b.run_id);
    expect(cancelled.status).toBe("CANCELLED");
    expect(cancelled.queued).toBeNull();
    await holding(engine, g, 1);
    const ended = nextEvent(engine, (e) => e.run_id === c.run_id && e.type === "run.failed");
    await clock.advance(61_000);
    await ended;
    const timedOut = await engine.getRun(c.run_id);
    expect(timedOut.status).toBe("FAILED");
    expect(timedOut.error?.message).toContain('QUEUED behind the active run of key "k"');
    expect(g.seen).toEqual([1]);
    expect((await engine.getRun(a.run_id)).status).not.toBe("QUEUED");
  });

  it("refuses key options that are not valid, precisely", async () => {
    const { engine } = await testEngine();
    await engine.registerWorkflow(CHAT);
    const problems = async (options: Record<string, unknown>) => {
      const e = await engine.startRun("chat", options).catch((error) => error);
      expect(e).toBeInstanceOf(ValidationError);
      return (e as ValidationError).problems.map((p) => p.path);
    };
    expect(await problems({ on_active: "queue" })).toEqual(["on_active"]);
    expect(await problems({ debounce_seconds: 5 })).toEqual(["debounce_seconds"]);
    expect(await problems({ key: "k", on_active: "later" })).toEqual(["on_active"]);
    expect(await problems({ key: "k", debounce_seconds: 0 })).toEqual(["debounce_seconds"]);
    expect(await problems({ key: "k", debounce_seconds: 5, on_active: "reject" })).toEqual(["on_active"]);
    expect(await problems({ key: "" })).toEqual(["key"]);
    expect(await problems({ key: "x".repeat(257) })).toEqual(["key"]);
    expect(await engine.listRuns()).toEqual([]);
  });
});

describe("startRun with debounce_seconds", () => {
  it("makes one run with the last input once the window passes, across a restart inside it", async () => {
    const seen: unknown[] = [];
    const model = (task: { input: unknown }) => {
      seen.push(task.input);
      return { ok: true };
    };
    const first = await testEngine({ agents: { model } });
    await first.engine.registerWorkflow(CHAT);
    const a = await first.engine.startRun("chat", { input: { n: 1 }, key: "doc-7", debounce_seconds: 10 });
    expect(a.status).toBe("QUEUED");
    expect(a.queued).toMatchObject({ reason: "debounce", until: first.clock.now() + 10_000 });
    await first.clock.advance(5_000);
    const b = await first.engine.startRun("chat", { input: { n: 2 }, key: "doc-7", debounce_seconds: 10 });
    expect(b.run_id).toBe(a.run_id);
    expect(b.input).toEqual({ n: 2 });
    await first.clock.advance(9_000); // 14 s after the first start: the second moved the window to 15 s
    expect((await first.engine.getRun(a.run_id)).status).toBe("QUEUED");
    await first.engine.close();

    const second = await testEngine({
      agents: { model },
      database: first.database,
      clock: first.clock,
    });
    const began = nextEvent(second.engine, (e) => e.run_id === a.run_id && e.type === "run.started");
    await second.clock.advance(1_000);
    await began;
    const done = await second.engine.waitForRun(a.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.input).toEqual({ n: 2 });
    expect(seen).toEqual([{ n: 2 }]);
    expect(await second.engine.listRuns({ workflow_id: "chat" })).toHaveLength(1);
    // After the window, a start of the key makes a new debounced run.
    const c = await second.engine.startRun("chat", { input: { n: 3 }, key: "doc-7", debounce_seconds: 10 });
    expect(c.run_id).not.toBe(a.run_id);
  });

  it("queues behind the key's active run when its window passes, or replaces it with cancel_active", async () => {
    const g = gate();
    const { engine, clock } = await testEngine({ agents: { model: g.handler } });
    await engine.registerWorkflow(CHAT);
    const a = await engine.startRun("chat", { input: { n: 1 }, key: "k" });
    const b = await engine.startRun("chat", { input: { n: 2 }, key: "k", debounce_seconds: 1 });
    await holding(engine, g, 1);
    const queuedEvent = nextEvent(engine, (e) => e.run_id === b.run_id && e.type === "run.queued");
    await clock.advance(1_000);
    await queuedEvent;
    expect((await engine.getRun(b.run_id)).queued).toMatchObject({ reason: "key" });
    const c = await engine.startRun("chat", {
      input: { n: 3 },
      key: "k",
      debounce_seconds: 1,
      on_active: "cancel_active",
    });
    const replaced = nextEvent(engine, (e) => e.run_id === a.run_id && e.type === "run.cancelled");
    await clock.advance(1_000);
    await replaced;
    await holding(engine, g, 2);
    g.release();
    g.release();
    expect((await engine.waitForRun(c.run_id)).status).toBe("SUCCEEDED");
    // b waited behind a; a was replaced by c, so b begins after c.
    await holding(engine, g, 1);
    g.release();
    expect((await engine.waitForRun(b.run_id)).status).toBe("SUCCEEDED");
    expect(g.seen).toEqual([1, 3, 2]);
  });
});

describe.skipIf(!onPostgres)("keys across engines sharing a PostgreSQL database", () => {
  it("two engines starting the same key at once let one run be active, the rest queue in order", async () => {
    const g = gate();
    const a = await testEngine({ agents: { model: g.handler } });
    const b = await testEngine({ agents: { model: g.handler }, database: a.database, clock: a.clock });
    await a.engine.registerWorkflow(CHAT);
    const starts: Promise<Run>[] = [];
    for (let n = 0; n < 10; n++) {
      starts.push((n % 2 === 0 ? a : b).engine.startRun("chat", { input: { n }, key: "shared" }));
    }
    const runs = await Promise.all(starts);
    expect(runs.filter((r) => r.status === "RUNNING")).toHaveLength(1);
    const positions = runs.flatMap((r) => (r.queued ? [r.queued.position] : []));
    expect(new Set(positions).size).toBe(9);
    for (let done = 0; done < 10; done++) {
      await holding(a.engine, g, 1);
      g.release();
    }
    const ended = await Promise.all(runs.map((r) => a.engine.waitForRun(r.run_id)));
    expect(ended.every((r) => r.status === "SUCCEEDED")).toBe(true);
    expect(g.most()).toBe(1);
    // They ran in queue order: the active one first, then by position.
    const order = [...runs].sort((x, y) => (x.queued?.position ?? 0) - (y.queued?.position ?? 0));
    expect(g.seen).toEqual(order.map((r) => (r.input as { n: number }).n));
  });

  it("two engines starting with reject at once: one begins, the other is refused", async () => {
    const g = gate();
    const a = await testEngine({ agents: { model: g.handler } });
    const b = await testEngine({ agents: { model: g.handler }, database: a.database, clock: a.clock });
    await a.engine.registerWorkflow(CHAT);
    const outcomes = await Promise.allSettled([
      a.engine.startRun("chat", { input: { n: 1 }, key: "once", on_active: "reject" }),
      b.engine.startRun("chat", { input: { n: 2 }, key: "once", on_active: "reject" }),
    ]);
    expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(1);
    const refused = outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult;
    expect(refused.reason).toBeInstanceOf(ConflictError);
  });
});
