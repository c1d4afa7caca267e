/**
 * A worker's secrets (DESIGN §12): the server tells a claimed task where its placeholders are,
 * never a value; the worker (HttpWorker, what `skein worker` runs) puts in its own, for agents
 * that declare them, and redacts them from what it reports.
 */
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { createServer } from "../../src/http/server.js";
import { defineAgent, systemClock } from "../../src/index.js";
import { HttpWorker } from "../../src/worker/http-worker.js";
import { testEngine } from "../helpers.js";

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

describe("a worker's secrets", () => {
  it("fills the payload at the paths the task names, for a declared agent; the server never has the value", async () => {
    const value = "worker-only-value-7f3a";
    const { engine } = await testEngine({ clock: systemClock, sweepIntervalMs: 100 });
    await engine.registerWorkflow({
      id: "remote",
      nodes: [
        {
          node_id: "use",
          agent_type: "keyed",
          retry_count: 0,
          payload: { auth: "Bearer {{ secrets.API_KEY }}", copy: "{{ input.text }}" },
        },
        {
          node_id: "plain",
          agent_type: "undeclared",
          depends_on: ["use"],
          retry_count: 0,
          payload: { k: "{{ secrets.API_KEY }}" },
        },
      ],
    });
    const app = await createServer({ engine });
    apps.push(app);
    await app.listen({ host: "127.0.0.1", port: 0 });
    const seen: unknown[] = [];
    const worker = new HttpWorker({
      server: `http://127.0.0.1:${(app.server.address() as { port: number }).port}`,
      agents: {
        keyed: defineAgent({ secrets: ["API_KEY"] }, (t) => {
          seen.push(t.payload);
          return { echoed: (t.payload as { auth: string }).auth };
        }),
        undeclared: (t) => t.payload,
      },
      secrets: { API_KEY: value },
      waitSeconds: 1,
    });
    const running = worker.run();
    const run = await engine.waitForRun(
      (await engine.startRun("remote", { input: { text: "[secret API_KEY]" } })).run_id,
    );
    worker.stop();
    await running;
    expect(seen).toEqual([{ auth: `Bearer ${value}`, copy: "[secret API_KEY]" }]);
    const use = run.nodes.find((n) => n.node_id === "use");
    expect(use?.payload).toEqual({ auth: "Bearer [secret API_KEY]", copy: "[secret API_KEY]" });
    expect(use?.output).toEqual({ echoed: "Bearer [secret API_KEY]" });
    const plain = run.nodes.find((n) => n.node_id === "plain");
    expect(plain).toMatchObject({ state: "FAILED", reason: "non_retryable" });
    expect(plain?.error?.message).toMatch(/agent "undeclared" does not declare it: define it with defineAgent/);
    expect(JSON.stringify(await engine.getRun(run.run_id))).not.toContain(value);
    expect(JSON.stringify(await engine.listEvents(run.run_id))).not.toContain(value);
  });

  it("redacts the worker's progress as its output: stream subscribers never see a value", async () => {
    const value = "worker-progress-value-19c";
    const { engine } = await testEngine({ clock: systemClock, sweepIntervalMs: 100 });
    await engine.registerWorkflow({
      id: "talk",
      nodes: [{ node_id: "use", agent_type: "keyed", retry_count: 0, payload: { k: "{{ secrets.API_KEY }}" } }],
    });
    const got: unknown[] = [];
    let delivered!: () => void;
    const reached = new Promise<void>((resolve) => {
      delivered = resolve;
    });
    const unsubscribe = engine.subscribe((e) => {
      if (e.type !== "node.progress") return;
      got.push(e.data);
      delivered();
    });
    const app = await createServer({ engine });
    apps.push(app);
    await app.listen({ host: "127.0.0.1", port: 0 });
    const worker = new HttpWorker({
      server: `http://127.0.0.1:${(app.server.address() as { port: number }).port}`,
      agents: {
        keyed: defineAgent({ secrets: ["API_KEY"] }, async (t) => {
          t.progress({ said: `using ${(t.payload as { k: string }).k}` });
          await reached; // the engine's subscribers got it

          return { ok: true };
        }),
      },
      secrets: { API_KEY: value },
      waitSeconds: 1,
    });
    const running = worker.run();
    const run = await engine.waitForRun((await engine.startRun("talk")).run_id);
    worker.stop();
    await running;
    unsubscribe();
    expect(run.status).toBe("SUCCEEDED");
    expect(JSON.stringify(got)).not.toContain(value);
    expect(JSON.stringify(got)).toContain('{"said":"using [secret API_KEY]"}');
  });
});
