/**
 * What one client may hold or send on the tasks API (DESIGN §13): long-poll claims waiting at
 * once per token (429) and in total (503), and claims and heartbeats per second per token
 * (429), each refused with `Retry-After` in the API's error shape; what is held is unaffected.
 */
import type { LightMyRequestResponse } from "fastify";
import { describe, expect, it } from "vitest";
import type { TaskLimits } from "../../src/index.js";
import { bearer, testApi } from "./helpers.js";

const FLEET_A = "agent-fleet-a-0123456789";
const FLEET_B = "agent-fleet-b-0123456789";
const TOKENS = [
  { token: FLEET_A, role: "agent" as const, name: "fleet-a", agent_types: ["ext"] },
  { token: FLEET_B, role: "agent" as const, name: "fleet-b", agent_types: ["ext"] },
];
const WORKFLOW = { id: "one", nodes: [{ node_id: "a", agent_type: "ext" }] };

async function api(taskLimits: TaskLimits) {
  const t = await testApi({ engine: { taskLimits }, server: { tokens: TOKENS } });
  await t.engine.registerWorkflow(WORKFLOW);
  const post = (url: string, payload: object, token: string) =>
    t.app.inject({ method: "POST", url, headers: bearer(token), payload });
  const longPoll = (token: string, worker: string) =>
    post("/v1/tasks/claim", { agent_types: ["ext"], worker_id: worker, wait_seconds: 20 }, token);
  return { ...t, post, longPoll };
}

/** The first of two requests to be answered, and the other. */
async function firstOf(
  a: Promise<LightMyRequestResponse>,
  b: Promise<LightMyRequestResponse>,
): Promise<[LightMyRequestResponse, Promise<LightMyRequestResponse>]> {
  const tagged = await Promise.race([a.then((r) => ["a", r] as const), b.then((r) => ["b", r] as const)]);
  return [tagged[1], tagged[0] === "a" ? b : a];
}

function expectRefused(res: LightMyRequestResponse, status: number, code: string, retryAfter: number): void {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers["retry-after"]).toBe(String(retryAfter));
  expect(res.json()).toEqual({
    error: { code, message: expect.any(String), details: { retry_after_seconds: retryAfter } },
  });
}

describe("tasks API limits", () => {
  it("refuses long polls past the per-token cap (429) and the total (503); the waiting ones still get their tasks", async () => {
    const t = await api({ waitingPerToken: 2, waiting: 3 });
    // One of fleet A's polls waits in process (registered at once), so its two HTTP polls meet a cap of one more.
    const inProcess = t.engine.claimTasks({
      agent_types: ["ext"],
      worker_id: "lib",
      wait_seconds: 20,
      token: { name: "fleet-a", agent_types: ["ext"] },
    });
    const [refusedA, heldA] = await firstOf(t.longPoll(FLEET_A, "a1"), t.longPoll(FLEET_A, "a2"));
    expectRefused(refusedA, 429, "too_many_requests", 1);
    expect(refusedA.json().error.message).toContain("fleet-a");
    // Three wait now: fleet B gets one more, then the engine is full.
    const [refusedB, heldB] = await firstOf(t.longPoll(FLEET_B, "b1"), t.longPoll(FLEET_B, "b2"));
    expectRefused(refusedB, 503, "unavailable", 1);

    for (let i = 0; i < 3; i += 1) await t.engine.startRun(WORKFLOW.id);
    const answers = await Promise.all([heldA, heldB]);
    expect(answers.map((r) => [r.statusCode, r.json().tasks.length])).toEqual([
      [200, 1],
      [200, 1],
    ]);
    expect(await inProcess).toHaveLength(1);
    // Ended polls free their places.
    const again = t.longPoll(FLEET_A, "a3");
    await t.engine.startRun(WORKFLOW.id);
    expect((await again).json().tasks).toHaveLength(1);
  });

  it("refuses claims and heartbeats past a token's rate (429 with Retry-After), other tokens unaffected", async () => {
    const t = await api({ requestsPerSecond: 1, burst: 3 });
    await t.engine.startRun(WORKFLOW.id);
    const claim = (token: string) => t.post("/v1/tasks/claim", { agent_types: ["ext"], worker_id: "w1" }, token);
    const first = await claim(FLEET_A);
    const [task] = first.json().tasks as { execution_id: string }[];
    const beat = () => t.post(`/v1/tasks/${task!.execution_id}/heartbeat`, { worker_id: "w1", attempt: 1 }, FLEET_A);
    expect((await beat()).statusCode).toBe(200);
    expect((await beat()).statusCode).toBe(200);
    expectRefused(await beat(), 429, "too_many_requests", 1);
    expectRefused(await claim(FLEET_A), 429, "too_many_requests", 1);
    expect((await claim(FLEET_B)).statusCode).toBe(200);
    // Reports are not rate-limited: the holder can always finish its work.
    const done = await t.post(
      `/v1/tasks/${task!.execution_id}/complete`,
      { worker_id: "w1", attempt: 1, output: 1 },
      FLEET_A,
    );
    expect(done.statusCode).toBe(200);
    await t.clock.advance(1_000); // one more request a second
    expect((await claim(FLEET_A)).statusCode).toBe(200);
    expect((await claim(FLEET_A)).statusCode).toBe(429);
  });
});
