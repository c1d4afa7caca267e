/**
 * Forking over HTTP (DESIGN §16): POST /v1/runs/{run_id}/fork answers 201 with the new run;
 * refusals are the engine's, mapped by code; a scoped token forks only runs it may start.
 */
import { describe, expect, it } from "vitest";
import type { TokenEntry } from "../../src/http/auth.js";
import { RunSchema } from "../../src/http/schemas.js";
import { bearer, TOKEN_LIST, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

const TEAM_A = "team-a-admin-0123456789abcdef";
const TOKENS_WITH_SCOPE: TokenEntry[] = [
  ...TOKEN_LIST,
  { token: TEAM_A, role: "admin", name: "team-a", workflows: ["team-a-*"] },
];

async function api() {
  const t = await testApi({ server: { tokens: TOKENS_WITH_SCOPE } });
  await t.engine.registerWorkflow(WORKFLOWS.simple);
  await t.engine.registerWorkflow({ ...WORKFLOWS.simple, id: "team-a-line" });
  const fork = (token: string, runId: string, payload: object) =>
    t.app.inject({ method: "POST", url: `/v1/runs/${runId}/fork`, headers: bearer(token), payload });
  return { ...t, fork };
}

describe("POST /v1/runs/{run_id}/fork", () => {
  it("forks a finished run from a node with an edited payload: 201 with the new run, which keeps what came before", async () => {
    const { engine, fork } = await api();
    const source = await engine.startRun("simple");
    await engine.waitForRun(source.run_id);

    const res = await fork(TOKENS.admin, source.run_id, { from: "b", payloads: { b: { edited: true } } });
    expect(res.statusCode, res.body).toBe(201);
    const run = RunSchema.parse(res.json());
    expect(run.forked_from).toEqual({ run_id: source.run_id, node_id: "b" });
    expect(run.workflow_id).toBe("simple");
    await engine.waitForRun(run.run_id);
    const forked = (await engine.listEvents(run.run_id)).find((e) => e.type === "run.forked");
    expect(forked?.data).toMatchObject({ from_run_id: source.run_id, copied: ["a"], payloads_edited: ["b"] });
    expect((await engine.getRun(run.run_id)).nodes.find((n) => n.node_id === "b")?.payload).toEqual({ edited: true });
    // GET shows where it came from; the source says nothing of it.
    const read = RunSchema.parse((await engine.getRun(run.run_id)) as unknown);
    expect(read.forked_from?.node_id).toBe("b");
    expect((await engine.getRun(source.run_id)).forked_from).toBeNull();
  });

  it("answers 400 for a node the workflow has not and for a kept node's payload, 404 for an unknown run, 403 for a reviewer", async () => {
    const { engine, fork } = await api();
    const source = await engine.startRun("simple");
    await engine.waitForRun(source.run_id);

    const unknownNode = await fork(TOKENS.admin, source.run_id, { from: "zzz" });
    expect(unknownNode.statusCode).toBe(400);
    expect(unknownNode.json().error.details.problems).toEqual([
      { path: "from", message: 'workflow simple@1 has no node "zzz"' },
    ]);
    const kept = await fork(TOKENS.admin, source.run_id, { from: "b", payloads: { a: {} } });
    expect(kept.statusCode).toBe(400);
    expect(kept.json().error.details.problems[0]).toMatchObject({ path: "payloads.a" });
    expect((await fork(TOKENS.admin, "0190b3c4-0000-7000-8000-000000000000", { from: "a" })).statusCode).toBe(404);
    expect((await fork(TOKENS.alice, source.run_id, { from: "a" })).statusCode).toBe(403);
    expect((await fork(TOKENS.admin, source.run_id, { from: "a", extra: 1 })).statusCode).toBe(400);
  });

  it("lets a scoped token fork only runs of workflows it may start, and scopes the fork as it", async () => {
    const { engine, fork } = await api();
    const outside = await engine.startRun("simple");
    const inside = await engine.startRun("team-a-line", { scope: ["team-a-*"] });
    for (const r of [outside, inside]) await engine.waitForRun(r.run_id);

    expect((await fork(TEAM_A, outside.run_id, { from: "a" })).statusCode).toBe(404);
    const res = await fork(TEAM_A, inside.run_id, { from: "a" });
    expect(res.statusCode, res.body).toBe(201);
    expect(RunSchema.parse(res.json()).scope).toEqual(["team-a-*"]);
  });
});
