/**
 * Durable steps of external workers (DESIGN §14.1): POST /v1/tasks/{execution_id}/steps records
 * one, fenced like a report; the next attempt's claim answers the visit's steps; a node's steps
 * are read with GET /v1/runs/{run_id}/nodes/{node_id}/steps. `skein worker`'s task.step replays them.
 */
import { describe, expect, it } from "vitest";
import type { RunEvent, Task } from "../../src/index.js";
import { HttpWorker } from "../../src/worker/http-worker.js";
import { nextEvent } from "../helpers.js";
import { bearer, TOKENS, testApi } from "./helpers.js";

const FLOW = {
  id: "worker-steps",
  nodes: [{ node_id: "draft", agent_type: "ext_writer", timeout: 600, retry_count: 2, retry_interval: 0 }],
};
const AGENT_TOKEN = "agent-steps-0123456789abc";

async function api() {
  const t = await testApi({
    server: {
      tokens: [
        { token: TOKENS.admin, role: "admin", name: "ops" },
        { token: AGENT_TOKEN, role: "agent", name: "py-worker", agent_types: ["ext_writer"] },
      ],
    },
  });
  await t.engine.registerWorkflow(FLOW);
  const post = (url: string, payload: object) =>
    t.app.inject({ method: "POST", url, headers: bearer(AGENT_TOKEN), payload });
  const claim = async (body: object) => {
    const res = await post("/v1/tasks/claim", { worker_id: "w1", agent_types: ["ext_writer"], ...body });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().tasks as { execution_id: string; attempt: number; steps?: unknown[] }[];
  };
  return { ...t, post, claim };
}

describe("durable steps over HTTP", () => {
  it("records a step, answers the first record again, hands it to the next attempt, and refuses a zombie's", async () => {
    const { app, engine, clock, post, claim } = await api();
    const run = await engine.startRun(FLOW.id);
    const [first] = await claim({ lease_seconds: 5 });
    expect(first?.steps).toBeUndefined();
    const url = `/v1/tasks/${first!.execution_id}/steps`;
    const recorded = await post(url, { worker_id: "w1", attempt: 1, name: "search:0", output: { hits: 3 } });
    expect(recorded.statusCode, recorded.body).toBe(200);
    expect(recorded.json()).toEqual({ status: "recorded", output: { hits: 3 }, attempt: 1 });
    // The same name again (a resend, or a bug): the first record stands and is answered.
    const again = await post(url, { worker_id: "w1", attempt: 1, name: "search:0", output: { hits: 9 } });
    expect(again.json()).toEqual({ status: "duplicate", output: { hits: 3 }, attempt: 1 });
    // Another worker does not hold attempt 1: 409, nothing recorded.
    const other = await post(url, { worker_id: "w2", attempt: 1, name: "other", output: 1 });
    expect(other.statusCode).toBe(409);

    // The lease passes: attempt 2 is claimed with the visit's steps; the zombie's step is refused.
    const retrying = nextEvent(engine, (e: RunEvent) => e.type === "node.retrying");
    await clock.advance(6_000);
    await retrying;
    const [second] = await claim({ worker_id: "w2" });
    expect(second).toMatchObject({ execution_id: first!.execution_id, attempt: 2 });
    expect(second?.steps).toEqual([{ name: "search:0", output: { hits: 3 }, attempt: 1 }]);
    const zombie = await post(url, { worker_id: "w1", attempt: 1, name: "search:1", output: { hits: 1 } });
    expect(zombie.statusCode).toBe(409);
    expect(zombie.json().error).toMatchObject({ code: "conflict", message: expect.stringContaining("attempt is 2") });

    const bad = await post(url, { worker_id: "w2", attempt: 2, name: "", output: 1 });
    expect(bad.statusCode).toBe(400);

    const read = await app.inject({
      method: "GET",
      url: `/v1/runs/${run.run_id}/nodes/draft/steps`,
      headers: bearer(TOKENS.admin),
    });
    expect(read.statusCode, read.body).toBe(200);
    expect(read.json().steps).toEqual([
      expect.objectContaining({ name: "search:0", attempt: 1, visit: 1, output: { hits: 3 }, size: 10 }),
    ]);
    const unknown = await app.inject({
      method: "GET",
      url: `/v1/runs/${run.run_id}/nodes/nope/steps`,
      headers: bearer(TOKENS.admin),
    });
    expect(unknown.statusCode).toBe(404);
  });

  it("skein worker's task.step: the retry replays the recorded step instead of calling it", async () => {
    const { app, engine } = await api();
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const calls: string[] = [];
    const worker = new HttpWorker({
      server: base,
      token: AGENT_TOKEN,
      workerId: "w1",
      waitSeconds: 0,
      agents: {
        ext_writer: async (task: Task) => {
          const outline = await task.step("outline", ({ idempotency_key }) => {
            calls.push(`outline@${task.attempt}`);
            return { key: idempotency_key };
          });
          if (task.attempt === 1) throw new Error("the model timed out");
          return { outline };
        },
      },
    });
    const run = await engine.startRun(FLOW.id);
    const working = worker.run();
    const done = await engine.waitForRun(run.run_id);
    worker.stop();
    await working;
    expect(done.status).toBe("SUCCEEDED");
    expect(calls).toEqual(["outline@1"]);
    expect(done.nodes[0]).toMatchObject({
      attempt: 2,
      output: { outline: { key: `${done.nodes[0]?.execution_id}:outline` } },
    });
  });
});
