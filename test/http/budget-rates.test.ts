/**
 * DESIGN §13.1 over the real HTTP server with real tokens: a scoped token's `budget` on
 * POST /v1/runs may only lower the workflow's (403 naming the field), an unscoped admin may
 * raise it; rates per token on starting runs, publishing events and posting progress (429 with
 * Retry-After), each token with its own bucket.
 */
import { describe, expect, it } from "vitest";
import type { TokenEntry } from "../../src/http/auth.js";
import { bearer, TOKEN_LIST, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

const TEAM_A = "team-a-admin-0123456789abcdef";
const TOKENS_WITH_SCOPE: TokenEntry[] = [
  ...TOKEN_LIST,
  { token: TEAM_A, role: "admin", name: "team-a", workflows: ["team-a-*"] },
];

/** A rate that never refills within a test: exactly `burst` requests pass. */
const only = (burst: number) => ({ perSecond: 0.001, burst });

describe("startRun's budget over HTTP", () => {
  it("a scoped token may lower the workflow's budget, never raise it; an unscoped admin may", async () => {
    const { app, engine } = await testApi({ server: { tokens: TOKENS_WITH_SCOPE } });
    await engine.registerWorkflow({ ...WORKFLOWS.simple, id: "team-a-chat", budget: { max_tokens: 100 } });
    const start = (token: string, budget: object) =>
      app.inject({
        method: "POST",
        url: "/v1/runs",
        headers: bearer(token),
        payload: { workflow_id: "team-a-chat", budget },
      });

    const lowered = await start(TEAM_A, { max_tokens: 50, max_cost: 2 }); // max_cost: unlimited in the workflow
    expect(lowered.statusCode).toBe(201);
    expect(lowered.json().budget).toEqual({ max_tokens: 50, max_cost: 2 });

    const raised = await start(TEAM_A, { max_tokens: 500 });
    expect(raised.statusCode).toBe(403);
    expect(raised.json().error.message).toMatch(
      /budget\.max_tokens may only lower .*"team-a-chat", whose max_tokens is 100/,
    );
    // Leaving out a figure the workflow sets is no limit: a raise too.
    const dropped = await start(TEAM_A, { max_cost: 1 });
    expect(dropped.statusCode).toBe(403);
    expect(dropped.json().error.message).toMatch(/max_tokens is 100; this request leaves it out/);
    expect((await engine.listRuns({ workflow_id: "team-a-chat" })).length).toBe(1); // nothing else started

    const byAdmin = await start(TOKENS.admin, { max_tokens: 500 });
    expect(byAdmin.statusCode).toBe(201);
    expect(byAdmin.json().budget).toEqual({ max_tokens: 500 });
  });
});

describe("rates per token", () => {
  it("refuses run starts past the token's rate with 429 and Retry-After; another token has its own", async () => {
    const { app, engine } = await testApi({
      server: { tokens: TOKENS_WITH_SCOPE, limits: { startRate: only(2) } },
    });
    await engine.registerWorkflow({ ...WORKFLOWS.simple, id: "team-a-chat" });
    const start = (token: string) =>
      app.inject({ method: "POST", url: "/v1/runs", headers: bearer(token), payload: { workflow_id: "team-a-chat" } });
    expect((await start(TEAM_A)).statusCode).toBe(201);
    expect((await start(TEAM_A)).statusCode).toBe(201);
    const refused = await start(TEAM_A);
    expect(refused.statusCode).toBe(429);
    expect(refused.headers["retry-after"]).toMatch(/^[1-9][0-9]*$/);
    expect(refused.json().error.message).toMatch(/token "team-a" sent more than 0.001 run starts and retries a second/);
    expect((await engine.listRuns({ workflow_id: "team-a-chat" })).length).toBe(2);
    expect((await start(TOKENS.admin)).statusCode).toBe(201);
  });

  it("refuses events sent or published past the token's rate, and progress posts past theirs", async () => {
    const { app, engine } = await testApi({
      server: { limits: { eventRate: only(2), progressRate: only(1) } },
    });
    await engine.registerWorkflow(WORKFLOWS.simple);
    const run = await engine.startRun(WORKFLOWS.simple.id);
    const post = (url: string, payload: object, token: string = TOKENS.admin) =>
      app.inject({ method: "POST", url, headers: bearer(token), payload });

    expect((await post("/v1/events", { name: "paid", key: "o-1" })).statusCode).toBe(200);
    expect((await post(`/v1/runs/${run.run_id}/events`, { name: "paid" })).statusCode).not.toBe(429);
    const refused = await post("/v1/events", { name: "paid", key: "o-2" });
    expect(refused.statusCode).toBe(429);
    expect(refused.headers["retry-after"]).toMatch(/^[1-9][0-9]*$/);
    expect((await post(`/v1/runs/${run.run_id}/events`, { name: "paid" })).statusCode).toBe(429);

    // Progress is counted before the task is looked up: the second post of the token is refused.
    const progress = { attempt: 1, worker_id: "w1", progress: { step: 1 } };
    const first = await post(`/v1/tasks/${run.run_id}:a:1/progress`, progress, TOKENS.agent);
    expect(first.statusCode).not.toBe(429);
    const second = await post(`/v1/tasks/${run.run_id}:a:1/progress`, progress, TOKENS.agent);
    expect(second.statusCode).toBe(429);
    expect(second.json().error.message).toMatch(/progress posts/);
  });
});
