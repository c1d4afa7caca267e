/**
 * POST /v1/runs/bulk (DESIGN §16): a dry run counts, the action applies to the runs the filter
 * matches, a scoped token's filter is held to its workflows, and a bad body is a 400 with its path.
 */
import { describe, expect, it } from "vitest";
import type { TokenEntry } from "../../src/http/auth.js";
import type { Engine } from "../../src/index.js";
import { bearer, TOKEN_LIST, TOKENS, testApi } from "./helpers.js";

const TEAM_A = "team-a-admin-0123456789abcdef";
/** A node nothing serves: its runs stay RUNNING. */
const waits = (id: string) => ({ id, nodes: [{ node_id: "w", agent_type: "outside" }] });

async function api() {
  const tokens: TokenEntry[] = [
    ...TOKEN_LIST,
    { token: TEAM_A, role: "admin", name: "team-a", workflows: ["team-a-*"] },
  ];
  const t = await testApi({ server: { tokens } });
  for (const id of ["team-a-line", "team-b-payroll"]) await t.engine.registerWorkflow(waits(id));
  const bulk = (payload: object, token: string = TOKENS.admin) =>
    t.app.inject({ method: "POST", url: "/v1/runs/bulk", headers: bearer(token), payload });
  return { ...t, bulk };
}

async function statuses(engine: Engine, ids: string[]): Promise<string[]> {
  return Promise.all(ids.map(async (id) => (await engine.getRun(id)).status));
}

describe("POST /v1/runs/bulk", () => {
  it("counts with dry_run, then cancels exactly the runs carrying the tag, at most cap a call", async () => {
    const { engine, bulk } = await api();
    const tagged = [];
    for (let i = 0; i < 3; i++) tagged.push((await engine.startRun("team-a-line", { tags: { batch: "x" } })).run_id);
    const other = (await engine.startRun("team-a-line")).run_id;
    const filter = { tags: { batch: "x" } };

    const dry = await bulk({ filter, action: { kind: "cancel" }, dry_run: true });
    expect(dry.statusCode, dry.body).toBe(200);
    expect(dry.json()).toMatchObject({ matched: 3, applied: 0, refused: [], more: false, dry_run: true });
    expect(await statuses(engine, [...tagged, other])).toEqual(Array(4).fill("RUNNING"));

    const first = await bulk({ filter, action: { kind: "cancel", reason: "recall" }, cap: 2 });
    expect(first.json()).toMatchObject({ matched: 2, applied: 2, more: true });
    const second = await bulk({ filter, action: { kind: "cancel", reason: "recall" }, cap: 2 });
    expect(second.json()).toMatchObject({ matched: 1, applied: 1, more: false, next_before: null });
    expect(await statuses(engine, tagged)).toEqual(Array(3).fill("CANCELLED"));
    expect(await statuses(engine, [other])).toEqual(["RUNNING"]);

    // Retry the cancelled ones back.
    const retried = await bulk({ filter, action: { kind: "retry" } });
    expect(retried.json()).toMatchObject({ matched: 3, applied: 3, refused: [] });
    expect(await statuses(engine, tagged)).toEqual(Array(3).fill("RUNNING"));
  });

  it("holds a scoped token to its workflows' runs", async () => {
    const { engine, bulk } = await api();
    const a = (await engine.startRun("team-a-line")).run_id;
    const b = (await engine.startRun("team-b-payroll")).run_id;
    const scoped = await bulk({ filter: {}, action: { kind: "cancel" } }, TEAM_A);
    expect(scoped.json()).toMatchObject({ matched: 1, applied: 1, run_ids: [a] });
    const named = await bulk({ filter: { workflow_id: "team-b-payroll" }, action: { kind: "cancel" } }, TEAM_A);
    expect(named.json()).toMatchObject({ matched: 0, applied: 0 });
    expect(await statuses(engine, [a, b])).toEqual(["CANCELLED", "RUNNING"]);
    // Reviewers may not act at all.
    expect((await bulk({ filter: {}, action: { kind: "cancel" } }, TOKENS.alice)).statusCode).toBe(403);
  });

  it("refuses a bad body with its path: a cap over the maximum, an unknown action, a version without its workflow", async () => {
    const { bulk } = await api();
    const problem = async (payload: object) => {
      const res = await bulk(payload);
      expect(res.statusCode, res.body).toBe(400);
      return (res.json() as { error: { details: { problems: { path: string }[] } } }).error.details.problems[0]?.path;
    };
    expect(await problem({ filter: {}, action: { kind: "cancel" }, cap: 10_001 })).toBe("body.cap");
    expect(await problem({ filter: {}, action: { kind: "explode" } })).toMatch(/^body\.action/);
    expect(await problem({ filter: { workflow_version: 2 }, action: { kind: "cancel" } })).toBe(
      "filter.workflow_version",
    );
    expect(await problem({ filter: { q: "ab" }, action: { kind: "cancel" } })).toBe("body.filter.q");
  });
});
