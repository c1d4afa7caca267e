/**
 * Usage and budgets (DESIGN §12): what attempts report adds up in the run and every run above
 * it; a budget reached stops the next attempt (budget_exceeded, routable by next_on_failure).
 * Runs on both stores (the postgres project runs this file on PostgreSQL).
 */
import { describe, expect, it } from "vitest";
import { type RunEvent, systemClock, type Task, ValidationError, type WorkflowInput } from "../../src/index.js";
import { nextEvent, onPostgres, testEngine } from "../helpers.js";

const isEvent = (type: RunEvent["type"]) => (e: RunEvent) => e.type === type;

/** Reports `tokens` (split in and out) then fails: retried while retry_count allows. */
const spendThenFail = (tokens: number) => (t: Task) => {
  t.reportUsage({ tokens_in: tokens / 2, tokens_out: tokens / 2 });
  throw new Error("not good enough yet");
};

describe("usage", () => {
  it("sums every call of every attempt; a bad value is ignored, never thrown into the handler", async () => {
    let attempts = 0;
    const { engine } = await testEngine({
      agents: {
        llm_ish: (t: Task) => {
          attempts += 1;
          t.reportUsage({ tokens_in: 100, tokens_out: 20 });
          t.reportUsage({ tokens_in: 50, cost: 0.25 });
          t.reportUsage({ tokens_in: -1 }); // ignored, logged
          t.reportUsage({ tokens: 5 } as never); // not a field: ignored
          t.reportUsage(null as never);
          if (attempts === 1) throw new Error("rate limited");
          return { ok: true };
        },
      },
    });
    await engine.registerWorkflow({
      id: "sums",
      nodes: [{ node_id: "a", agent_type: "llm_ish", retry_count: 1, retry_interval: 0 }],
    });
    const run = await engine.startRun("sums");
    expect(run.usage).toEqual({ tokens_in: 0, tokens_out: 0, cost: 0 });
    expect(run.budget).toBeNull();
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(attempts).toBe(2);
    expect(done.usage).toEqual({ tokens_in: 300, tokens_out: 40, cost: 0.5 });
    expect((await engine.listRuns({ workflow_id: "sums" }))[0]?.usage).toEqual(done.usage);
  });

  it("counts what a compensation reports, and a budget never stops a compensation", async () => {
    const { engine } = await testEngine({
      agents: {
        ship: (t: Task) => {
          t.reportUsage({ tokens_in: 10 });
          return { shipped: true };
        },
        fail: (t: Task) => {
          t.reportUsage({ tokens_in: 10 });
          throw new Error("the customer cancelled");
        },
        undo: (t: Task) => {
          t.reportUsage({ tokens_out: 5, cost: 0.1 });
          return { undone: true };
        },
      },
    });
    await engine.registerWorkflow({
      id: "undone",
      budget: { max_tokens: 20 },
      nodes: [
        { node_id: "ship", agent_type: "ship", compensation: { agent_type: "undo" }, next_on_success: "bill" },
        { node_id: "bill", agent_type: "fail", retry_count: 0 },
      ],
    });
    const done = await engine.waitForRun((await engine.startRun("undone")).run_id);
    expect(done.status).toBe("FAILED");
    expect(done.compensations[0]).toMatchObject({ state: "SUCCEEDED" });
    // 20 tokens reached the budget before the compensation started: it ran anyway, and counted.
    expect(done.usage).toEqual({ tokens_in: 20, tokens_out: 5, cost: 0.1 });
  });

  it("a report from an attempt that no longer holds its visit is dropped", async () => {
    let late!: (t: Task) => void;
    const { engine, clock } = await testEngine({
      agents: {
        slow: (t: Task) =>
          new Promise((resolve) => {
            late = () => {
              t.reportUsage({ tokens_in: 1000 });
              resolve({ late: true });
            };
          }),
      },
    });
    await engine.registerWorkflow({
      id: "fenced",
      nodes: [{ node_id: "a", agent_type: "slow", timeout: 5, retry_count: 0 }],
    });
    const started = nextEvent(engine, isEvent("node.started"));
    const run = await engine.startRun("fenced");
    await started;
    const done = engine.waitForRun(run.run_id);
    await clock.advance(5_000);
    expect((await done).status).toBe("FAILED");
    // The usage is queued before the result, so once the result is fenced the usage was judged too.
    const fenced = nextEvent(engine, isEvent("result.fenced"));
    late(undefined as never);
    await fenced;
    expect((await engine.getRun(run.run_id)).usage).toEqual({ tokens_in: 0, tokens_out: 0, cost: 0 });
  });

  it("a worker's report carries usage; a bad usage is a precise ValidationError", async () => {
    const { engine } = await testEngine();
    await engine.registerWorkflow({
      id: "remote",
      nodes: [{ node_id: "a", agent_type: "writer", retry_count: 1, retry_interval: 0 }],
    });
    const run = await engine.startRun("remote");
    const [first] = await engine.claimTasks({ agent_types: ["writer"], worker_id: "w1" });
    expect(first).toBeDefined();
    expect(first).not.toHaveProperty("usage_runs");
    const id = first?.execution_id ?? "";
    await expect(
      engine.failTask(id, { worker_id: "w1", attempt: 1, error: { message: "x" }, usage: { cost: -2 } }),
    ).rejects.toThrow(ValidationError);
    await engine.failTask(id, { worker_id: "w1", attempt: 1, error: { message: "flaky" }, usage: { tokens_in: 7 } });
    const [second] = await engine.claimTasks({ agent_types: ["writer"], worker_id: "w1" });
    await engine.completeTask(id, {
      worker_id: "w1",
      attempt: second?.attempt ?? 2,
      output: "ok",
      usage: { tokens_out: 3, cost: 1 },
    });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.usage).toEqual({ tokens_in: 7, tokens_out: 3, cost: 1 });
  });
});

