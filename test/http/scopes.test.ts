/**
 * Token scopes by workflow (DESIGN §13): a token with `workflows` sees, starts, decides and
 * streams only runs of the workflows its patterns match; other runs are 404, as if they did not exist.
 */
import { afterEach, describe, expect, it } from "vitest";
import { checkTokens, type TokenEntry } from "../../src/http/auth.js";
import { nextEvent } from "../helpers.js";
import { bearer, TOKEN_LIST, TOKENS, testApi, WORKFLOWS } from "./helpers.js";
import { closeStreams, openStream } from "./sse.js";

const ORDERS_ADMIN = "orders-admin-0123456789abcdef";
const ORDERS_REVIEWER = "orders-reviewer-0123456789abc";

const SCOPED: TokenEntry[] = [
  ...TOKEN_LIST,
  { token: ORDERS_ADMIN, role: "admin", name: "orders-ops", workflows: ["order-*"] },
  { token: ORDERS_REVIEWER, role: "reviewer", name: "alice", workflows: ["order-*", "refund"] },
];

/** The review workflow under another id. */
const review = (id: string) => ({ ...WORKFLOWS.review, id });

/** An API with runs waiting for alice's review in order-eu (in scope) and in payroll (not). */
async function scopedApi() {
  const t = await testApi({ server: { tokens: SCOPED } });
  for (const id of ["order-eu", "payroll"]) await t.engine.registerWorkflow(review(id));
  const runs: Record<string, string> = {};
  for (const id of ["order-eu", "payroll"]) {
    const asked = nextEvent(t.engine, (e) => e.type === "review.requested");
    runs[id] = (await t.engine.startRun(id)).run_id;
    await asked;
  }
  const as = (token: string) => ({
    get: (url: string) => t.app.inject({ url, headers: bearer(token) }),
    post: (url: string, payload: object) => t.app.inject({ method: "POST", url, headers: bearer(token), payload }),
  });
  return { ...t, runs, as };
}

