/**
 * Token rate limits and provider holds (DESIGN §17, issue 40 item 5): `rateLimits: { type: {
 * tokens_per_minute } }` is one window per agent type in the database, shared by every engine
 * and the workers they serve. An attempt starts when the window holds its expected tokens (its
 * max_tokens, else what the type's last attempt used; with neither, the whole window) and is
 * charged what it reported. A provider's 429 with Retry-After holds the type on every engine.
 *
 * Time is the manual clock's: engines wake by their timers as it advances (no sweep: its interval
 * is an hour). On PostgreSQL two engines share the database; on SQLite (one engine a file) the
 * database outlives its engine instead.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { prometheusMetrics, prometheusText } from "../../src/http/metrics.js";
import type { Engine, EngineOptions, ManualClock, RateLimitState, Task } from "../../src/index.js";
import { within } from "../fixtures/child.js";
import { COMPLETIONS_PATH, type OpenAIServer, startOpenAIServer } from "../fixtures/openai-server.js";
import { nextEvent, onPostgres, testEngine } from "../helpers.js";
import { idle } from "./schedule-clock.js";

const ONE_CHAT = { id: "one_chat", nodes: [{ node_id: "ask", agent_type: "chat" }] };
const NO_SWEEP = { sweepIntervalMs: 3_600_000 };

/** Engines on one database with one clock: two on PostgreSQL, the one on SQLite. */
async function enginesOn(options: EngineOptions): Promise<{ engines: Engine[]; clock: ManualClock; database: string }> {
  const first = await testEngine({ ...NO_SWEEP, ...options });
  const engines = [first.engine];
  if (onPostgres) {
    const second = await testEngine({ ...NO_SWEEP, ...options, database: first.database, clock: first.clock });
    engines.push(second.engine);
  }
  return { engines, clock: first.clock, database: first.database };
}

/** Until every engine is idle at once: no flush queued or running, no attempt in flight. */
async function idleAll(engines: Engine[]): Promise<void> {
  for (let settled = false; !settled; ) {
    settled = engines.every((e) => !e.activity().working && e.activity().held.length === 0);
    for (const engine of engines) await idle(engine);
  }
}

/**
 * Moves the clock by `ms`, stopping at every timer on the way until the engines are idle: a flush
 * the clock overtook would arm its wake-up in the past, which a manual clock never fires.
 */
async function advance(clock: ManualClock, engines: Engine[], ms: number): Promise<void> {
  const target = clock.now() + ms;
  await idleAll(engines);
  for (;;) {
    const timer = clock.nextTimerAt();
    if (timer === null || timer > target) break;
    await clock.advance(Math.max(0, timer - clock.now()));
    await idleAll(engines);
  }
  await clock.advance(Math.max(0, target - clock.now()));
  await idleAll(engines);
}

