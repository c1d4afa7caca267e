/** createTestEngine(): time skipping by the idle rule, advance, the runaway and busy guards, fakes. */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createTestEngine, fake, type Task, type TestEngine } from "../../src/index.js";

const START = Date.UTC(2026, 2, 1, 9);
const HOUR = 3_600_000;
const open: TestEngine[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((t) => t.close()));
});

async function harness(options: Parameters<typeof createTestEngine>[0]): Promise<TestEngine> {
  const t = await createTestEngine({ start: START, ...options });
  open.push(t);
  return t;
}

const node = (run: { nodes: { node_id: string }[] }, id: string) =>
  run.nodes.find((n) => n.node_id === id) as unknown as Record<string, unknown>;

const retryThenReview = {
  id: "retry-review",
  nodes: [
    { node_id: "fetch", agent_type: "fetcher", retry_count: 1, retry_interval: 30 },
    {
      node_id: "review",
      agent_type: "human_review",
      depends_on: ["fetch"],
      timeout: 43_200,
      payload: { title: "Check it", assignees: ["ops"] },
    },
  ],
};

describe("createTestEngine", () => {
  it("skips a 30 s retry, stops at a review, and advance('12h') times the review out", async () => {
    const fetcher = fake.failsThenReturns(1, { items: 2 });
    const t = await harness({ agents: { fetcher }, workflows: [retryThenReview] });
    const run = await t.engine.startRun("retry-review");

    await t.runUntilIdle();
    expect(t.clock.now() - START).toBe(30_000);
    expect(fetcher.calls.map((c) => [c.attempt, c.node_id])).toEqual([
      [1, "fetch"],
      [2, "fetch"],
    ]);
    const waiting = await t.engine.getRun(run.run_id);
    expect(waiting.status).toBe("RUNNING");
    expect(node(waiting, "review").state).toBe("IN_REVIEW");

    await t.runUntilIdle(); // still waiting on a person: the clock stays put
    expect(t.clock.now() - START).toBe(30_000);

    await t.advance("12h");
    const done = await t.result(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(node(done, "review")).toMatchObject({ state: "FAILED", reason: "review_timeout" });
    expect(t.clock.now() - START).toBe(30_000 + 12 * HOUR);
  });

  it("decides a waiting review with t.review", async () => {
    const t = await harness({ agents: { fetcher: fake.returns({ items: 1 }) }, workflows: [retryThenReview] });
    const run = await t.engine.startRun("retry-review");
    await t.review(run.run_id, "review", { decision: "approve", by: "ops" });
    const done = await t.result(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(node(done, "review").output).toMatchObject({ decision: "approve", by: "ops" });
  });

  it("times out an agent hung for its 1 h timeout, then retries it", async () => {
    const tool = fake.hangs(1, { answered: true });
    const t = await harness({
      agents: { tool },
      workflows: [
        {
          id: "hung",
          nodes: [{ node_id: "call", agent_type: "tool", timeout: 3600, retry_count: 1, retry_interval: 0 }],
        },
      ],
    });
    const run = await t.engine.startRun("hung");
    const done = await t.result(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(node(done, "call")).toMatchObject({ attempt: 2, output: { answered: true } });
    expect(t.clock.now() - START).toBe(HOUR);
    expect(tool.calls.map((c) => c.attempt)).toEqual([1, 2]);
  });

  it("sleeps 30 days in a moment", async () => {
    const t = await harness({
      workflows: [
        {
          id: "sleepy",
          timeout: 40 * 86_400,
          nodes: [
            { node_id: "nap", agent_type: "sleep", payload: { seconds: 30 * 86_400 } },
            { node_id: "after", agent_type: "aggregator", depends_on: ["nap"] },
          ],
        },
      ],
    });
    const run = await t.engine.startRun("sleepy");
    const done = await t.result(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(t.clock.now() - START).toBe(30 * 86_400_000);
  });

  it("skips the waits of child runs", async () => {
    const t = await harness({
      workflows: [
        { id: "child", nodes: [{ node_id: "nap", agent_type: "sleep", payload: { seconds: 3600 } }] },
        {
          id: "parent",
          nodes: [{ node_id: "sub", agent_type: "workflow", timeout: 7200, payload: { workflow_id: "child" } }],
        },
      ],
    });
    const run = await t.engine.startRun("parent");
    const done = await t.result(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.children).toEqual([expect.objectContaining({ workflow_id: "child", status: "SUCCEEDED" })]);
    expect(t.clock.now() - START).toBe(HOUR);
  });

  it("times out a run whose only wait is time (its TTL before the agent's deadline)", async () => {
    const t = await harness({
      agents: { tool: fake.hangs() },
      workflows: [{ id: "ttl", timeout: 600, nodes: [{ node_id: "call", agent_type: "tool", timeout: 3600 }] }],
    });
    const run = await t.engine.startRun("ttl");
    const done = await t.result(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(done.end_cause).toBe("ttl");
    expect(t.clock.now() - START).toBe(600_000);
  });

  it("waits for an agent's real I/O instead of skipping to its deadline, on a new and a kept-alive connection", async () => {
    let requested!: () => void;
    let answer!: () => void;
    const server = createServer((_req, res) => {
      answer = () => res.end(JSON.stringify({ price: 12 }));
      requested();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/price`;
    try {
      const quote = async (task: Task) => {
        const response = await fetch(url, { signal: task.signal });
        return (await response.json()) as { price: number };
      };
      const t = await harness({
        agents: { quote },
        workflows: [{ id: "io", nodes: [{ node_id: "quote", agent_type: "quote", timeout: 60, retry_count: 0 }] }],
      });
      // The second run's request goes on the connection the first one left open (keep-alive).
      for (const _ of [1, 2]) {
        const arrived = new Promise<void>((resolve) => {
          requested = resolve;
        });
        const run = await t.engine.startRun("io");
        const idle = t.runUntilIdle();
        await Promise.race([arrived, idle]);
        // The request is in flight: nothing may move the clock towards the 60 s deadline.
        expect(t.clock.now()).toBe(START);
        answer();
        await idle;
        const done = await t.engine.getRun(run.run_id);
        expect(done.status).toBe("SUCCEEDED");
        expect(node(done, "quote")).toMatchObject({ attempt: 1, output: { price: 12 } });
        expect(t.clock.now()).toBe(START);
      }
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("fails with the open resources named when an agent keeps its own timer for ever", async () => {
    let ticker: NodeJS.Timeout | undefined;
    const ticking = (task: Task) =>
      new Promise((_resolve, reject) => {
        ticker = setInterval(() => {}, 1000);
        task.signal.addEventListener("abort", () => reject(task.signal.reason));
      });
    const t = await harness({
      busyTimeoutMs: 50,
      agents: { ticking },
      workflows: [{ id: "ticking", nodes: [{ node_id: "tick", agent_type: "ticking", timeout: 60 }] }],
    });
    await t.engine.startRun("ticking");
    try {
      await expect(t.runUntilIdle()).rejects.toThrow(
        /waited 50 ms for agents' own work .*open: Timeout x1.*busyTimeoutMs/,
      );
      expect(t.clock.now()).toBe(START);
    } finally {
      clearInterval(ticker);
    }
  });

  it("skips to a rate limit's next token", async () => {
    const t = await harness({
      agents: { chat: fake.returns({ ok: true }) },
      rateLimits: { chat: { per_minute: 1 } },
      workflows: [{ id: "limited", nodes: [{ node_id: "ask", agent_type: "chat" }] }],
    });
    const first = await t.engine.startRun("limited");
    const second = await t.engine.startRun("limited");
    expect((await t.result(second.run_id)).status).toBe("SUCCEEDED");
    expect((await t.result(first.run_id)).status).toBe("SUCCEEDED");
    expect(t.calls("chat").map((c) => c.at - START)).toEqual([0, 60_000]);
  });

  it("stops a workflow that loops for ever after maxSteps, with the busiest node named", async () => {
    const t = await harness({
      maxSteps: 300,
      agents: { ping: fake.returns({}), pong: fake.returns({}) },
      workflows: [
        {
          id: "forever",
          nodes: [
            { node_id: "ping", agent_type: "ping", max_visits: 1_000_000 },
            {
              node_id: "pong",
              agent_type: "pong",
              depends_on: ["ping"],
              next_on_success: "ping",
              max_visits: 1_000_000,
            },
          ],
        },
      ],
    });
    await t.engine.startRun("forever");
    await expect(t.runUntilIdle()).rejects.toThrow(/runUntilIdle stopped after 300 steps .*node "p[io]ng" of run/);
  });

  it("stops a retry loop with 0 s intervals after maxSteps", async () => {
    const t = await harness({
      maxSteps: 200,
      agents: { broken: fake.fails("always") },
      workflows: [
        { id: "retrying", nodes: [{ node_id: "call", agent_type: "broken", retry_count: 100, retry_interval: 0 }] },
      ],
    });
    const run = await t.engine.startRun("retrying");
    await expect(t.result(run.run_id)).rejects.toThrow(/stopped after 200 steps/);
  });

  it("records the calls of fakes and of every agent, with the clock's time", async () => {
    const writer = fake.returns((task: Task) => ({ wrote: (task.payload as { topic: string }).topic }));
    const critic = (task: Task) => ({ score: task.visit });
    const t = await harness({
      agents: { writer, critic },
      workflows: [
        {
          id: "calls",
          nodes: [
            { node_id: "draft", agent_type: "writer", payload: { topic: "{{ input.topic }}" } },
            { node_id: "judge", agent_type: "critic", depends_on: ["draft"] },
          ],
        },
      ],
    });
    const run = await t.engine.startRun("calls", { input: { topic: "agents" } });
    const done = await t.result(run.run_id);
    expect(done.output).toEqual({ judge: { score: 1 } });
    expect(writer.calls).toEqual([
      expect.objectContaining({ run_id: run.run_id, node_id: "draft", attempt: 1, payload: { topic: "agents" } }),
    ]);
    expect(t.calls().map((c) => c.agent_type)).toEqual(["writer", "critic"]);
    expect(t.calls("critic")[0]).toMatchObject({
      node_id: "judge",
      at: START,
      deps: { draft: { status: "SUCCEEDED" } },
    });
  });

  it("moves time with advance and answers wait_event timeouts and sent events", async () => {
    const t = await harness({
      workflows: [
        {
          id: "payment",
          nodes: [
            { node_id: "paid", agent_type: "wait_event", timeout: 7200, payload: { event: "payment.received" } },
            { node_id: "done", agent_type: "aggregator", depends_on: ["paid"] },
          ],
        },
      ],
    });
    const sent = await t.engine.startRun("payment");
    await t.advance("45m");
    await t.sendEvent(sent.run_id, "payment.received", { amount: 12 });
    expect((await t.result(sent.run_id)).output).toEqual({ done: { paid: { amount: 12 } } });

    const late = await t.engine.startRun("payment");
    await t.runUntilIdle(); // waits on an event: no time passes
    expect((await t.engine.getRun(late.run_id)).status).toBe("RUNNING");
    await t.advance(7200);
    const failed = await t.result(late.run_id);
    expect(failed.status).toBe("FAILED");
    expect(node(failed, "paid").reason).toBe("event_timeout");
  });

  it("refuses a bad duration, a bad start and a bad workflow with what to do", async () => {
    const t = await harness({});
    await expect(t.advance("12 hours")).rejects.toThrow(/advance\(duration\) must be a duration.*"12h"/);
    await expect(createTestEngine({ start: "yesterday" })).rejects.toThrow(/start must be epoch ms/);
    await expect(createTestEngine({ workflows: [{ id: "x", nodes: [] }] })).rejects.toThrow(/nodes/);
    await t.close();
    await expect(t.runUntilIdle()).rejects.toThrow(/runUntilIdle: this test engine is closed; create another/);
  });
});
