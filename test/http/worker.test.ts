/**
 * `skein worker` processes (the built CLI) drive runs over a real port: claims, heartbeats,
 * routes; a worker killed mid-task loses its lease, and another worker finishes the task.
 */
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { createServer } from "../../src/http/server.js";
import { type RunEvent, systemClock } from "../../src/index.js";
import { requireBuiltCli, Skein, workspace } from "../cli/helpers.js";
import { nextEvent, testEngine } from "../helpers.js";

requireBuiltCli();

const AGENTS = new URL("../fixtures/worker-agents.ts", import.meta.url).pathname;
const TOKEN = "agent-worker-test-0123456789";

const FLOW = {
  id: "workers",
  defaults: { retry_count: 3, retry_interval: 0.1 },
  nodes: [
    { node_id: "first", agent_type: "quick" },
    { node_id: "long", agent_type: "slow", depends_on: ["first"] },
    { node_id: "choose", agent_type: "router", depends_on: ["long"], next_on_success: ["yes", "no"] },
    { node_id: "yes", agent_type: "quick" },
    { node_id: "no", agent_type: "quick" },
  ],
};

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

async function serve() {
  const { engine } = await testEngine({ clock: systemClock, sweepIntervalMs: 100 });
  await engine.registerWorkflow(FLOW);
  const app = await createServer({
    engine,
    tokens: [{ token: TOKEN, role: "agent", name: "workers", agent_types: ["quick", "slow", "router"] }],
  });
  apps.push(app);
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address() as { port: number };
  return { engine, url: `http://127.0.0.1:${address.port}` };
}

function worker(url: string, id: string): Skein {
  const ws = workspace();
  return new Skein(
    ["worker", "--server", url, "--agents", AGENTS, "--worker-id", id, "--lease-seconds", "1", "--concurrency", "2"],
    ws.dir,
    { SKEIN_TOKEN: TOKEN },
  );
}

describe("skein worker", () => {
  it("finishes a run after the worker holding a task is killed: the task is re-leased to the other", async () => {
    const { engine, url } = await serve();
    const started = nextEvent(engine, (e: RunEvent) => e.type === "node.started" && e.node_id === "long");
    const run = await engine.startRun(FLOW.id);
    const workers = { w1: worker(url, "w1"), w2: worker(url, "w2") };
    const holder = String((await started).data.holder);
    // The holder names the token ("workers") and the worker_id (DESIGN §13).
    const [w1, w2] = ["worker:workers/w1", "worker:workers/w2"];
    const victim = holder === w1 ? workers.w1 : workers.w2;
    const survivor = victim === workers.w1 ? workers.w2 : workers.w1;
    victim.proc.kill("SIGKILL");

    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    const long = done.nodes.find((n) => n.node_id === "long");
    expect(long).toMatchObject({ state: "SUCCEEDED", attempt: 2, output: { node: "long", attempt: 2 } });
    expect(done.nodes.find((n) => n.node_id === "yes")?.state).toBe("SUCCEEDED");
    expect(done.nodes.find((n) => n.node_id === "no")?.state).toBe("SKIPPED");
    const events = await engine.listEvents(run.run_id);
    const longStarts = events.filter((e) => e.type === "node.started" && e.node_id === "long");
    expect(longStarts.map((e) => e.data.holder)).toEqual([holder, holder === w1 ? w2 : w1]);
    expect(events.find((e) => e.type === "node.retrying" && e.node_id === "long")?.data).toMatchObject({
      error: { reason: "lease_expired" },
    });

    survivor.proc.kill("SIGTERM");
    const result = await survivor.exited;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/stopped \(\d+ completed, 0 failed, 0 lost\)/);
  });

  it("says why when the server refuses its token (exit 2)", async () => {
    const { url } = await serve();
    const ws = workspace();
    const w = new Skein(["worker", "--server", url, "--agents", AGENTS, "--token", "wrong-token-0123456789"], ws.dir);
    const result = await w.exited;
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/refused this worker/);
  });
});