/** Runs that succeeded across engines (each engine publishes what it committed). */
function succeededRuns(engines: Engine[]) {
  const seen = new Set<string>();
  const waiters: { n: number; resolve: () => void }[] = [];
  for (const engine of engines) {
    engine.subscribe((e) => {
      if (e.type !== "run.succeeded") return;
      seen.add(e.run_id);
      for (const w of waiters.filter((w) => seen.size >= w.n)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    });
  }
  return {
    get count() {
      return seen.size;
    },
    /** Resolves once `n` runs have succeeded in all (bounded). */
    reach(n: number): Promise<void> {
      if (seen.size >= n) return Promise.resolve();
      return within(10_000, `${n} runs succeeded`, new Promise<void>((resolve) => waiters.push({ n, resolve })));
    },
  };
}

/** An agent that reports `tokens` of usage (three quarters in, a quarter out) and succeeds. */
class ReportingAgent {
  calls = 0;
  tokens = 400;
  readonly handler = (task: Task) => {
    this.calls += 1;
    task.reportUsage({ tokens_in: (this.tokens * 3) / 4, tokens_out: this.tokens / 4 });
    return { ok: true };
  };
}

/** The state of one agent type. */
async function stateOf(engine: Engine, agentType: string): Promise<RateLimitState | undefined> {
  return (await engine.rateLimitStates()).find((s) => s.agent_type === agentType);
}

describe("tokens_per_minute", () => {
  it("admits only what the window holds across engines, charges what each attempt used, and admits more as it refills", async () => {
    const agent = new ReportingAgent();
    const { engines, clock } = await enginesOn({
      rateLimits: { chat: { tokens_per_minute: 1000 } },
      agents: { chat: agent.handler },
    });
    const [a] = engines as [Engine];
    const t0 = clock.now();
    await a.registerWorkflow(ONE_CHAT);
    const done = succeededRuns(engines);
    for (let i = 0; i < 5; i++) await (engines[i % engines.length] as Engine).startRun(ONE_CHAT.id);

    // Nothing known of chat yet: the first attempt takes the whole window and runs alone. It used
    // 400, so 600 come back and the next (expecting 400) starts; 200 are left, short of a third.
    await done.reach(2);
    expect(agent.calls).toBe(2);
    expect(await stateOf(a, "chat")).toEqual({
      agent_type: "chat",
      held_until: null,
      requests_left: null,
      tokens_per_minute: 1000,
      tokens_left: 200,
      expected_tokens: 400,
      limited_until: t0 + 12_000, // 200 more tokens at 1000 a minute
    });

    await advance(clock, engines, 11_999);
    expect(agent.calls).toBe(2);
    await advance(clock, engines, 1);
    await done.reach(3);
    expect((await stateOf(a, "chat"))?.tokens_left).toBe(0);

    // An attempt that used more than expected is charged it: the window goes below zero, the
    // next expectation is what it used, and the next attempt waits that much longer.
    agent.tokens = 1000;
    await advance(clock, engines, 24_000); // the 400 the next attempt expects
    await done.reach(4);
    expect(await stateOf(a, "chat")).toMatchObject({
      tokens_left: -600,
      expected_tokens: 1000,
      limited_until: t0 + 36_000 + 96_000, // 1600 tokens at 1000 a minute
    });
    await advance(clock, engines, 95_999);
    expect(agent.calls).toBe(4);
    await advance(clock, engines, 1);
    await done.reach(5);
    expect(agent.calls).toBe(5);
  });

  it("keeps the window in the database: an engine started later begins with what was spent", async () => {
    const agent = new ReportingAgent();
    const options = { rateLimits: { chat: { tokens_per_minute: 1000 } }, agents: { chat: agent.handler } };
    const { engine, clock, database } = await testEngine({ ...NO_SWEEP, ...options });
    await engine.registerWorkflow(ONE_CHAT);
    const first = await engine.startRun(ONE_CHAT.id);
    expect((await engine.waitForRun(first.run_id)).status).toBe("SUCCEEDED");
    await engine.close();

    // 1000 taken by the probe, 600 given back: 600 left, and chat is known to take 400.
    const later = await testEngine({ ...NO_SWEEP, ...options, database, clock });
    expect(await stateOf(later.engine, "chat")).toMatchObject({ tokens_left: 600, expected_tokens: 400 });
    const done = succeededRuns([later.engine]);
    for (let i = 0; i < 3; i++) await later.engine.startRun(ONE_CHAT.id);
    await done.reach(1);
    expect(agent.calls).toBe(2);
    expect((await stateOf(later.engine, "chat"))?.tokens_left).toBe(200);
  });

  it("a type may have a request rate and a token rate: both hold", async () => {
    const agent = new ReportingAgent();
    agent.tokens = 100;
    const { engine, clock } = await testEngine({
      ...NO_SWEEP,
      rateLimits: { chat: { per_minute: 60, tokens_per_minute: 1000 } },
      agents: { chat: agent.handler },
    });
    await engine.registerWorkflow(ONE_CHAT);
    const done = succeededRuns([engine]);
    for (let i = 0; i < 3; i++) await engine.startRun(ONE_CHAT.id);
    // One request a second: the tokens would allow more.
    await done.reach(1);
    expect(await stateOf(engine, "chat")).toMatchObject({ requests_left: 0, tokens_left: 900, expected_tokens: 100 });
    await advance(clock, [engine], 1000);
    await done.reach(2);
    expect(agent.calls).toBe(2);
  });
});

describe("tokens_per_minute with the llm node", () => {
  let server: OpenAIServer;
  beforeEach(async () => {
    server = await startOpenAIServer();
  });
  afterEach(async () => {
    await server.close();
  });

  const llmWorkflow = (id: string, payload: Record<string, unknown>) => ({
    id,
    nodes: [{ node_id: "ask", agent_type: "llm", payload: { model: "m", prompt: "hello", ...payload } }],
  });

  it("admits by max_tokens, then by what the last call used", async () => {
    const { engine, clock } = await testEngine({
      ...NO_SWEEP,
      rateLimits: { llm: { tokens_per_minute: 1000 } },
      llm: { providers: { default: { base_url: server.baseUrl } } },
    });
    await engine.registerWorkflow(llmWorkflow("capped", { max_tokens: 300 }));
    await engine.registerWorkflow(llmWorkflow("open", {}));
    const release = deferred();
    const reply = { text: "hi", usage: { prompt_tokens: 50, completion_tokens: 100 }, after: release.promise };
    server.reply(reply, reply, reply, reply);

    // max_tokens 300 each: three fit in 1000, the fourth waits (100 left).
    const capped = await Promise.all([0, 1, 2, 3].map(() => engine.startRun("capped")));
    await server.waitForRequest(3);
    expect((await stateOf(engine, "llm"))?.tokens_left).toBe(100);
    // Which of the four waits is the claims' choice (they were ready in the same millisecond).
    const nodes = await Promise.all(capped.map(async (run) => (await engine.getRun(run.run_id)).nodes[0]));
    const waiting = nodes.filter((n) => n?.state === "PENDING");
    expect(waiting).toHaveLength(1);
    expect(waiting[0]).toMatchObject({ attempt: 0 });
    expect(waiting[0]?.ready_at).not.toBeNull();

    // Each used 150 of its 300: given back, the fourth starts (300 still: max_tokens is the larger).
    release.resolve();
    for (const run of capped) expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
    expect(server.requestsTo(COMPLETIONS_PATH)).toHaveLength(4);
    // 100 + 3 × 150 given back, 300 taken and 150 of them given back.
    expect(await stateOf(engine, "llm")).toMatchObject({ tokens_left: 400, expected_tokens: 150 });

    // Without max_tokens a call expects what the last one used: two of 150 fit in 400, not three.
    const used = { text: "hi", usage: { prompt_tokens: 50, completion_tokens: 100 } };
    server.reply(used, used, used);
    const done = succeededRuns([engine]);
    const open = await Promise.all([0, 1, 2].map(() => engine.startRun("open")));
    await done.reach(2);
    expect(server.requestsTo(COMPLETIONS_PATH)).toHaveLength(6);
    // Each used what it expected: nothing came back, the third waits for 50 more (3 s at 1000 a minute).
    expect(await stateOf(engine, "llm")).toMatchObject({ tokens_left: 100, limited_until: clock.now() + 3000 });
    await advance(clock, [engine], 3000);
    for (const run of open) expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
    expect(server.requestsTo(COMPLETIONS_PATH)).toHaveLength(7);
  });
});

describe("a provider's 429 with Retry-After", () => {
  let server: OpenAIServer;
  /** When each request reached the server, by the engines' clock. */
  let arrivals: number[];
  let clockOf: () => number;
  beforeEach(async () => {
    arrivals = [];
    clockOf = () => 0;
    server = await startOpenAIServer({ onRequest: () => arrivals.push(clockOf()) });
  });
  afterEach(async () => {
    await server.close();
  });

  const ASK = {
    id: "ask",
    nodes: [{ node_id: "ask", agent_type: "llm", payload: { model: "m", prompt: "hello" } }],
  };
  const rateLimited = { status: 429, headers: { "retry-after": "30" }, body: { error: { message: "slow down" } } };

  it("holds llm on every engine until the clock passes it, then the work resumes", async () => {
    server.reply(rateLimited);
    const llm = { providers: { default: { base_url: server.baseUrl } } };
    const { engine: a, clock, database } = await testEngine({ ...NO_SWEEP, llm });
    clockOf = () => clock.now();
    const t0 = clock.now();
    await a.registerWorkflow(ASK);
    const retrying = nextEvent(a, (e) => e.type === "node.retrying");
    const first = await a.startRun(ASK.id);
    const failed = await retrying;
    expect(failed.data.error).toMatchObject({ reason: "rate_limited", retry_after_ms: 30_000 });

    // Another engine (on SQLite, the file's next engine) honours the hold the first one wrote.
    if (!onPostgres) await a.close();
    const b = await testEngine({ ...NO_SWEEP, llm, database, clock });
    const engines = onPostgres ? [a, b.engine] : [b.engine];
    // The run that met the 429 ends where its retry runs: on SQLite that is the later engine.
    const done = succeededRuns(engines);
    const runs = [first];
    for (const engine of engines) runs.push(await engine.startRun(ASK.id), await engine.startRun(ASK.id));
    expect(server.requestsTo(COMPLETIONS_PATH)).toHaveLength(1);
    for (const run of runs.slice(1)) {
      expect((await b.engine.getRun(run.run_id)).nodes[0]).toMatchObject({ state: "PENDING", attempt: 0 });
    }
    expect(await stateOf(b.engine, "llm")).toMatchObject({ held_until: t0 + 30_000, limited_until: t0 + 30_000 });

    await advance(clock, engines, 29_999);
    expect(server.requestsTo(COMPLETIONS_PATH)).toHaveLength(1);
    server.reply(...runs.map(() => ({ text: "fine" })));
    await advance(clock, engines, 1);
    await done.reach(runs.length);
    expect(arrivals.slice(1).every((at) => at >= t0 + 30_000)).toBe(true);
    expect(await stateOf(b.engine, "llm")).toBeUndefined(); // no limit, and no longer held
  });

  it.skipIf(!onPostgres)(
    "a running engine with a rate limit for the type reads the hold with its window at its next claim",
    async () => {
      server.reply(rateLimited);
      const options = {
        ...NO_SWEEP,
        llm: { providers: { default: { base_url: server.baseUrl } } },
        rateLimits: { llm: { tokens_per_minute: 100_000 } },
      };
      const { engine: a, clock, database } = await testEngine(options);
      const { engine: b } = await testEngine({ ...options, database, clock });
      clockOf = () => clock.now();
      const t0 = clock.now();
      await a.registerWorkflow(ASK);
      const retrying = nextEvent(a, (e) => e.type === "node.retrying");
      const first = await a.startRun(ASK.id);
      await retrying;
      const second = await b.startRun(ASK.id);
      expect((await b.getRun(second.run_id)).nodes[0]).toMatchObject({ state: "PENDING", attempt: 0 });
      expect(server.requestsTo(COMPLETIONS_PATH)).toHaveLength(1);

      const done = succeededRuns([a, b]);
      server.reply({ text: "fine" }, { text: "fine" });
      await advance(clock, [a, b], 30_000);
      await done.reach(2);
      for (const run of [first, second]) expect((await b.getRun(run.run_id)).status).toBe("SUCCEEDED");
      expect(arrivals.slice(1).every((at) => at >= t0 + 30_000)).toBe(true);
    },
  );

  it.skipIf(!onPostgres)(
    "a running engine without limits for the type learns of another's hold from its notice",
    async () => {
      server.reply(rateLimited);
      const llm = { providers: { default: { base_url: server.baseUrl } } };
      const { engine: a, clock, database } = await testEngine({ ...NO_SWEEP, llm });
      // B also runs `other`, which A does not: A's notice of an `other` visit follows its notice
      // of the hold on B's one connection, so once B has run it, B has heard of the hold.
      const heard = deferred();
      const { engine: b } = await testEngine({
        ...NO_SWEEP,
        llm,
        database,
        clock,
        agents: {
          other: () => {
            heard.resolve();
            return { ok: true };
          },
        },
      });
      clockOf = () => clock.now();
      const t0 = clock.now();
      await a.registerWorkflow(ASK);
      await a.registerWorkflow({ id: "other", nodes: [{ node_id: "o", agent_type: "other" }] });
      const retrying = nextEvent(a, (e) => e.type === "node.retrying");
      const first = await a.startRun(ASK.id);
      await retrying;
      await a.startRun("other");
      await within(10_000, "B ran the other visit", heard.promise);

      const second = await b.startRun(ASK.id);
      expect((await b.getRun(second.run_id)).nodes[0]).toMatchObject({ state: "PENDING", attempt: 0 });
      expect(server.requestsTo(COMPLETIONS_PATH)).toHaveLength(1);

      const done = succeededRuns([a, b]);
      server.reply({ text: "fine" }, { text: "fine" });
      await advance(clock, [a, b], 30_000);
      await done.reach(2);
      for (const run of [first, second]) expect((await b.getRun(run.run_id)).status).toBe("SUCCEEDED");
      expect(arrivals.slice(1).every((at) => at >= t0 + 30_000)).toBe(true);
    },
  );

  it("the agent node's model turn reports it too: the agent type is held", async () => {
    server.reply(rateLimited);
    const { engine, clock } = await testEngine({
      ...NO_SWEEP,
      llm: { providers: { default: { base_url: server.baseUrl } } },
    });
    clockOf = () => clock.now();
    const t0 = clock.now();
    await engine.registerWorkflow({
      id: "assist",
      nodes: [{ node_id: "assist", agent_type: "agent", payload: { model: "m", input: "hello" } }],
    });
    const retrying = nextEvent(engine, (e) => e.type === "node.retrying");
    const first = await engine.startRun("assist");
    expect((await retrying).data.error).toMatchObject({ reason: "rate_limited", retry_after_ms: 30_000 });
    const second = await engine.startRun("assist");
    expect((await engine.getRun(second.run_id)).nodes[0]).toMatchObject({ state: "PENDING", attempt: 0 });
    expect(await stateOf(engine, "agent")).toMatchObject({ held_until: t0 + 30_000 });

    server.reply({ text: "hi" }, { text: "hi" });
    await advance(clock, [engine], 30_000);
    for (const run of [first, second]) expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
    expect(arrivals.slice(1).every((at) => at >= t0 + 30_000)).toBe(true);
  });
});

describe("external workers", () => {
  it("a worker's claim honours the token window, and its report is charged what it used", async () => {
    const { engine } = await testEngine({ ...NO_SWEEP, rateLimits: { chat: { tokens_per_minute: 1000 } } });
    await engine.registerWorkflow(ONE_CHAT);
    for (let i = 0; i < 4; i++) await engine.startRun(ONE_CHAT.id);
    const claim = () => engine.claimTasks({ agent_types: ["chat"], worker_id: "w", max_tasks: 10 });

    // Nothing known of chat: the first task takes the whole window.
    const [probe, ...none] = await claim();
    expect(none).toEqual([]);
    expect(await claim()).toEqual([]);
    const usage = { tokens_in: 300, tokens_out: 100 };
    await engine.completeTask(probe?.execution_id as string, { worker_id: "w", attempt: 1, output: {}, usage });
    // 600 back; 400 expected each: one more fits.
    const next = await claim();
    expect(next).toHaveLength(1);
    expect((await stateOf(engine, "chat"))?.tokens_left).toBe(200);
    // Used 900 of the 400 it took: charged, and 900 is now what chat is expected to take.
    const big = { tokens_in: 800, tokens_out: 100 };
    await engine.completeTask(next[0]?.execution_id as string, { worker_id: "w", attempt: 1, output: {}, usage: big });
    expect(await stateOf(engine, "chat")).toMatchObject({ tokens_left: -300, expected_tokens: 900 });
    expect(await claim()).toEqual([]);
  });

  it("a worker's 429 holds its type for every claim until the clock passes it", async () => {
    const { engine, clock } = await testEngine(NO_SWEEP);
    const t0 = clock.now();
    await engine.registerWorkflow(ONE_CHAT);
    for (let i = 0; i < 3; i++) await engine.startRun(ONE_CHAT.id);
    const claim = () => engine.claimTasks({ agent_types: ["chat"], worker_id: "w", max_tasks: 1 });
    const [task] = await claim();
    await engine.failTask(task?.execution_id as string, {
      worker_id: "w",
      attempt: 1,
      error: { message: "provider answered 429", retry_after_ms: 20_000, rate_limited: true },
    });
    expect((await engine.getRun(task?.run_id as string)).nodes[0]?.error).toMatchObject({
      reason: "rate_limited",
      retry_after_ms: 20_000,
    });
    expect(await claim()).toEqual([]);
    expect(await stateOf(engine, "chat")).toMatchObject({ held_until: t0 + 20_000 });
    await advance(clock, [engine], 19_999);
    expect(await claim()).toEqual([]);
    await advance(clock, [engine], 1);
    expect(await claim()).toHaveLength(1);
  });

  it("refuses a rate_limited that is not a boolean", async () => {
    const { engine } = await testEngine(NO_SWEEP);
    await engine.registerWorkflow(ONE_CHAT);
    await engine.startRun(ONE_CHAT.id);
    const [task] = await engine.claimTasks({ agent_types: ["chat"], worker_id: "w" });
    await expect(
      engine.failTask(task?.execution_id as string, {
        worker_id: "w",
        attempt: 1,
        error: { message: "429", rate_limited: "yes" as unknown as boolean },
      }),
    ).rejects.toThrow(/error\.rate_limited: must be true \(the service answered 429\) or false, got "yes"/);
  });
});

describe("seen from outside", () => {
  it("the metrics count holds and show each limited type's tokens left and hold", async () => {
    const metrics = prometheusMetrics();
    const { engine } = await testEngine({
      ...NO_SWEEP,
      meterProvider: metrics.meterProvider,
      rateLimits: { chat: { tokens_per_minute: 1000 } },
    });
    await engine.registerWorkflow(ONE_CHAT);
    await engine.startRun(ONE_CHAT.id);
    const [task] = await engine.claimTasks({ agent_types: ["chat"], worker_id: "w" });
    await engine.failTask(task?.execution_id as string, {
      worker_id: "w",
      attempt: 1,
      error: { message: "429", retry_after_ms: 20_000, rate_limited: true },
      usage: { tokens_in: 150, tokens_out: 50 },
    });
    const text = await prometheusText(metrics.reader);
    expect(text).toMatch(/^skein_rate_limit_holds_total\{agent_type="chat"\} 1$/m);
    // The probe took the window and gave back all but the 200 it used.
    expect(text).toMatch(/^skein_rate_limit_tokens_left\{agent_type="chat"\} 800$/m);
    expect(text).toMatch(/^skein_rate_limit_held_seconds\{agent_type="chat"\} 20$/m);
  });
});

describe("the rateLimits option", () => {
  it("refuses a token rate that is not a number of tokens above 0, naming where", async () => {
    const refused = (rateLimits: EngineOptions["rateLimits"]) => testEngine({ rateLimits });
    await expect(refused({ chat: { tokens_per_minute: 0 } })).rejects.toThrow(
      /rateLimits is invalid:\n {2}rateLimits\.chat\.tokens_per_minute: must be a number of tokens above 0, got 0/,
    );
    await expect(refused({ chat: { tokens_per_minute: "9000" as unknown as number } })).rejects.toThrow(
      /rateLimits\.chat\.tokens_per_minute: must be a number of tokens above 0, got "9000"/,
    );
    await expect(refused({ chat: {} })).rejects.toThrow(
      /rateLimits\.chat: give per_second or per_minute \(requests\), tokens_per_minute, or both/,
    );
    await expect(refused({ chat: { tokens_per_minute: 1000, burst: 5 } })).rejects.toThrow(
      /rateLimits\.chat\.burst: counts requests: give per_second or per_minute with it/,
    );
    await expect(refused({ chat: { tokens_per_second: 10 } as never })).rejects.toThrow(
      /rateLimits\.chat\.tokens_per_second: is not a rate limit field; use per_second, per_minute, burst, tokens_per_minute/,
    );
  });
});

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
