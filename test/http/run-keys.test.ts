/**
 * Keyed starts over HTTP (DESIGN §17): POST /v1/runs with `key` answers a QUEUED run behind the
 * running one, `on_active: "reject"` is a 409 naming it, `skip` answers it, a debounced start
 * answers the same QUEUED run, and GET /v1/runs?status=QUEUED lists them.
 */
import { describe, expect, it } from "vitest";
import { RunSchema } from "../../src/http/schemas.js";
import { bearer, TOKENS, testApi } from "./helpers.js";

const admin = bearer(TOKENS.admin);

describe("POST /v1/runs with a key", () => {
  it("queues, rejects, skips and debounces, and lists QUEUED runs", async () => {
    const { app, engine } = await testApi();
    await engine.registerWorkflow({
      id: "chat",
      nodes: [{ node_id: "w", agent_type: "wait_event", payload: { event: "done" } }],
    });
    const start = (payload: object) =>
      app.inject({ method: "POST", url: "/v1/runs", headers: admin, payload: { workflow_id: "chat", ...payload } });

    const first = await start({ input: { n: 1 }, key: "t-1" });
    expect(first.statusCode, first.body).toBe(201);
    const active = RunSchema.parse(first.json());
    expect(active).toMatchObject({ status: "RUNNING", key: "t-1", queued: null });

    const second = RunSchema.parse((await start({ input: { n: 2 }, key: "t-1" })).json());
    expect(second).toMatchObject({ status: "QUEUED", key: "t-1", queued: { reason: "key", on_active: "queue" } });

    const rejected = await start({ input: { n: 3 }, key: "t-1", on_active: "reject" });
    expect(rejected.statusCode).toBe(409);
    expect(rejected.json().error.message).toContain(active.run_id);

    const skipped = RunSchema.parse((await start({ input: { n: 4 }, key: "t-1", on_active: "skip" })).json());
    expect(skipped.run_id).toBe(active.run_id);

    const debounced = RunSchema.parse((await start({ input: { n: 5 }, key: "d-1", debounce_seconds: 30 })).json());
    expect(debounced).toMatchObject({ status: "QUEUED", queued: { reason: "debounce" } });
    const again = RunSchema.parse((await start({ input: { n: 6 }, key: "d-1", debounce_seconds: 30 })).json());
    expect(again.run_id).toBe(debounced.run_id);
    expect(again.input).toEqual({ n: 6 });

    const bad = await start({ input: {}, on_active: "queue" });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toContain("on_active");

    const list = await app.inject({ url: "/v1/runs?status=QUEUED", headers: admin });
    const ids = (list.json() as { runs: { run_id: string }[] }).runs.map((r) => r.run_id).sort();
    expect(ids).toEqual([second.run_id, debounced.run_id].sort());
  });
});
