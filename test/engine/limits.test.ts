/**
 * Concurrency limits across the database (issue 17, item 3): `agentConcurrency` counts every
 * attempt of its agent type RUNNING in the database, whoever claimed it (this engine's handlers,
 * the external workers it serves, other engines). A visit over the limit waits ready in the
 * database and is claimed when an attempt ends; nothing polls (the manual clock never moves, so
 * no sweep runs). Agents block on what the test releases; nothing sleeps.
 */
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import type { Engine } from "../../src/index.js";
import { Child, within } from "../fixtures/child.js";
import { nextEvent, onPostgres, testEngine } from "../helpers.js";

type ExternalTask = Awaited<ReturnType<Engine["claimTasks"]>>[number];

const ONE_LLM = { id: "one_llm", nodes: [{ node_id: "ask", agent_type: "chat" }] };
const THREE_LLM = {
  id: "three_llm",
  nodes: ["a", "b", "c"].map((node_id) => ({ node_id, agent_type: "chat" })),
};

/** In-process agents that wait until the test releases them, counting how many run at once. */
class BlockingAgents {
  private readonly waiting: (() => void)[] = [];
  private readonly waiters: { n: number; resolve: () => void }[] = [];
  /** Attempts started so far. */
  count = 0;
  private running = 0;
  peak = 0;

  readonly handler = (): Promise<string> =>
    new Promise<string>((resolve) => {
      this.running += 1;
      this.peak = Math.max(this.peak, this.running);
      this.count += 1;
      this.waiting.push(() => {
        this.running -= 1;
        resolve("ok");
      });
      for (const w of this.waiters.filter((w) => this.count >= w.n)) w.resolve();
    });

  /** Resolves once `n` attempts have started in all (bounded). */
  started(n: number): Promise<void> {
    if (this.count >= n) return Promise.resolve();
    return within(10_000, `${n} attempts started`, new Promise<void>((resolve) => this.waiters.push({ n, resolve })));
  }

  releaseAll(): void {
    for (const release of this.waiting.splice(0)) release();
  }
}

describe("agentConcurrency", () => {
  it("limits external workers' claims, and counts the engine's own attempts with theirs", async () => {
    const agents = new BlockingAgents();
    const { engine } = await testEngine({ agentConcurrency: { chat: 2 }, agents: { chat: agents.handler } });
    await engine.registerWorkflow(THREE_LLM);
    const run = await engine.startRun(THREE_LLM.id);
    await agents.started(2);
    // Two attempts run in the engine: the limit leaves the worker nothing, the third visit waits ready.
    expect(await engine.claimTasks({ agent_types: ["chat"], worker_id: "w", max_tasks: 5 })).toEqual([]);
    const ready = (await engine.getRun(run.run_id)).nodes.filter((n) => n.state === "PENDING" && n.ready_at !== null);
    expect(ready).toHaveLength(1);
    agents.releaseAll();
    // A flush that records a result claims the third visit (the freed slot) for the engine.
    await agents.started(3);
    agents.releaseAll();
    expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
    expect(agents.peak).toBe(2);
  });

  it("gives a worker no more than the limit, and the next visit once an attempt ends", async () => {
    const { engine } = await testEngine({ agentConcurrency: { chat: 2 } });
    await engine.registerWorkflow(THREE_LLM);
    const run = await engine.startRun(THREE_LLM.id);
    const first = await engine.claimTasks({ agent_types: ["chat"], worker_id: "w", max_tasks: 5 });
    expect(first).toHaveLength(2);
    expect(await engine.claimTasks({ agent_types: ["chat"], worker_id: "other", max_tasks: 5 })).toEqual([]);
    const done = first[0] as ExternalTask;
    await engine.completeTask(done.execution_id, { worker_id: "w", attempt: done.attempt, output: "ok" });
    const next = await engine.claimTasks({ agent_types: ["chat"], worker_id: "other", max_tasks: 5 });
    expect(next.map((t) => t.node_id)).toHaveLength(1);
    expect([...first, ...next].map((t) => t.node_id).sort()).toEqual(["a", "b", "c"]);
    const [second, third] = [first[1], next[0]] as [ExternalTask, ExternalTask];
    await engine.completeTask(second.execution_id, { worker_id: "w", attempt: second.attempt, output: "ok" });
    await engine.completeTask(third.execution_id, { worker_id: "other", attempt: third.attempt, output: "ok" });
    expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
  });
});

const PER_TENANT = {
  id: "per_tenant",
  nodes: [{ node_id: "ask", agent_type: "chat", concurrency: { key: "{{ input.tenant }}", limit: 1 } }],
};

