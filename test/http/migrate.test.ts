/**
 * POST /v1/workflows/{id}/migrate (DESIGN §16): a dry run, the move, runs refused with their
 * reasons; PUT's answer says how many runs could move; admins of the workflow's scope only.
 */
import { describe, expect, it } from "vitest";
import type { TokenEntry } from "../../src/http/auth.js";
import type { Engine, RunEvent } from "../../src/index.js";
import { bearer, TOKEN_LIST, TOKENS, testApi } from "./helpers.js";

const admin = bearer(TOKENS.admin);
const OTHER_TEAM = "admin-other-team-0123456789";
const tokens: TokenEntry[] = [
  ...TOKEN_LIST,
  { token: OTHER_TEAM, role: "admin", name: "other", workflows: ["other-*"] },
];

const REVIEW = { node_id: "review", agent_type: "human_review", payload: { title: "ok?" } };
const V1 = { id: "post", nodes: [{ node_id: "draft", agent_type: "writer", next_on_success: "review" }, REVIEW] };
const V2 = {
  id: "post",
  nodes: [
    { node_id: "draft", agent_type: "writer", next_on_success: "review" },
    { ...REVIEW, next_on_success: "publish" },
    { node_id: "publish", agent_type: "writer" },
  ],
};
const V3 = { id: "post", nodes: [{ node_id: "draft", agent_type: "writer" }] };

function reviewRequested(engine: Engine, runId: string): Promise<RunEvent> {
  return new Promise((resolve) => {
    const off = engine.subscribe((e) => {
      if (e.type === "review.requested" && e.run_id === runId) {
        off();
        resolve(e);
      }
    });
  });
}

describe("POST /v1/workflows/{id}/migrate", () => {
  it("answers a dry run, moves the runs the rule allows, and refuses the others with every reason", async () => {
    const { app, engine } = await testApi({ server: { tokens } });
    const put = (body: object) =>
      app.inject({ method: "PUT", url: "/v1/workflows/post", headers: admin, payload: body });
    const migrate = (payload: object, headers = admin) =>
      app.inject({ method: "POST", url: "/v1/workflows/post/migrate", headers, payload });
    expect((await put(V1)).statusCode).toBe(201);
    const run = await engine.startRun("post");
    await reviewRequested(engine, run.run_id);

    const v2 = await put(V2);
    expect(v2.json()).toMatchObject({ version: 2, upgradable: { active: 1, checked: 1, compatible: 1 } });
    const v3 = await put(V3);
    expect(v3.json()).toMatchObject({ version: 3, upgradable: { active: 1, checked: 1, compatible: 0 } });

    const refused = await migrate({ to_version: 3 });
    expect(refused.statusCode).toBe(200);
    expect(refused.json()).toEqual({
      moved: [],
      incompatible: [
        {
          run_id: run.run_id,
          from_version: 1,
          reasons: [
            'node "draft" fired the edge draft → review (next_on_success), which the new version no longer has',
            'node "review" has a visit (IN_REVIEW) but the new version has no such node',
          ],
        },
      ],
      dry_run: false,
    });

    const dry = await migrate({ to_version: 2, dry_run: true, run_ids: [run.run_id] });
    expect(dry.json()).toEqual({ moved: [{ run_id: run.run_id, from_version: 1 }], incompatible: [], dry_run: true });
    expect((await engine.getRun(run.run_id)).workflow_version).toBe(1);

    // Another team's admin does not see the workflow.
    expect((await migrate({ to_version: 2 }, bearer(OTHER_TEAM))).statusCode).toBe(404);
    expect((await migrate({ to_version: 2 }, bearer(TOKENS.alice))).statusCode).toBe(403);

    const moved = await migrate({ to_version: 2, from_version: 1 });
    expect(moved.json()).toEqual({
      moved: [{ run_id: run.run_id, from_version: 1 }],
      incompatible: [],
      dry_run: false,
    });
    expect((await engine.getRun(run.run_id)).workflow_version).toBe(2);
  });

  it("answers 400 for a bad body and 404 for an unknown version", async () => {
    const { app } = await testApi();
    await app.inject({ method: "PUT", url: "/v1/workflows/post", headers: admin, payload: V1 });
    const migrate = (payload: object) =>
      app.inject({ method: "POST", url: "/v1/workflows/post/migrate", headers: admin, payload });
    expect((await migrate({ to_version: 0 })).statusCode).toBe(400);
    expect((await migrate({ to_version: 2, extra: true })).statusCode).toBe(400);
    const older = await migrate({ to_version: 1, from_version: 1 });
    expect(older.statusCode).toBe(400);
    expect(older.json().error.details.problems).toEqual([
      { path: "from_version", message: "must be older than to_version (1): runs move to a newer version only" },
    ]);
    expect((await migrate({ to_version: 5 })).statusCode).toBe(404);
  });
});
