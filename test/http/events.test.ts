/** Events over HTTP (DESIGN §11.2–11.3): to a run, and by key; admins only, scopes honoured. */
import { describe, expect, it } from "vitest";
import type { TokenEntry } from "../../src/http/auth.js";
import type { RunEvent } from "../../src/index.js";
import { nextEvent } from "../helpers.js";
import { bearer, TOKEN_LIST, TOKENS, testApi } from "./helpers.js";

const SCOPED_ADMIN = "orders-admin-0123456789abcdef";
const TOKENS_WITH_SCOPE: TokenEntry[] = [
  ...TOKEN_LIST,
  { token: SCOPED_ADMIN, role: "admin", name: "orders-ops", workflows: ["order-*"] },
];

const waitFlow = (id: string) => ({
  id,
  nodes: [{ node_id: "paid", agent_type: "wait_event", payload: { event: "paid", key: "{{ input.order }}" } }],
});

async function waitingRun(id = "order-eu") {
  const t = await testApi({ server: { tokens: TOKENS_WITH_SCOPE } });
  await t.engine.registerWorkflow(waitFlow(id));
  const parked = nextEvent(t.engine, (e: RunEvent) => e.type === "node.waiting");
  const run = await t.engine.startRun(id, { input: { order: "o-1" } });
  await parked;
  const post = (token: string, url: string, payload: object) =>
    t.app.inject({ method: "POST", url, headers: bearer(token), payload });
  return { ...t, run, post };
}

describe("POST /v1/runs/{run_id}/events", () => {
  it("delivers to the waiting node, then answers a finished run 409 and the same key as a duplicate", async () => {
    const { engine, run, post } = await waitingRun();
    const url = `/v1/runs/${run.run_id}/events`;
    const res = await post(TOKENS.admin, url, { name: "paid", payload: { total: 3 }, idempotency_key: "k" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      delivered_to: { node_id: "paid", visit: 1 },
      buffered: false,
      duplicate: false,
    });
    expect((await engine.waitForRun(run.run_id)).output).toEqual({ paid: { total: 3 } });
    const again = await post(TOKENS.admin, url, { name: "paid", payload: { total: 3 }, idempotency_key: "k" });
    expect(again.json()).toMatchObject({ delivered_to: { node_id: "paid" }, duplicate: true });
    const late = await post(TOKENS.admin, url, { name: "paid" });
    expect(late.statusCode).toBe(409);
    expect(late.json().error.code).toBe("conflict");
  });

  it("answers 429 with Retry-After when the run's inbox is full (1,000 events no wait took), and stores nothing of it", async () => {
    const { engine, run, post } = await waitingRun();
    const url = `/v1/runs/${run.run_id}/events`;
    // The run waits for "paid": events of another name stay in its inbox.
    await Promise.all(Array.from({ length: 1000 }, (_, i) => engine.sendEvent(run.run_id, "other", { i })));
    const res = await post(SCOPED_ADMIN, url, { name: "other", payload: { i: 1000 } });
    expect(res.statusCode).toBe(429);
    expect(res.headers["retry-after"]).toBe("5");
    expect(res.json().error).toMatchObject({
      code: "too_many_requests",
      message: `the inbox of run ${run.run_id} is full: it holds at most 1000 events that no wait_event took yet; send "other" again once a wait_event of the run has taken events, or send a reference to large data`,
    });
    const received = await engine.listEvents(run.run_id, { limit: 2000 });
    expect(received.filter((e) => e.type === "event.received")).toHaveLength(1000);
    // An event a wait takes at once is never refused: it is not kept.
    const paid = await post(SCOPED_ADMIN, url, { name: "paid", payload: { total: 1 } });
    expect(paid.statusCode).toBe(200);
    expect(paid.json()).toMatchObject({ delivered_to: { node_id: "paid" }, buffered: false });
  });

  it("refuses a bad body (400 with the path), a reviewer (403), an unknown or out-of-scope run (404)", async () => {
    const { run, post, engine } = await waitingRun("payroll");
    const url = `/v1/runs/${run.run_id}/events`;
    const bad = await post(TOKENS.admin, url, { name: "" });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details.problems[0].path).toBe("body.name");
    expect((await post(TOKENS.admin, url, { name: "x", extra: 1 })).statusCode).toBe(400);
    expect((await post(TOKENS.alice, url, { name: "paid" })).statusCode).toBe(403);
    expect((await post(TOKENS.admin, "/v1/runs/nope/events", { name: "paid" })).statusCode).toBe(404);
    expect((await post(SCOPED_ADMIN, url, { name: "paid" })).statusCode).toBe(404);
    expect((await engine.getRun(run.run_id)).nodes[0]).toMatchObject({ state: "WAITING" });
  });
});