describe("a node's concurrency key", () => {
  it("runs one attempt per tenant at a time, and the next of a tenant once its attempt ends", async () => {
    const { engine } = await testEngine();
    await engine.registerWorkflow(PER_TENANT);
    const a1 = await engine.startRun(PER_TENANT.id, { input: { tenant: "a" } });
    const a2 = await engine.startRun(PER_TENANT.id, { input: { tenant: "a" } });
    const b1 = await engine.startRun(PER_TENANT.id, { input: { tenant: "b" } });
    const claim = (worker_id: string, wait_seconds = 0) =>
      engine.claimTasks({ agent_types: ["chat"], worker_id, max_tasks: 5, wait_seconds });
    // Keys resolve with the payloads, after the visits become ready: a waiting claim is woken by
    // the flush that stores them (the clock stands still, so it never times out).
    const first: ExternalTask[] = [];
    while (first.length < 2) first.push(...(await claim("w", 30)));
    // One of tenant a (which one is the order their keys resolved in: the clock stands still) and b's.
    expect(first.map((t) => t.input).sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)))).toEqual([
      { tenant: "a" },
      { tenant: "b" },
    ]);
    expect(first.map((t) => t.run_id)).toContain(b1.run_id);
    expect(await claim("other")).toEqual([]);
    const ofA = first.find((t) => t.run_id !== b1.run_id) as ExternalTask;
    const waitingA = ofA.run_id === a1.run_id ? a2 : a1;
    expect((await engine.getRun(waitingA.run_id)).nodes[0]).toMatchObject({ state: "PENDING", concurrency_key: "a" });
    await engine.completeTask(ofA.execution_id, { worker_id: "w", attempt: ofA.attempt, output: "ok" });
    const next = await claim("other");
    expect(next.map((t) => t.run_id)).toEqual([waitingA.run_id]);
  });

  it("does not hold up one tenant's visit behind another tenant's waiting backlog", async () => {
    const { engine, clock } = await testEngine();
    await engine.registerWorkflow(PER_TENANT);
    // Five of tenant a, older, then b's; each ready a millisecond after the one before.
    const runs: Awaited<ReturnType<Engine["startRun"]>>[] = [];
    for (const tenant of ["a", "a", "a", "a", "a", "b"]) {
      runs.push(await engine.startRun(PER_TENANT.id, { input: { tenant } }));
      await clock.advance(1);
    }
    // Every key resolved (they resolve after the visits are ready) before anything is claimed.
    const resolved = async () =>
      (await Promise.all(runs.map((r) => engine.getRun(r.run_id)))).every((r) => r.nodes[0]?.concurrency_key);
    for (let i = 0; !(await resolved()); i++) {
      if (i > 10_000) throw new Error("the concurrency keys never resolved");
      await new Promise((resolve) => setImmediate(resolve));
    }
    // Two tasks asked: the oldest visits are a's, and one of a is all its key allows. The query
    // for the second task skips a's waiting visits and finds b's behind them.
    const tasks = await engine.claimTasks({ agent_types: ["chat"], worker_id: "w", max_tasks: 2 });
    expect(tasks.map((t) => t.run_id)).toEqual([runs[0]?.run_id, runs[5]?.run_id]);
  });
});

describe("a node's concurrency key in the engine's own claims", () => {
  it("never runs two attempts of one tenant at once", async () => {
    const running = new Map<string, number>();
    const peaks = new Map<string, number>();
    const agents = new BlockingAgents();
    const { engine } = await testEngine({
      agents: {
        chat: async (task) => {
          const tenant = String((task.input as { tenant: string }).tenant);
          running.set(tenant, (running.get(tenant) ?? 0) + 1);
          peaks.set(tenant, Math.max(peaks.get(tenant) ?? 0, running.get(tenant) ?? 0));
          await agents.handler();
          running.set(tenant, (running.get(tenant) ?? 0) - 1);
          return "ok";
        },
      },
    });
    await engine.registerWorkflow(PER_TENANT);
    const runs = await Promise.all(
      ["a", "a", "b"].map((tenant) => engine.startRun(PER_TENANT.id, { input: { tenant } })),
    );
    await agents.started(2);
    expect([...running].sort()).toEqual([
      ["a", 1],
      ["b", 1],
    ]);
    agents.releaseAll();
    await agents.started(3);
    agents.releaseAll();
    const ended = await Promise.all(runs.map((r) => engine.waitForRun(r.run_id)));
    expect(ended.map((r) => r.status)).toEqual(["SUCCEEDED", "SUCCEEDED", "SUCCEEDED"]);
    expect(Object.fromEntries(peaks)).toEqual({ a: 1, b: 1 });
  });
});