describe("token scopes by workflow", () => {
  it("lists only the runs, workflows and reviews of the token's workflows", async () => {
    const { as, runs } = await scopedApi();
    const scoped = as(ORDERS_REVIEWER);
    const listed = (await scoped.get("/v1/runs")).json().runs.map((r: { run_id: string }) => r.run_id);
    expect(listed).toEqual([runs["order-eu"]]);
    expect((await scoped.get("/v1/runs?workflow_id=payroll")).json().runs).toEqual([]);
    expect((await scoped.get("/v1/workflows")).json().workflows.map((w: { id: string }) => w.id)).toEqual(["order-eu"]);
    const reviews = (await scoped.get("/v1/reviews")).json().reviews;
    expect(reviews.map((r: { run_id: string; workflow_id: string }) => [r.run_id, r.workflow_id])).toEqual([
      [runs["order-eu"], "order-eu"],
    ]);
    // An unscoped token still sees everything.
    expect((await as(TOKENS.alice).get("/v1/runs")).json().runs).toHaveLength(2);
  });

  it("lists only the child runs of the token's workflows on a run it may read", async () => {
    const { as, engine } = await scopedApi();
    await engine.registerWorkflow(WORKFLOWS.simple);
    await engine.registerWorkflow({ ...WORKFLOWS.simple, id: "order-line" });
    await engine.registerWorkflow({
      id: "order-batch",
      nodes: [
        { node_id: "mine", agent_type: "workflow", payload: { workflow_id: "order-line" } },
        { node_id: "other", agent_type: "workflow", payload: { workflow_id: "simple" } },
      ],
    });
    const run = await engine.startRun("order-batch");
    await engine.waitForRun(run.run_id);
    const children = (url: string, token: string) =>
      as(token)
        .get(url)
        .then((r) => r.json().children.map((c: { node_id: string }) => c.node_id));
    expect(await children(`/v1/runs/${run.run_id}`, ORDERS_ADMIN)).toEqual(["mine"]);
    expect(await children(`/v1/runs/${run.run_id}`, TOKENS.admin)).toEqual(["mine", "other"]);
  });

  it("pages through the scoped list without runs of other workflows", async () => {
    const { as, engine } = await scopedApi();
    await engine.registerWorkflow(WORKFLOWS.simple);
    await engine.registerWorkflow({ ...WORKFLOWS.simple, id: "order-us" });
    for (let i = 0; i < 3; i++) {
      await engine.startRun("simple");
      await engine.startRun("order-us");
    }
    const seen: string[] = [];
    let url = "/v1/runs?limit=2";
    for (;;) {
      const page = (await as(ORDERS_ADMIN).get(url)).json();
      seen.push(...page.runs.map((r: { workflow_id: string }) => r.workflow_id));
      if (page.next_cursor === null) break;
      url = `/v1/runs?limit=2&cursor=${page.next_cursor}`;
    }
    expect(seen.sort()).toEqual(["order-eu", "order-us", "order-us", "order-us"]);
  });

  it("answers another workflow's run, events and graph 404, like a run that does not exist", async () => {
    const { as, runs } = await scopedApi();
    const scoped = as(ORDERS_REVIEWER);
    for (const path of ["", "/events", "/graph"]) {
      expect((await scoped.get(`/v1/runs/${runs["order-eu"]}${path}`)).statusCode).toBe(200);
      const other = await scoped.get(`/v1/runs/${runs.payroll}${path}`);
      expect(other.statusCode).toBe(404);
      const unknown = await scoped.get(`/v1/runs/no-such-run${path}`);
      expect(other.json().error.message).toBe(unknown.json().error.message.replace("no-such-run", runs.payroll));
    }
    expect((await scoped.get("/v1/workflows/payroll")).statusCode).toBe(404);
    expect((await scoped.get("/v1/workflows/order-eu")).statusCode).toBe(200);
  });

  it("refuses a decision on another workflow's review and leaves it waiting", async () => {
    const { as, runs, engine } = await scopedApi();
    const scoped = as(ORDERS_REVIEWER);
    const refused = await scoped.post(`/v1/runs/${runs.payroll}/nodes/check/review`, { decision: "approve" });
    expect(refused.statusCode).toBe(404);
    const payroll = await engine.getRun(runs.payroll ?? "");
    expect(payroll.nodes.find((n) => n.node_id === "check")?.state).toBe("IN_REVIEW");
    const ok = await scoped.post(`/v1/runs/${runs["order-eu"]}/nodes/check/review`, { decision: "approve" });
    expect(ok.statusCode).toBe(200);
  });

  it("starts only runs of the token's workflows (403), and cancels or retries only theirs (404)", async () => {
    const { as, runs, engine } = await scopedApi();
    const admin = as(ORDERS_ADMIN);
    const refused = await admin.post("/v1/runs", { workflow_id: "payroll" });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.message).toContain("order-*");
    expect((await admin.post("/v1/runs", { workflow_id: "order-eu" })).statusCode).toBe(201);
    expect((await admin.post(`/v1/runs/${runs.payroll}/cancel`, {})).statusCode).toBe(404);
    expect((await admin.post(`/v1/runs/${runs.payroll}/retry`, {})).statusCode).toBe(404);
    expect((await engine.getRun(runs.payroll ?? "")).status).toBe("RUNNING");
  });

  it("does not name another workflow's run that holds the idempotency key it sends", async () => {
    const { as, engine } = await scopedApi();
    const payroll = await engine.startRun("payroll", { idempotency_key: "march-2026" });
    const reused = await as(ORDERS_ADMIN).post("/v1/runs", { workflow_id: "order-eu", idempotency_key: "march-2026" });
    expect(reused.statusCode).toBe(409);
    expect(reused.json().error.message).toContain("march-2026");
    expect(reused.body).not.toContain(payroll.run_id);
    // An unscoped admin is still told which run holds it.
    const told = await as(TOKENS.admin).post("/v1/runs", { workflow_id: "order-eu", idempotency_key: "march-2026" });
    expect(told.json().error.message).toContain(payroll.run_id);
  });

  it("registers only the token's workflows", async () => {
    const { app } = await scopedApi();
    const put = (id: string) =>
      app.inject({ method: "PUT", url: `/v1/workflows/${id}`, headers: bearer(ORDERS_ADMIN), payload: review(id) });
    expect((await put("payroll")).statusCode).toBe(403);
    expect((await put("order-new")).statusCode).toBe(201);
  });

  it("keeps scoped tokens off routes that do not honour scopes (the external-agent protocol)", async () => {
    const { as } = await scopedApi();
    const res = await as(ORDERS_ADMIN).post("/v1/tasks/claim", { agent_types: ["writer"], worker_id: "w1" });
    expect(res.statusCode).toBe(403);
    expect(res.json().error.message).toContain("scoped to workflows");
  });

  it("says who the token is, with its scope", async () => {
    const { as } = await scopedApi();
    expect((await as(ORDERS_REVIEWER).get("/v1/me")).json()).toEqual({
      role: "reviewer",
      name: "alice",
      agent_types: null,
      workflows: ["order-*", "refund"],
    });
  });
});

