/**
 * Scopes that hold at run time and engine keys nobody can take (DESIGN §13.1), through the HTTP
 * API with scoped tokens, on both stores (the http tests run in the default project only, so
 * each case names its store).
 */
import { describe, expect, it } from "vitest";
import type { TokenEntry } from "../../src/http/auth.js";
import { HIDDEN_RUN } from "../../src/http/scope.js";
import type { RunEvent } from "../../src/index.js";
import { nextEvent, sqlOn, tempDb } from "../helpers.js";
import { bearer, TOKEN_LIST, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

const TEAM_A = "team-a-admin-0123456789abcdef";
const TOKENS_WITH_SCOPE: TokenEntry[] = [
  ...TOKEN_LIST,
  { token: TEAM_A, role: "admin", name: "team-a", workflows: ["team-a-*"] },
];

const STORES = ["sqlite", "postgres"] as const;

async function api(store: (typeof STORES)[number]) {
  const database = tempDb(store);
  const t = await testApi({ engine: { database }, server: { tokens: TOKENS_WITH_SCOPE } });
  const as = (token: string) => ({
    get: (url: string) => t.app.inject({ url, headers: bearer(token) }),
    post: (url: string, payload: object) => t.app.inject({ method: "POST", url, headers: bearer(token), payload }),
    put: (url: string, payload: object) => t.app.inject({ method: "PUT", url, headers: bearer(token), payload }),
  });
  await t.engine.registerWorkflow({ ...WORKFLOWS.simple, id: "team-b-payroll" });
  await t.engine.registerWorkflow({ ...WORKFLOWS.simple, id: "team-a-line" });
  return { ...t, database, as };
}

const childFlow = (id: string, target: string) => ({
  id,
  nodes: [{ node_id: "child", agent_type: "workflow", payload: { workflow_id: target } }],
});

const mapFlow = (id: string, target: string) => ({
  id,
  nodes: [
    { node_id: "go", agent_type: "wait_event", payload: { event: "go" } },
    {
      node_id: "each",
      agent_type: "map",
      depends_on: ["go"],
      payload: { items: "{{ [1, 2] }}", each: { workflow_id: target } },
    },
  ],
});

describe.each(STORES)("a scope at run time (%s)", (store) => {
  it("refuses to register a static child or map item outside the token's scope, with its path (403)", async () => {
    const { as } = await api(store);
    const child = await as(TEAM_A).put("/v1/workflows/team-a-x", childFlow("team-a-x", "team-b-payroll"));
    expect(child.statusCode).toBe(403);
    expect(child.json().error.message).toContain('nodes[0].payload.workflow_id names workflow "team-b-payroll"');
    const map = await as(TEAM_A).put("/v1/workflows/team-a-m", mapFlow("team-a-m", "team-b-payroll"));
    expect(map.statusCode).toBe(403);
    expect(map.json().error.message).toContain("nodes[1].payload.each.workflow_id");
    // In scope, or templated (checked at run time): registered.
    expect((await as(TEAM_A).put("/v1/workflows/team-a-ok", childFlow("team-a-ok", "team-a-line"))).statusCode).toBe(
      201,
    );
    // An unscoped admin may register anything.
    expect(
      (await as(TOKENS.admin).put("/v1/workflows/team-a-x", childFlow("team-a-x", "team-b-payroll"))).statusCode,
    ).toBe(201);
  });

  it("fails a templated child outside the run's scope out_of_scope, starting nothing; an unscoped start runs it", async () => {
    const { as, engine } = await api(store);
    const put = await as(TEAM_A).put("/v1/workflows/team-a-t", childFlow("team-a-t", "{{ input.target }}"));
    expect(put.statusCode).toBe(201);
    const started = await as(TEAM_A).post("/v1/runs", { workflow_id: "team-a-t", input: { target: "team-b-payroll" } });
    expect(started.statusCode).toBe(201);
    const run = await engine.waitForRun(started.json().run_id);
    expect(run.status).toBe("FAILED");
    expect(run.scope).toEqual(["team-a-*"]);
    const node = (await engine.getRun(run.run_id)).nodes.find((n) => n.node_id === "child");
    expect(node).toMatchObject({ state: "FAILED", reason: "out_of_scope" });
    expect(node?.error?.message).toContain('workflow "team-b-payroll" is outside this run\'s scope (team-a-*');
    expect(await engine.listRuns({ workflow_id: "team-b-payroll" })).toEqual([]);
    // In scope: the child inherits the root's scope.
    const ok = await as(TEAM_A).post("/v1/runs", { workflow_id: "team-a-t", input: { target: "team-a-line" } });
    expect((await engine.waitForRun(ok.json().run_id)).status).toBe("SUCCEEDED");
    const [line] = await engine.listRuns({ workflow_id: "team-a-line" });
    expect((await engine.getRun(line?.run_id as string)).scope).toEqual(["team-a-*"]);
    // The same workflow started by an unscoped admin starts the child.
    const admin = await as(TOKENS.admin).post("/v1/runs", {
      workflow_id: "team-a-t",
      input: { target: "team-b-payroll" },
    });
    expect((await engine.waitForRun(admin.json().run_id)).status).toBe("SUCCEEDED");
  });

  it("fails a map whose items' workflow is outside the run's scope before any item starts", async () => {
    const { as, engine } = await api(store);
    await engine.registerWorkflow(mapFlow("team-a-fan", "team-b-payroll")); // by the library: unscoped
    const started = await as(TEAM_A).post("/v1/runs", { workflow_id: "team-a-fan" });
    const runId = started.json().run_id as string;
    await as(TEAM_A).post(`/v1/runs/${runId}/events`, { name: "go" });
    const run = await engine.waitForRun(runId);
    expect(run.status).toBe("FAILED");
    expect((await engine.getRun(runId)).nodes.find((n) => n.node_id === "each")).toMatchObject({
      reason: "out_of_scope",
    });
    expect(await engine.listRuns({ workflow_id: "team-b-payroll" })).toEqual([]);
  });

  it("hides a child run out of scope from a scoped reader of its parent (getRun, events)", async () => {
    const { as, engine } = await api(store);
    await engine.registerWorkflow(childFlow("team-a-batch", "team-b-payroll"));
    const run = await engine.startRun("team-a-batch"); // the library: unscoped
    await engine.waitForRun(run.run_id);
    const [child] = (await engine.getRun(run.run_id)).children;
    const childId = child?.run_id as string;
    expect(childId).toBeTruthy();
    const got = await as(TEAM_A).get(`/v1/runs/${run.run_id}`);
    expect(got.statusCode).toBe(200);
    expect(got.body).not.toContain(childId);
    expect(got.json().children).toEqual([]);
    const events = await as(TEAM_A).get(`/v1/runs/${run.run_id}/events`);
    expect(events.body).not.toContain(childId);
    const started = events.json().events.find((e: RunEvent) => e.type === "node.started");
    expect(started.data.holder).toBe(`run:${HIDDEN_RUN}`);
    // An unscoped reader sees it.
    expect((await as(TOKENS.admin).get(`/v1/runs/${run.run_id}/events`)).body).toContain(childId);
  });

  it("tells a scoped reader of a failed child out of scope neither its id nor its error (getRun, events, graph)", async () => {
    const { as, engine } = await api(store);
    await engine.registerWorkflow({
      id: "team-b-secret",
      nodes: [{ node_id: "boom", agent_type: "wait_event", payload: { event: "go" } }],
    });
    await engine.registerWorkflow({
      id: "team-a-batch",
      nodes: [{ node_id: "child", agent_type: "workflow", payload: { workflow_id: "team-b-secret" }, retry_count: 0 }],
    });
    const waiting = nextEvent(engine, (e) => e.type === "node.waiting");
    const run = await engine.startRun("team-a-batch"); // the library: unscoped
    await waiting;
    const childId = (await engine.getRun(run.run_id)).children[0]?.run_id as string;
    await engine.cancelRun(childId, { reason: "payroll account 4711 frozen" });
    const ended = await engine.waitForRun(run.run_id);
    expect(ended.status).toBe("FAILED");
    // An unscoped reader sees the child and its reason.
    expect((await as(TOKENS.admin).get(`/v1/runs/${run.run_id}`)).body).toContain("4711");
    for (const url of [
      `/v1/runs/${run.run_id}`,
      `/v1/runs/${run.run_id}/events`,
      `/v1/runs/${run.run_id}/graph`,
      "/v1/runs?workflow_id=team-a-batch",
    ]) {
      const res = await as(TEAM_A).get(url);
      expect(res.statusCode, url).toBe(200);
      expect(res.body, url).not.toContain(childId);
      expect(res.body, url).not.toContain(childId.slice(0, 20)); // nor a cut of it (the graph's labels are short)
      expect(res.body, url).not.toContain("4711");
    }
    const node = (await as(TEAM_A).get(`/v1/runs/${run.run_id}`)).json().nodes[0];
    expect(node.error).toEqual({
      message: `child run ${HIDDEN_RUN} of team-b-secret was cancelled`,
      reason: "child_failed",
      details: { run_id: HIDDEN_RUN, status: "CANCELLED" },
    });
  });

  it("answers a run's scope and a schedule's over HTTP", async () => {
    const { as } = await api(store);
    const started = await as(TEAM_A).post("/v1/runs", { workflow_id: "team-a-line" });
    expect(started.json().scope).toEqual(["team-a-*"]);
    const got = await as(TEAM_A).get(`/v1/runs/${started.json().run_id}`);
    expect(got.json()).toMatchObject({ scope: ["team-a-*"], reserved: null });
    const listed = await as(TEAM_A).get("/v1/runs?workflow_id=team-a-line");
    expect(listed.json().runs[0].scope).toEqual(["team-a-*"]);
    const unscoped = await as(TOKENS.admin).post("/v1/runs", { workflow_id: "team-a-line" });
    expect(unscoped.json().scope).toBeNull();
    await as(TEAM_A).put("/v1/schedules/nightly", { workflow_id: "team-a-line", cron: "0 3 * * *" });
    expect((await as(TEAM_A).get("/v1/schedules/nightly")).json().scope).toEqual(["team-a-*"]);
    const schedules = (await as(TEAM_A).get("/v1/schedules")).json();
    expect(JSON.stringify(schedules)).toContain('"scope":["team-a-*"]');
  });

  it("delivers a scoped token's event by key only to runs of its workflows", async () => {
    const { as, engine } = await api(store);
    const wait = (id: string) => ({
      id,
      nodes: [{ node_id: "paid", agent_type: "wait_event", payload: { event: "paid", key: "{{ input.order }}" } }],
    });
    const runs: string[] = [];
    for (const id of ["team-a-order", "team-b-order"]) {
      await engine.registerWorkflow(wait(id));
      const parked = nextEvent(engine, (e) => e.type === "node.waiting");
      runs.push((await engine.startRun(id, { input: { order: "o-1" } })).run_id);
      await parked;
    }
    const res = await as(TEAM_A).post("/v1/events", { name: "paid", key: "o-1", payload: 1 });
    expect(res.statusCode).toBe(200);
    expect(res.json().delivered_to).toEqual([{ run_id: runs[0], node_id: "paid", visit: 1 }]);
    expect((await engine.getRun(runs[1] as string)).status).toBe("RUNNING");
    await as(TOKENS.admin).post("/v1/events", { name: "paid", key: "o-1", payload: 2 });
    expect((await engine.waitForRun(runs[1] as string)).output).toEqual({ paid: 2 });
  });

  it("keeps a scoped token's event by key in the buffer only for runs of its workflows", async () => {
    const { as, engine } = await api(store);
    const wait = (id: string) => ({
      id,
      nodes: [
        {
          node_id: "paid",
          agent_type: "wait_event",
          timeout: 3600,
          payload: { event: "paid", key: "{{ input.order }}", buffer_seconds: 60 },
        },
      ],
    });
    for (const id of ["team-a-order", "team-b-order"]) await engine.registerWorkflow(wait(id));
    // Published before any wait starts: kept for the waits that start within 60 s.
    const res = await as(TEAM_A).post("/v1/events", { name: "paid", key: "o-2", payload: 1 });
    expect(res.json().delivered_to).toEqual([]);
    // Another tenant's wait does not take it, and waits; team-a's takes it from the buffer.
    const parked = nextEvent(engine, (e) => e.type === "node.waiting");
    const other = (await engine.startRun("team-b-order", { input: { order: "o-2" } })).run_id;
    await parked;
    const own = (await engine.startRun("team-a-order", { input: { order: "o-2" } })).run_id;
    expect((await engine.waitForRun(own)).output).toEqual({ paid: 1 });
    expect((await engine.getRun(other)).status).toBe("RUNNING");
  });

  it("gives a schedule put by a scoped token that token's scope", async () => {
    const { as, engine } = await api(store);
    const res = await as(TEAM_A).put("/v1/schedules/nightly", { workflow_id: "team-a-line", cron: "0 3 * * *" });
    expect(res.statusCode).toBe(201);
    expect((await engine.getSchedule("nightly")).scope).toEqual(["team-a-*"]);
    await as(TOKENS.admin).put("/v1/schedules/nightly", { workflow_id: "team-a-line", cron: "0 3 * * *" });
    expect((await engine.getSchedule("nightly")).scope).toBeNull();
  });
});

describe.each(STORES)("engine keys (%s)", (store) => {
  it("refuses a client key with the engine's prefix, or with a NUL byte (400 naming the field)", async () => {
    const { as } = await api(store);
    const reserved = await as(TOKENS.admin).post("/v1/runs", {
      workflow_id: "team-a-line",
      idempotency_key: "skein:x",
    });
    expect(reserved.statusCode).toBe(400);
    expect(JSON.stringify(reserved.json().error)).toContain('may not start with \\"skein:\\"');
    const nul = await as(TOKENS.admin).post("/v1/runs", { workflow_id: "team-a-line", idempotency_key: "a\u0000b" });
    expect(nul.statusCode).toBe(400);
    expect(JSON.stringify(nul.json().error)).toContain("holds a NUL character");
  });

  it("starts a map's items and a child under keys a client's old-form keys cannot take", async () => {
    const { as, engine } = await api(store);
    await engine.registerWorkflow(mapFlow("team-a-fan", "team-a-line"));
    const runId = (await as(TOKENS.admin).post("/v1/runs", { workflow_id: "team-a-fan" })).json().run_id as string;
    // The keys older versions gave the map's items and their children, taken first by a client.
    for (const key of [`${runId}:each:1:1:0`, `${runId}:each:1:1:1`]) {
      expect(
        (await as(TOKENS.admin).post("/v1/runs", { workflow_id: "team-a-line", idempotency_key: key })).statusCode,
      ).toBe(201);
    }
    await as(TOKENS.admin).post(`/v1/runs/${runId}/events`, { name: "go" });
    expect((await engine.waitForRun(runId)).status).toBe("SUCCEEDED");
    expect((await as(TOKENS.admin).get("/v1/ready")).statusCode).toBe(200);
  });

  it("fails the visit, not the engine, when another run holds an item's engine key", async () => {
    const { as, engine, database } = await api(store);
    await engine.registerWorkflow(mapFlow("team-a-fan", "team-a-line"));
    const runId = (await as(TOKENS.admin).post("/v1/runs", { workflow_id: "team-a-fan" })).json().run_id as string;
    const squatter = (
      await as(TOKENS.admin).post("/v1/runs", { workflow_id: "team-a-line", idempotency_key: "mine" })
    ).json().run_id as string;
    // Written beside the engine, as only a direct write (or a key stored before it was reserved) could.
    await sqlOn(database, "UPDATE runs SET idempotency_key = $1 WHERE run_id = $2", [
      `skein:${runId}:each:1:1:1`,
      squatter,
    ]);
    await as(TOKENS.admin).post(`/v1/runs/${runId}/events`, { name: "go" });
    const run = await engine.waitForRun(runId);
    expect(run.status).toBe("FAILED");
    const node = (await engine.getRun(runId)).nodes.find((n) => n.node_id === "each");
    expect(node).toMatchObject({ state: "FAILED", reason: "idempotency_key_taken" });
    expect(node?.error?.message).toContain(`held by run ${squatter}`);
    // The engine goes on for everyone else.
    expect((await as(TOKENS.admin).get("/v1/ready")).statusCode).toBe(200);
    const other = await as(TOKENS.admin).post("/v1/runs", { workflow_id: "team-a-line" });
    expect((await engine.waitForRun(other.json().run_id)).status).toBe("SUCCEEDED");
  });

  it("fails a workflow node's visit when another run holds its child's engine key", async () => {
    const { as, engine, database } = await api(store);
    await engine.registerWorkflow({
      id: "team-a-parent",
      nodes: [
        { node_id: "go", agent_type: "wait_event", payload: { event: "go" } },
        { node_id: "child", agent_type: "workflow", depends_on: ["go"], payload: { workflow_id: "team-a-line" } },
      ],
    });
    const runId = (await as(TOKENS.admin).post("/v1/runs", { workflow_id: "team-a-parent" })).json().run_id as string;
    const squatter = (
      await as(TOKENS.admin).post("/v1/runs", { workflow_id: "team-a-line", idempotency_key: "mine" })
    ).json().run_id as string;
    await sqlOn(database, "UPDATE runs SET idempotency_key = $1 WHERE run_id = $2", [
      `skein:${runId}:child:1:1`,
      squatter,
    ]);
    await as(TOKENS.admin).post(`/v1/runs/${runId}/events`, { name: "go" });
    expect((await engine.waitForRun(runId)).status).toBe("FAILED");
    expect((await engine.getRun(runId)).nodes.find((n) => n.node_id === "child")).toMatchObject({
      reason: "idempotency_key_taken",
    });
    const cancel = await as(TOKENS.admin).post("/v1/runs", { workflow_id: "team-a-line" });
    expect(cancel.statusCode).toBe(201);
    expect((await as(TOKENS.admin).get("/v1/ready")).statusCode).toBe(200);
  });
});