describe("rateLimits", () => {
  it("lets through the burst, then as many claims as each advanced second refills", async () => {
    const { engine, clock } = await testEngine({ rateLimits: { chat: { per_second: 2, burst: 2 } } });
    await engine.registerWorkflow(ONE_LLM);
    for (let i = 0; i < 6; i++) await engine.startRun(ONE_LLM.id);
    const claim = () => engine.claimTasks({ agent_types: ["chat"], worker_id: "w", max_tasks: 10 });
    expect(await claim()).toHaveLength(2);
    expect(await claim()).toHaveLength(0);
    await clock.advance(1000);
    expect(await claim()).toHaveLength(2);
    await clock.advance(500);
    expect(await claim()).toHaveLength(1);
    expect(await claim()).toHaveLength(0);
    // Tokens gather up to the burst, no more.
    await clock.advance(10_000);
    expect(await claim()).toHaveLength(1); // the last run's visit: one left of six
  });

  it("wakes the engine when the next token is due, without a sweep", async () => {
    const agents = new BlockingAgents();
    const { engine, clock } = await testEngine({
      rateLimits: { chat: { per_second: 2 } },
      sweepIntervalMs: 3_600_000,
      agents: { chat: agents.handler },
    });
    await engine.registerWorkflow(ONE_LLM);
    const runs = await Promise.all([0, 1, 2].map(() => engine.startRun(ONE_LLM.id)));
    // Each result is recorded before the clock moves: a flush the clock overtook would arm its
    // timer in the past, which a manual clock never fires.
    const release = async () => {
      const recorded = nextEvent(engine, (e) => e.type === "run.succeeded");
      agents.releaseAll();
      await recorded;
    };
    await agents.started(1);
    await release();
    await clock.advance(499);
    expect(agents.count).toBe(1); // the next token is due at 500 ms
    await clock.advance(1);
    await agents.started(2);
    await release();
    await clock.advance(500);
    await agents.started(3);
    agents.releaseAll();
    const ended = await Promise.all(runs.map((r) => engine.waitForRun(r.run_id)));
    expect(ended.map((r) => r.status)).toEqual(["SUCCEEDED", "SUCCEEDED", "SUCCEEDED"]);
  });

  it("refuses a rate that is not one positive per_second or per_minute", async () => {
    await expect(testEngine({ rateLimits: { chat: { per_second: 1, per_minute: 60 } } })).rejects.toThrow(
      /rateLimits is invalid:\n.*rateLimits.chat: give one of per_second or per_minute/,
    );
    await expect(testEngine({ rateLimits: { chat: { per_minute: 0 } } })).rejects.toThrow(/above 0/);
  });
});

const ENGINE_CHILD = fileURLToPath(new URL("../fixtures/limits-engine.ts", import.meta.url));
const children: Child[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
});

/** Resolves at the next line any of the children prints, or the next `nudge()` of the test. */
function nextChange(of: Child[], nudges: Set<() => void>): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      for (const c of of) c.proc.stdout?.off("data", done);
      nudges.delete(done);
      resolve();
    };
    for (const c of of) c.proc.stdout?.on("data", done);
    nudges.add(done);
  });
}

