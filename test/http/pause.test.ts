/**
 * Pausing over HTTP (DESIGN §16): POST /v1/runs/{id}/pause and /resume record the token's name,
 * GET /v1/runs?paused=true lists paused runs, POST /v1/runs/{id}/nodes/{node}/fail takes a
 * paused node's failure path; a reviewer may not, and a finished run is a 409.
 */
import { describe, expect, it } from "vitest";
import { RunSchema } from "../../src/http/schemas.js";
import { RetryableError } from "../../src/index.js";
import { nextEvent } from "../helpers.js";
import { bearer, TOKENS, testApi } from "./helpers.js";

const admin = bearer(TOKENS.admin);

describe("pause, resume and fail over HTTP", () => {
  it("pauses, lists, resumes and fails a node with the token's name recorded", async () => {
    let calls = 0;
    const { app, engine } = await testApi({
      engine: {
        agents: {
          down: () => {
            calls++;
            throw new RetryableError("provider down");
          },
        },
      },
    });
    await engine.registerWorkflow({
      id: "outage",
      nodes: [{ node_id: "call", agent_type: "down", retry_count: 0, on_exhausted: "pause" }],
    });
    await engine.registerWorkflow({
      id: "held",
      nodes: [{ node_id: "w", agent_type: "wait_event", payload: { event: "go" } }],
    });
    const held = await engine.startRun("held");
    const post = (url: string, payload: object = {}, headers = admin) =>
      app.inject({ method: "POST", url, headers, payload });

    const paused = await post(`/v1/runs/${held.run_id}/pause`, { reason: "maintenance", by: "ignored" });
    expect(paused.statusCode, paused.body).toBe(200);
    expect(RunSchema.parse(paused.json()).paused).toMatchObject({ by: "ops", reason: "maintenance" });
    const list = await app.inject({ url: "/v1/runs?paused=true", headers: admin });
    expect((list.json() as { runs: { run_id: string }[] }).runs.map((r) => r.run_id)).toEqual([held.run_id]);
    const notPaused = await app.inject({ url: "/v1/runs?paused=false", headers: admin });
    expect((notPaused.json() as { runs: unknown[] }).runs).toEqual([]);

    const reviewer = await post(`/v1/runs/${held.run_id}/resume`, {}, bearer(TOKENS.alice));
    expect(reviewer.statusCode).toBe(403);
    const resumed = await post(`/v1/runs/${held.run_id}/resume`);
    expect(resumed.statusCode, resumed.body).toBe(200);
    expect(resumed.json().paused).toBeNull();

    const pausedByEngine = nextEvent(engine, (e) => e.type === "run.paused");
    const outage = await engine.startRun("outage");
    await pausedByEngine;
    const notWaiting = await post(`/v1/runs/${held.run_id}/nodes/w/fail`);
    expect(notWaiting.statusCode).toBe(409);
    expect(notWaiting.json().error.message).toMatch(/node w of run .* is not waiting for an attempt \(it is WAITING\)/);
    const failed = await post(`/v1/runs/${outage.run_id}/nodes/call/fail`, { reason: "gone" });
    expect(failed.statusCode, failed.body).toBe(200);
    const done = await engine.waitForRun(outage.run_id);
    expect(done.status).toBe("FAILED");
    expect(done.nodes[0]?.error?.message).toBe("provider down (failed by ops: gone)");
    expect(calls).toBe(1);
    const ended = await post(`/v1/runs/${outage.run_id}/pause`);
    expect(ended.statusCode).toBe(409);
    const unknown = await post("/v1/runs/nope/resume");
    expect(unknown.statusCode).toBe(404);
  });
});
