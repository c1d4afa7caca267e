/**
 * defineAgent in a real engine: the typed form is the handler itself; the schema form checks
 * each attempt's payload, input and output (a mismatch fails the attempt for good, naming the
 * path) and hands the handler the schemas' parsed values.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineAgent, defineWorkflow, type Engine } from "../../src/index.js";
import { testEngine } from "../helpers.js";

const workflow = defineWorkflow({
  id: "checked",
  defaults: { retry_count: 3, retry_interval: 0 },
  nodes: [{ node_id: "collect", agent_type: "collector", payload: { platform: "{{ input.platform }}" } }],
});

const collector = (calls: unknown[]) =>
  defineAgent(
    {
      payload: z.object({ platform: z.string(), limit: z.number().default(2) }),
      input: z.object({ platform: z.unknown(), answer: z.unknown().optional() }),
      output: z.object({ items: z.array(z.string()) }),
    },
    async (task) => {
      calls.push(task.payload);
      // A test input steers the answer: a good one, a bad one, or a route.
      const answer = (task.input as { answer?: unknown }).answer;
      if (answer === "route") return task.route("$end", { items: ["routed"] });
      if (answer === "bad-route") return task.route("$end", { items: "routed" });
      // A wrong answer is the point of some tests: the type is claimed here, the schema checks it.
      if (answer !== undefined) return answer as { items: string[] };
      return { items: Array.from({ length: task.payload.limit }, (_, i) => `${task.payload.platform}-${i}`) };
    },
  );

async function run(engine: Engine, input: unknown) {
  const started = await engine.startRun("checked", { input });
  return engine.waitForRun<{ collect: { items: string[] } }>(started.run_id);
}

describe("defineAgent", () => {
  it("hands the handler the parsed payload and stores the checked output", async () => {
    const calls: unknown[] = [];
    const { engine } = await testEngine({ agents: { collector: collector(calls) } });
    await engine.registerWorkflow(workflow);
    const done = await run(engine, { platform: "x" });
    expect(done.status).toBe("SUCCEEDED");
    expect(done.output?.collect.items).toEqual(["x-0", "x-1"]);
    expect(calls).toEqual([{ platform: "x", limit: 2 }]); // the schema's default applied
  });

  it("fails the attempt for good when the payload does not match, naming the path and what was expected", async () => {
    const calls: unknown[] = [];
    const { engine } = await testEngine({ agents: { collector: collector(calls) } });
    await engine.registerWorkflow(workflow);
    const done = await run(engine, { platform: 7 });
    expect(done.status).toBe("FAILED");
    const visit = done.nodes.find((n) => n.node_id === "collect");
    expect(visit?.attempt).toBe(1); // not retried, though retry_count is 3
    expect(visit?.error?.name).toBe("NonRetryableError");
    expect(visit?.error?.message).toMatch(/^payload does not match the agent's schema: payload\.platform: .*string/);
    expect(calls).toEqual([]); // the handler never ran
  });

  it("fails the attempt for good when the output does not match, naming the path", async () => {
    const { engine } = await testEngine({ agents: { collector: collector([]) } });
    await engine.registerWorkflow(workflow);
    const done = await run(engine, { platform: "x", answer: { items: ["ok", 3] } });
    expect(done.status).toBe("FAILED");
    const visit = done.nodes.find((n) => n.node_id === "collect");
    expect(visit?.attempt).toBe(1);
    expect(visit?.error?.message).toMatch(/^output does not match the agent's schema: output\.items\[1\]: /);
  });

  it("checks a routed output too, and routes a good one", async () => {
    const { engine } = await testEngine({ agents: { collector: collector([]) } });
    await engine.registerWorkflow(workflow);
    const good = await run(engine, { platform: "x", answer: "route" });
    expect(good.status).toBe("SUCCEEDED");
    expect(good.nodes[0]?.output).toEqual({ items: ["routed"] });
    const bad = await run(engine, { platform: "x", answer: "bad-route" });
    expect(bad.status).toBe("FAILED");
    expect(bad.nodes[0]?.error?.message).toMatch(/output\.items: /);
  });

  it("checks the run input when given an input schema", async () => {
    const strict = defineAgent({ input: z.object({ platform: z.string() }) }, (task) => ({ got: task.input.platform }));
    const { engine } = await testEngine({ agents: { collector: strict } });
    await engine.registerWorkflow(workflow);
    expect((await run(engine, { platform: "x" })).status).toBe("SUCCEEDED");
    const bad = await run(engine, {});
    expect(bad.status).toBe("FAILED");
    expect(bad.nodes[0]?.error?.message).toMatch(/^input does not match the agent's schema: input\.platform: /);
  });

  it("keeps the task's other fields and its lazy signal", async () => {
    let seen: { execution_id: string; aborted: boolean; heartbeat: boolean } | null = null;
    const agent = defineAgent({ payload: z.object({ platform: z.string() }) }, async (task) => {
      seen = { execution_id: task.execution_id, aborted: task.signal.aborted, heartbeat: await task.heartbeat() };
      return null;
    });
    const { engine } = await testEngine({ agents: { collector: agent } });
    await engine.registerWorkflow(workflow);
    const done = await run(engine, { platform: "x" });
    expect(done.status).toBe("SUCCEEDED");
    expect(seen).toEqual({ execution_id: `${done.run_id}:collect:1`, aborted: false, heartbeat: true });
  });

  it("the typed form runs the handler as it is", async () => {
    const typed = defineAgent<{ platform: string }, { upper: string }>((task) => ({
      upper: task.payload.platform.toUpperCase(),
    }));
    const { engine } = await testEngine({ agents: { collector: typed } });
    await engine.registerWorkflow(workflow);
    const done = await engine.waitForRun<{ collect: { upper: string } }>(
      (await engine.startRun("checked", { input: { platform: "x" } })).run_id,
    );
    expect(done.output?.collect.upper).toBe("X");
  });

  it("refuses a schema form without its handler", () => {
    expect(() => defineAgent({ payload: z.object({}) } as never)).toThrow(/second argument must be the handler/);
  });
});