describe.skipIf(!onPostgres)("agentConcurrency across engine processes", () => {
  it("never runs more than the limit across three engines and a worker, and finishes every run", async () => {
    const { engine, database } = await testEngine({ agentConcurrency: { chat: 2 } });
    const url = new URL(database);
    const schema = url.searchParams.get("schema") as string;
    url.searchParams.delete("schema");
    const probe = `"${schema}".limits_probe`;
    const db = new pg.Client({ connectionString: url.toString() });
    await db.connect();
    try {
      await db.query(`CREATE TABLE ${probe} (running int NOT NULL, peak int NOT NULL)`);
      await db.query(`INSERT INTO ${probe} VALUES (0, 0)`);
      const engines: Child[] = [];

      // The test's engine has no chat handler: it serves an in-process external worker, which
      // counts itself in the probe like the children's agents and waits for the test too.
      const nudges = new Set<() => void>();
      const nudge = () => {
        for (const n of [...nudges]) n();
      };
      const workerGates: (() => void)[] = [];
      let workerStarted = 0;
      const workerEnded: string[] = [];
      const stop = new AbortController();
      const worker = (async () => {
        while (!stop.signal.aborted) {
          const tasks = await engine.claimTasks({
            agent_types: ["chat"],
            worker_id: "w",
            wait_seconds: 30,
            lease_seconds: 300,
            signal: stop.signal,
          });
          for (const t of tasks) {
            await db.query(`UPDATE ${probe} SET running = running + 1, peak = greatest(peak, running + 1)`);
            const released = new Promise<void>((resolve) => workerGates.push(resolve));
            workerStarted += 1;
            nudge();
            await released;
            await db.query(`UPDATE ${probe} SET running = running - 1`);
            await engine.completeTask(t.execution_id, { worker_id: "w", attempt: t.attempt, output: { by: "worker" } });
            workerEnded.push(t.run_id); // its only node: the run ended with the report's commit
            nudge();
          }
        }
      })();

      const RUNS = 12;
      await engine.registerWorkflow(ONE_LLM);
      const runs = await Promise.all(Array.from({ length: RUNS }, () => engine.startRun(ONE_LLM.id)));
      // The worker takes the first task before any other engine runs: then two engine processes
      // start (their first flush sweeps) and share what the worker leaves of the limit.
      await within(
        10_000,
        "the worker's first task",
        (async () => {
          while (workerGates.length === 0) await nextChange([], nudges);
        })(),
      );
      engines.push(...[0, 1].map(() => new Child(ENGINE_CHILD, [database, url.toString(), probe])));
      children.push(...engines);
      await Promise.all(engines.map((c) => c.waitFor("ready", (m) => m.type === "ready")));

      const count = (c: Child, type: string, n: (m: Record<string, unknown>) => number) =>
        c.messages.filter((m) => m.type === type).reduce((sum, m) => sum + n(m), 0);
      const started = (c: Child) => count(c, "started", () => 1);
      const released = (c: Child) => count(c, "released", (m) => Number(m.count));
      const releasedInAll = () => engines.reduce((n, c) => n + released(c), 0) + (workerStarted - workerGates.length);
      const waitingInAll = () => engines.reduce((n, c) => n + started(c) - released(c), 0) + workerGates.length;
      const peaks: number[] = [];
      // Rounds: once as many agents wait as the limit allows (or as runs remain), read the
      // probe, then release them all; the slots they free are claimed by whoever hears first.
      while (releasedInAll() < RUNS) {
        const wanted = Math.min(2, RUNS - releasedInAll());
        await within(
          20_000,
          `${wanted} agents waiting (${waitingInAll()} are)`,
          (async () => {
            while (waitingInAll() < wanted) await nextChange(engines, nudges);
          })(),
        );
        const { rows } = await db.query<{ running: number; peak: number }>(`SELECT running, peak FROM ${probe}`);
        peaks.push(rows[0]?.peak ?? -1);
        expect(rows[0]?.running).toBeLessThanOrEqual(2);
        for (const c of engines) {
          if (started(c) - released(c) === 0) continue;
          const before = c.messages.filter((m) => m.type === "released").length;
          c.proc.kill("SIGUSR2");
          await c.waitFor("released", () => c.messages.filter((m) => m.type === "released").length > before);
        }
        for (const release of workerGates.splice(0)) release();
      }
      // Every run ended, by the engine that recorded its last result (the clock stands still:
      // waitForRun would poll on it).
      const endedIn = (c: Child) => c.messages.filter((m) => m.type === "ended");
      await within(
        20_000,
        "every run ended",
        (async () => {
          while (engines.reduce((n, c) => n + endedIn(c).length, workerEnded.length) < RUNS) {
            await nextChange(engines, nudges);
          }
        })(),
      );
      stop.abort();
      await worker;
      const statuses = engines.flatMap((c) => endedIn(c).map((m) => [m.run_id, m.status]));
      statuses.push(...workerEnded.map((id) => [id, "run.succeeded"]));
      expect(new Map(statuses as [string, string][])).toEqual(new Map(runs.map((r) => [r.run_id, "run.succeeded"])));
      // The worker's first task shared the limit with the engines' (which engine or worker takes a
      // freed slot after that is a race: the one that recorded the result usually does).
      expect(workerStarted).toBeGreaterThan(0);
      const { rows } = await db.query<{ running: number; peak: number }>(`SELECT running, peak FROM ${probe}`);
      // Never more than two at once, and two reached: the limit was what held them back.
      expect(rows[0]).toEqual({ running: 0, peak: 2 });
      expect(Math.max(...peaks)).toBe(2);
    } finally {
      await db.end();
    }
  }, 60_000);
});