describe("POST /v1/events", () => {
  it("publishes by key to every waiting run; a scoped token's event reaches only runs of its workflows", async () => {
    const { engine, run, post } = await waitingRun("payroll");
    const scoped = await post(SCOPED_ADMIN, "/v1/events", { name: "paid", key: "o-1", payload: "forged" });
    expect(scoped.statusCode).toBe(200);
    expect(scoped.json()).toMatchObject({ delivered_to: [] });
    const res = await post(TOKENS.admin, "/v1/events", { name: "paid", key: "o-1", payload: 7 });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ delivered_to: [{ run_id: run.run_id, node_id: "paid", visit: 1 }] });
    expect((await engine.waitForRun(run.run_id)).output).toEqual({ paid: 7 });
    expect((await post(TOKENS.admin, "/v1/events", { name: "paid" })).statusCode).toBe(400);
  });

  it("answers the runs the workflows' triggers started, and those that did not start; a scoped token starts only its workflows", async () => {
    const { engine, post, app } = await waitingRun("order-eu");
    const triggered = (id: string, input: unknown) => ({
      id,
      input_schema: { type: "object", required: ["total"] },
      triggers: [{ event: "paid", input }],
      nodes: [{ node_id: "w", agent_type: "wait_event", payload: { event: "never" } }],
    });
    await engine.registerWorkflow(triggered("order-invoice", { total: "{{ event.payload.total }}" }));
    await engine.registerWorkflow(triggered("order-audit", { amount: "{{ event.payload.total }}" }));
    await engine.registerWorkflow(triggered("payroll-sync", { total: "{{ event.payload.total }}" }));

    const body = { name: "paid", key: "o-1", payload: { total: 7 }, idempotency_key: "pay-1" };
    const res = await post(SCOPED_ADMIN, "/v1/events", body);
    expect(res.statusCode).toBe(200);
    const answer = res.json();
    expect(answer).toMatchObject({ duplicate: false, delivered_to: [{ node_id: "paid" }] });
    // payroll-sync is outside the token's scope: neither started nor named.
    expect(answer.started).toEqual([{ workflow_id: "order-invoice", workflow_version: 1, run_id: expect.any(String) }]);
    expect(answer.not_started).toEqual([
      {
        workflow_id: "order-audit",
        workflow_version: 1,
        trigger: 0,
        reason: "input_invalid",
        message: expect.stringContaining("does not match the input_schema of order-audit"),
        problems: [{ path: "input", message: "must have required property 'total'" }],
      },
    ]);
    const run = await app.inject({
      method: "GET",
      url: `/v1/runs/${answer.started[0].run_id}`,
      headers: bearer(SCOPED_ADMIN),
    });
    expect(run.json()).toMatchObject({
      input: { total: 7 },
      scope: ["order-*"],
      triggered_by: { event: "paid", key: "o-1", event_id: answer.event_id, idempotency_key: "pay-1" },
    });
    // The same event again: a duplicate, answered with the same run.
    const again = await post(SCOPED_ADMIN, "/v1/events", body);
    expect(again.json()).toMatchObject({ duplicate: true, started: answer.started, not_started: [] });
    expect(await engine.listRuns({ workflow_id: "payroll-sync" })).toEqual([]);
  });
});