describe("budgets", () => {
  const budgeted: WorkflowInput = {
    id: "budgeted",
    budget: { max_tokens: 1000 },
    nodes: [
      { node_id: "spend", agent_type: "spender", retry_count: 5, retry_interval: 0, next_on_failure: "report" },
      { node_id: "report", agent_type: "reporter", next_on_success: "after" },
      { node_id: "after", agent_type: "reporter" },
    ],
  };

  it("stops the next attempt once the run reaches its budget, and takes the failure branch", async () => {
    let spent = 0;
    const reported: Task[] = [];
    const { engine } = await testEngine({
      agents: {
        spender: (t: Task) => {
          spent += 1;
          return spendThenFail(600)(t);
        },
        reporter: (t: Task) => {
          reported.push(t);
          return { trigger: t.trigger?.error ?? null };
        },
      },
    });
    await engine.registerWorkflow(budgeted);
    const run = await engine.startRun("budgeted");
    expect(run.budget).toEqual({ max_tokens: 1000 });
    const done = await engine.waitForRun(run.run_id);
    // 600 after attempt 1 (within), 1200 after attempt 2: attempt 3 never starts.
    expect(spent).toBe(2);
    expect(done.usage).toEqual({ tokens_in: 600, tokens_out: 600, cost: 0 });
    const spend = done.nodes.find((n) => n.node_id === "spend");
    expect(spend).toMatchObject({ state: "FAILED", reason: "budget_exceeded", attempt: 2, handled: true });
    expect(spend?.error?.message).toContain(`run ${run.run_id} reached its budget`);
    expect(spend?.error?.message).toContain("1200 tokens used");
    expect(spend?.error?.message).toContain("max_tokens 1000");
    // The node next_on_failure routes to runs (to report); the node after it is stopped again.
    expect(reported.map((t) => t.node_id)).toEqual(["report"]);
    expect(done.nodes.find((n) => n.node_id === "after")).toMatchObject({ state: "FAILED", reason: "budget_exceeded" });
    expect(done.status).toBe("FAILED");
    const failed = (await engine.listEvents(run.run_id)).filter((e) => e.type === "node.failed");
    expect(failed[0]?.data).toMatchObject({ reason: "budget_exceeded", attempt: 2 });
  });

  it("startRun's budget replaces the workflow's", async () => {
    let spent = 0;
    const { engine } = await testEngine({
      agents: {
        spender: (t: Task) => {
          spent += 1;
          return spendThenFail(600)(t);
        },
        reporter: () => ({}),
      },
    });
    await engine.registerWorkflow(budgeted);
    const run = await engine.startRun("budgeted", { budget: { max_cost: 5, max_tokens: 2000 } });
    expect(run.budget).toEqual({ max_cost: 5, max_tokens: 2000 });
    const done = await engine.waitForRun(run.run_id);
    expect(spent).toBe(4); // 600, 1200, 1800 within 2000; the 4th reaches 2400
    expect(done.nodes.find((n) => n.node_id === "spend")?.reason).toBe("budget_exceeded");
    expect((await engine.getRun(run.run_id)).budget).toEqual({ max_cost: 5, max_tokens: 2000 });
    await expect(engine.startRun("budgeted", { budget: { max_tokens: -1 } })).rejects.toThrow(/budget\.max_tokens/);
    await expect(engine.startRun("budgeted", { budget: { tokens: 1 } as never })).rejects.toThrow(ValidationError);
  });

  it("a max_cost budget stops the next attempt too", async () => {
    let spent = 0;
    const { engine } = await testEngine({
      agents: {
        payer: (t: Task) => {
          spent += 1;
          t.reportUsage({ cost: 0.6 });
          throw new Error("again");
        },
      },
    });
    await engine.registerWorkflow({
      id: "costly",
      budget: { max_cost: 1 },
      nodes: [{ node_id: "a", agent_type: "payer", retry_count: 5, retry_interval: 0 }],
    });
    const done = await engine.waitForRun((await engine.startRun("costly")).run_id);
    expect(spent).toBe(2);
    expect(done.nodes[0]).toMatchObject({ state: "FAILED", reason: "budget_exceeded" });
    expect(done.error?.message).toContain("cost 1.2 of max_cost 1");
  });
});