describe("scoped event streams", () => {
  afterEach(closeStreams);
  const open = (base: string, path: string, token: string) => openStream(base, path, bearer(token));

  it("streams only events of the token's workflows, and refuses another workflow's run (404)", async () => {
    const { app, engine, runs } = await scopedApi();
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const stream = await open(base, "/v1/stream", ORDERS_REVIEWER);
    expect((await open(base, `/v1/stream?run_id=${runs.payroll}`, ORDERS_REVIEWER)).status).toBe(404);
    expect((await open(base, `/v1/stream?run_id=${runs["order-eu"]}`, ORDERS_REVIEWER)).status).toBe(200);
    await engine.registerWorkflow({ ...WORKFLOWS.simple, id: "order-us" });
    await engine.registerWorkflow(WORKFLOWS.simple);
    // Runs before the stream (decided now) and new ones, in and out of scope.
    await engine.review(runs.payroll ?? "", "check", { decision: "reject", by: "alice" });
    await engine.review(runs["order-eu"] ?? "", "check", { decision: "reject", by: "alice" });
    await engine.waitForRun((await engine.startRun("simple")).run_id);
    const last = await engine.startRun("order-us");
    await engine.waitForRun(last.run_id);
    await stream.until((s) => s.events.some((e) => e.run_id === last.run_id && e.type === "run.succeeded"));
    expect(new Set(stream.events.map((e) => e.run_id))).toEqual(new Set([runs["order-eu"], last.run_id]));
  });
});

describe("scoped tokens in the tokens file", () => {
  it("refuses bad patterns, an empty list and a scoped agent token, with their paths", () => {
    const base = { token: "x".repeat(32), name: "n" };
    expect(() =>
      checkTokens([
        { ...base, role: "admin", workflows: ["Order?"] },
        { ...base, token: "y".repeat(32), role: "reviewer", workflows: [] },
        { ...base, token: "z".repeat(32), role: "agent", agent_types: ["a"], workflows: ["order-*"] },
      ]),
    ).toThrow(
      expect.objectContaining({
        problems: [
          { path: "[0].workflows[0]", message: expect.stringContaining("pattern") },
          { path: "[1].workflows", message: "must not be empty" },
          { path: "[2].workflows", message: expect.stringContaining("only admin and reviewer") },
        ],
      }),
    );
  });
});

describe("scopes and map item workflows", () => {
  it("puts a map's item runs (<workflow_id>/<node_id>) in the scope of their workflow, and only of it", async () => {
    const { WorkflowScope } = await import("../../src/http/scope.js");
    expect(new WorkflowScope(["fanout"]).allows("fanout/answer")).toBe(true);
    expect(new WorkflowScope(["fan*"]).allows("fanout/answer")).toBe(true);
    expect(new WorkflowScope(["*answer"]).allows("fanout/answer")).toBe(false);
    expect(new WorkflowScope(["other"]).allows("fanout/answer")).toBe(false);
  });
});
