import { Writable } from "node:stream";
import { inspect } from "node:util";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { parseTokens, Tokens } from "../../src/http/auth.js";
import { ValidationError } from "../../src/index.js";
import { bearer, TOKEN_LIST, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

type Role = "admin" | "reviewer" | "agent";

/** One request per route (the review one against a node that does not wait: 404 past auth). */
const CALLS: { name: string; method: "GET" | "POST" | "PUT"; url: string; body?: object; allowed: Role[] }[] = [
  { name: "list workflows", method: "GET", url: "/v1/workflows", allowed: ["admin", "reviewer"] },
  { name: "read a workflow", method: "GET", url: "/v1/workflows/simple", allowed: ["admin", "reviewer"] },
  { name: "register", method: "PUT", url: "/v1/workflows/simple", body: WORKFLOWS.simple, allowed: ["admin"] },
  { name: "start", method: "POST", url: "/v1/runs", body: { workflow_id: "simple" }, allowed: ["admin"] },
  { name: "list runs", method: "GET", url: "/v1/runs", allowed: ["admin", "reviewer"] },
  { name: "read a run", method: "GET", url: "/v1/runs/RUN", allowed: ["admin", "reviewer"] },
  { name: "events", method: "GET", url: "/v1/runs/RUN/events", allowed: ["admin", "reviewer"] },
  { name: "graph", method: "GET", url: "/v1/runs/RUN/graph", allowed: ["admin", "reviewer"] },
  { name: "cancel", method: "POST", url: "/v1/runs/RUN/cancel", body: {}, allowed: ["admin"] },
  { name: "retry", method: "POST", url: "/v1/runs/RUN/retry", body: {}, allowed: ["admin"] },
  { name: "reviews", method: "GET", url: "/v1/reviews", allowed: ["admin", "reviewer"] },
  {
    name: "decide",
    method: "POST",
    url: "/v1/runs/RUN/nodes/ghost/review",
    body: { decision: "approve" },
    allowed: ["admin", "reviewer"],
  },
];

const TOKEN_OF: Record<Role, string> = { admin: TOKENS.admin, reviewer: TOKENS.alice, agent: TOKENS.agent };

async function withRun() {
  const t = await testApi();
  await t.engine.registerWorkflow(WORKFLOWS.simple);
  const run = await t.engine.startRun("simple");
  await t.engine.waitForRun(run.run_id);
  const call = (c: (typeof CALLS)[number], headers: Record<string, string>) =>
    t.app.inject({
      method: c.method,
      url: c.url.replace("RUN", run.run_id),
      headers,
      ...(c.body ? { payload: c.body } : {}),
    });
  return { ...t, call };
}

describe("bearer tokens", () => {
  it("each role reaches what it may and gets 403 elsewhere", async () => {
    const { call } = await withRun();
    for (const role of ["admin", "reviewer", "agent"] as const) {
      for (const c of CALLS) {
        const res = await call(c, bearer(TOKEN_OF[role]));
        const label = `${role} ${c.name}: ${res.statusCode} ${res.body}`;
        if (c.allowed.includes(role)) {
          expect(res.statusCode, label).not.toBe(401);
          expect(res.statusCode, label).not.toBe(403);
        } else {
          expect(res.statusCode, label).toBe(403);
          expect(res.json().error.code, label).toBe("forbidden");
        }
      }
    }
  });

  it("answers 401 to a missing, unknown or malformed token on every guarded route", async () => {
    const { call } = await withRun();
    for (const c of CALLS) {
      for (const headers of [{}, bearer("not-a-configured-token-000"), { authorization: `Basic ${TOKENS.admin}` }]) {
        const res = await call(c, headers);
        expect(res.statusCode, `${c.name} ${JSON.stringify(headers)}`).toBe(401);
        expect(res.headers["www-authenticate"]).toMatch(/^Bearer/);
        expect(res.json().error.code).toBe("unauthorized");
      }
    }
  });

  it("health, ready and the OpenAPI document need no token, and any token may call them", async () => {
    const { app } = await testApi();
    for (const url of ["/v1/health", "/v1/ready", "/v1/openapi.json"]) {
      expect((await app.inject({ url })).statusCode, url).toBe(200);
      expect((await app.inject({ url, headers: bearer(TOKENS.agent) })).statusCode, url).toBe(200);
    }
  });

  it("with no tokens configured the API is open", async () => {
    const { app } = await testApi({ open: true });
    expect((await app.inject({ url: "/v1/runs" })).statusCode).toBe(200);
    expect(
      (await app.inject({ method: "PUT", url: "/v1/workflows/simple", payload: WORKFLOWS.simple })).statusCode,
    ).toBe(201);
  });

  it("keeps only hashes of the tokens", () => {
    const tokens = new Tokens(TOKEN_LIST);
    const dump = inspect(tokens, { depth: 10, showHidden: true });
    for (const token of Object.values(TOKENS)) expect(dump).not.toContain(token);
    expect(tokens.find(TOKENS.alice)).toEqual({ role: "reviewer", name: "alice", agent_types: null, workflows: null });
    expect(tokens.find(`${TOKENS.alice}x`)).toBeNull();
  });

  it("never logs the Authorization header; logs carry the request's trace id", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const { app } = await testApi({ server: { logger: pino({ level: "trace" }, sink) } });
    const trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    await app.inject({
      url: "/v1/runs",
      headers: { ...bearer(TOKENS.admin), traceparent: `00-${trace}-00f067aa0ba902b7-01` },
    });
    await app.inject({ url: "/v1/runs", headers: bearer(TOKENS.alice.replace("alice", "mallory")) });
    const log = lines.join("");
    expect(log).toContain(`"trace_id":"${trace}"`);
    expect(log).toContain('"statusCode":401');
    expect(log).not.toMatch(/authorization/i);
    expect(log).not.toContain(TOKENS.admin);
    expect(log).not.toContain("mallory");
  });
});

describe("token lists", () => {
  it("parse a valid list", () => {
    expect(parseTokens(JSON.stringify(TOKEN_LIST), "tokens.json")).toHaveLength(4);
  });

  it("report every problem with its path", () => {
    const text = JSON.stringify([
      { token: "short", role: "boss", name: "x" },
      { token: TOKENS.agent, role: "agent", name: "w" },
      { token: TOKENS.admin, role: "admin", name: "a", extra: true },
      { token: TOKENS.admin, role: "admin", name: "b" },
    ]);
    let error: unknown;
    try {
      parseTokens(text, "tokens.json");
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).message).toMatch(/^tokens\.json is not a valid token list/);
    expect((error as ValidationError).problems).toEqual([
      { path: "[0].token", message: expect.stringContaining("at least 16 characters") },
      { path: "[0].role", message: expect.stringContaining('"admin", "agent", "reviewer"') },
      { path: "[1].agent_types", message: "an agent token must list the agent types it may claim" },
      { path: "[2]", message: 'unknown field "extra"' },
      { path: "[3].token", message: "the same token as [2]: tokens must differ" },
    ]);
  });

  it("say so when the text is not JSON or not a list", () => {
    expect(() => parseTokens("{nope", "SKEIN_TOKENS")).toThrow(/^SKEIN_TOKENS is not JSON/);
    expect(() => parseTokens("{}", "SKEIN_TOKENS")).toThrow(ValidationError);
  });
});