describe("child runs count toward their parent", () => {
  const child: WorkflowInput = {
    id: "child",
    nodes: [
      { node_id: "first", agent_type: "spender", next_on_success: "second" },
      { node_id: "second", agent_type: "spender" },
    ],
  };
  const parent = (budget?: { max_tokens: number }): WorkflowInput => ({
    id: "parent",
    ...(budget ? { budget } : {}),
    nodes: [
      {
        node_id: "sub",
        agent_type: "workflow",
        payload: { workflow_id: "child" },
        next_on_success: "after",
        retry_count: 0,
      },
      { node_id: "after", agent_type: "spender" },
    ],
  });
  const spender = (tokens: number) => (t: Task) => {
    t.reportUsage({ tokens_in: tokens, cost: 0.01 });
    return { node: t.node_id };
  };

  it("the child's usage is added to the parent's; the parent's budget stops the parent's next attempt", async () => {
    const { engine } = await testEngine({ agents: { spender: spender(300) } });
    await engine.registerWorkflow(child);
    await engine.registerWorkflow(parent({ max_tokens: 500 }));
    const run = await engine.startRun("parent");
    const done = await engine.waitForRun(run.run_id);
    // first (300) within 500: second starts and brings it to 600; `after` is refused.
    expect(done.nodes.find((n) => n.node_id === "sub")?.state).toBe("SUCCEEDED");
    expect(done.nodes.find((n) => n.node_id === "after")).toMatchObject({ state: "FAILED", reason: "budget_exceeded" });
    expect(done.usage).toMatchObject({ tokens_in: 600, tokens_out: 0 });
    expect(done.usage.cost).toBeCloseTo(0.02);
    const kid = await engine.getRun(done.children[0]?.run_id ?? "");
    expect(kid.usage).toMatchObject({ tokens_in: 600 });
    expect(kid.budget).toBeNull();
    expect(kid.parent).toMatchObject({ ancestors: [run.run_id], budgeted: [run.run_id] });
  });

  it("a child's next attempt is stopped when its parent is past the parent's budget", async () => {
    const { engine } = await testEngine({ agents: { spender: spender(300) } });
    await engine.registerWorkflow(child);
    await engine.registerWorkflow(parent({ max_tokens: 200 }));
    const run = await engine.startRun("parent");
    const done = await engine.waitForRun(run.run_id);
    const kid = await engine.getRun(done.children[0]?.run_id ?? "");
    expect(kid.status).toBe("FAILED");
    const second = kid.nodes.find((n) => n.node_id === "second");
    expect(second).toMatchObject({ state: "FAILED", reason: "budget_exceeded" });
    expect(second?.error?.message).toContain(`run ${run.run_id} (an ancestor of this run) reached its budget`);
    const sub = done.nodes.find((n) => n.node_id === "sub");
    expect(sub).toMatchObject({ state: "FAILED", reason: "retries_exhausted" });
    expect(sub?.error?.reason).toBe("child_failed");
    expect(done.usage.tokens_in).toBe(300);
  });

  it("a map's items count toward the map's run, and a reached budget starts no more items", async () => {
    const { engine } = await testEngine({ agents: { spender: spender(10) } });
    await engine.registerWorkflow({
      id: "fanout",
      nodes: [
        {
          node_id: "each",
          agent_type: "map",
          payload: { items: "{{ input.items }}", each: { agent_type: "spender" }, max_concurrency: 2 },
        },
      ],
    });
    const run = await engine.startRun("fanout", { input: { items: [1, 2, 3, 4, 5] } });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.usage.tokens_in).toBe(50);
    expect(done.usage.cost).toBeCloseTo(0.05);

    const capped = await engine.startRun("fanout", { input: { items: [1, 2, 3, 4, 5] }, budget: { max_tokens: 20 } });
    const stopped = await engine.waitForRun(capped.run_id);
    // Two items run at a time: after them the budget (20) is reached, no third starts.
    expect(stopped.nodes[0]).toMatchObject({ state: "FAILED", reason: "budget_exceeded" });
    expect(stopped.usage.tokens_in).toBe(20);
    expect(stopped.nodes[0]?.items).toMatchObject({ total: 5, succeeded: 2, running: 0 });
  });

  it("usage reported two levels down counts in every run above", async () => {
    const { engine } = await testEngine({ agents: { spender: spender(40) } });
    await engine.registerWorkflow({ id: "inner", nodes: [{ node_id: "work", agent_type: "spender" }] });
    await engine.registerWorkflow({
      id: "middle",
      budget: { max_cost: 100 },
      nodes: [{ node_id: "call", agent_type: "workflow", payload: { workflow_id: "inner" } }],
    });
    await engine.registerWorkflow({
      id: "top",
      nodes: [{ node_id: "call", agent_type: "workflow", payload: { workflow_id: "middle" } }],
    });
    const run = await engine.startRun("top");
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    const middle = await engine.getRun(done.children[0]?.run_id ?? "");
    const inner = await engine.getRun(middle.children[0]?.run_id ?? "");
    expect(middle.budget).toEqual({ max_cost: 100 });
    expect(inner.parent).toMatchObject({ ancestors: [middle.run_id, run.run_id], budgeted: [middle.run_id] });
    for (const r of [done, middle, inner]) expect(r.usage.tokens_in).toBe(40);
  });
});

