/**
 * Budgets reserve (DESIGN §13.1): parallel attempts under a budget reserve their expected usage
 * before they start, so a map of 10 at a time overshoots its budget by at most one attempt's
 * overrun (before: every item started at once, 1,000 tokens under a 250-token budget). Runs on
 * both stores (the postgres project runs this file on PostgreSQL); on PostgreSQL two engines on
 * one schema share a run's budget too.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Engine, type RunWithNodes, systemClock, type Task, type WorkflowInput } from "../../src/index.js";
import { type OpenAIServer, startOpenAIServer } from "../fixtures/openai-server.js";
import { onPostgres, testEngine } from "../helpers.js";

const BUDGET = 250;
const PER_CALL = 100;

/** A map of 10 items, all 10 at a time, each item one node of `agent_type` with `payload`. */
const fanout = (agent_type: string, payload?: Record<string, unknown>): WorkflowInput =>
  ({
    id: "fanout",
    budget: { max_tokens: BUDGET },
    nodes: [
      {
        node_id: "each",
        agent_type: "map",
        payload: { items: "{{ input.items }}", each: { agent_type, payload }, max_concurrency: 10 },
      },
    ],
  }) as WorkflowInput;

const items = Array.from({ length: 10 }, (_, i) => i);

describe("budgets reserve", () => {
  let server: OpenAIServer;
  beforeEach(async () => {
    server = await startOpenAIServer();
  });
  afterEach(async () => {
    await server.close();
  });

  /** An llm call of the map's items: PER_CALL tokens. */
  const call = { text: ["fine"], usage: { prompt_tokens: 10, completion_tokens: PER_CALL - 10 } };

  /**
   * The map's end under the budget: failed once it was reached, at most one call past it, every
   * token a call the server answered, every reservation taken out.
   */
  const expectOneCallPast = async (engine: Engine, done: RunWithNodes) => {
    expect(done.nodes[0]).toMatchObject({ state: "FAILED", reason: "items_failed" });
    const tokens = done.usage.tokens_in + done.usage.tokens_out;
    expect(tokens).toBeGreaterThanOrEqual(BUDGET);
    expect(tokens).toBeLessThanOrEqual(BUDGET + PER_CALL);
    expect(server.requestsTo("/v1/chat/completions").length).toBe(tokens / PER_CALL);
    expect((await engine.getRun(done.run_id)).reserved).toBeNull();
  };

  it("an agent reporting usage: the first call runs alone, then only what the budget has room for", async () => {
    let calls = 0;
    let running = 0;
    let most = 0;
    const { engine } = await testEngine({
      agents: {
        writer: async (t: Task) => {
          calls += 1;
          running += 1;
          most = Math.max(most, running);
          await new Promise((resolve) => setImmediate(resolve));
          t.reportUsage({ tokens_in: PER_CALL / 2, tokens_out: PER_CALL / 2 });
          running -= 1;
          return { ok: true };
        },
      },
    });
    await engine.registerWorkflow(fanout("writer"));
    const done = await engine.waitForRun((await engine.startRun("fanout", { input: { items } })).run_id);

    // The items held back for the budget fail budget_exceeded once it is reached, and the map with them.
    expect(done.nodes[0]).toMatchObject({ state: "FAILED", reason: "items_failed" });
    const tokens = done.usage.tokens_in + done.usage.tokens_out;
    expect(tokens).toBeGreaterThanOrEqual(BUDGET);
    expect(tokens).toBeLessThanOrEqual(BUDGET + PER_CALL); // at most one attempt's overrun
    expect(calls).toBe(tokens / PER_CALL);
    expect(most).toBeLessThanOrEqual(2); // the probe alone, then the budget's room (150: 2 calls)
    // Every reservation was taken out as its attempt ended.
    expect((await engine.getRun(done.run_id)).reserved).toBeNull();
  });

  it("an llm node with max_tokens reserves it: a map of 10 at a time spends at most one call past the budget", async () => {
    server.reply(...items.map(() => call));
    const { engine } = await testEngine({
      llm: { providers: { default: { base_url: server.baseUrl, api_key: "sk-test" } } },
    });
    await engine.registerWorkflow(fanout("llm", { model: "m", prompt: "item {{ input }}", max_tokens: PER_CALL - 10 }));
    const done = await engine.waitForRun((await engine.startRun("fanout", { input: { items } })).run_id);

    await expectOneCallPast(engine, done);
  });

  it.skipIf(!onPostgres)(
    "two engines on one schema share a run's budget: together at most one call past it",
    async () => {
      // The first call is held until a second one starts: with the first engine's one slot taken,
      // the second engine starts it, reserving against the same run's budget.
      const released = deferred();
      server.reply({ ...call, after: released.promise }, ...items.slice(1).map(() => call));
      const llm = { providers: { default: { base_url: server.baseUrl, api_key: "sk-test" } } };
      // The system's clock: an engine whose claim skipped the run the other held looks again at
      // its next sweep (a manual clock's never comes, and under load that skip does happen).
      const { engine: a, database } = await testEngine({ llm, maxConcurrency: 1, clock: systemClock });
      const { engine: b } = await testEngine({ database, llm, maxConcurrency: 1, clock: systemClock });
      await a.registerWorkflow(fanout("llm", { model: "m", prompt: "item {{ input }}", max_tokens: PER_CALL - 10 }));
      const started = await a.startRun("fanout", { input: { items } });
      await server.waitForRequest(2);
      released.resolve();
      const done = await a.waitForRun(started.run_id);

      await expectOneCallPast(a, done);
      // Both engines started items' calls: the budget held across them, not only within one.
      const holders = new Set<unknown>();
      for (const child of await a.listRuns({ workflow_id: "fanout/each" })) {
        for (const e of await a.listEvents(child.run_id)) if (e.type === "node.started") holders.add(e.data.holder);
      }
      expect(holders).toEqual(new Set([a.engineId, b.engineId]));
    },
  );

  it("a failed attempt gives its reservation back: the next one starts", async () => {
    let calls = 0;
    const { engine } = await testEngine({
      agents: {
        flaky: (t: Task) => {
          calls += 1;
          t.reportUsage({ tokens_in: 10 });
          if (calls === 1) throw new Error("try again");
          return { ok: true };
        },
      },
    });
    await engine.registerWorkflow({
      id: "flaky",
      budget: { max_tokens: 100 },
      nodes: [{ node_id: "a", agent_type: "flaky", retry_count: 1, retry_interval: 0 }],
    });
    const done = await engine.waitForRun((await engine.startRun("flaky")).run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(calls).toBe(2);
    expect(done.usage.tokens_in).toBe(20);
    expect((await engine.getRun(done.run_id)).reserved).toBeNull();
  });
});

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