describe.skipIf(!onPostgres)("usage with several engines on PostgreSQL", () => {
  it("items run by two engines at once add up exactly in the map's run and the run above it", async () => {
    // The system clock: a parent busy in another engine's transaction is settled by the sweep.
    const spender = (t: Task) => {
      t.reportUsage({ tokens_in: 1, tokens_out: 2 });
      t.reportUsage({ cost: 0.5 });
      return { i: t.input };
    };
    const a = await testEngine({ clock: systemClock });
    const b = await testEngine({ clock: systemClock, database: a.database, agents: { spender } });
    const c = await testEngine({ clock: systemClock, database: a.database, agents: { spender } });
    await a.engine.registerWorkflow({
      id: "fan",
      nodes: [
        {
          node_id: "each",
          agent_type: "map",
          payload: { items: "{{ input.items }}", each: { agent_type: "spender" }, max_concurrency: 8 },
        },
      ],
    });
    await a.engine.registerWorkflow({
      id: "outer",
      nodes: [{ node_id: "call", agent_type: "workflow", payload: { workflow_id: "fan", input: "{{ input }}" } }],
    });
    const items = Array.from({ length: 40 }, (_, i) => i);
    const run = await a.engine.startRun("outer", { input: { items } });
    const done = await b.engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    const fan = await c.engine.getRun(done.children[0]?.run_id ?? "");
    for (const r of [done, fan]) expect(r.usage).toEqual({ tokens_in: 40, tokens_out: 80, cost: 20 });
  }, 90_000);
});
