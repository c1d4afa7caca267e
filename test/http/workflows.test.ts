import { describe, expect, it } from "vitest";
import { ErrorSchema } from "../../src/http/schemas.js";
import { bearer, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

const admin = bearer(TOKENS.admin);

describe("workflows", () => {
  it("PUT registers a definition: 201 with a new version, 200 when unchanged, 201 again when changed", async () => {
    const { app } = await testApi();
    const put = (body: object) =>
      app.inject({ method: "PUT", url: "/v1/workflows/simple", headers: admin, payload: body });

    const first = await put(WORKFLOWS.simple);
    expect(first.statusCode).toBe(201);
    expect(first.json()).toEqual({
      id: "simple",
      version: 1,
      created: true,
      warnings: [],
      upgradable: { active: 0, checked: 0, compatible: 0 },
    });

    const again = await put(WORKFLOWS.simple);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toMatchObject({ version: 1, created: false });

    const changed = await put({ ...WORKFLOWS.simple, description: "now described" });
    expect(changed.statusCode).toBe(201);
    expect(changed.json()).toMatchObject({ version: 2, created: true });
  });

  it("PUT answers 400 listing every problem of a bad definition with its path; nothing is stored", async () => {
    const { app, engine } = await testApi();
    const res = await app.inject({
      method: "PUT",
      url: "/v1/workflows/bad",
      headers: admin,
      payload: {
        id: "bad",
        nodes: [
          { node_id: "a", agent_type: "writer" },
          { node_id: "b", timeout: -1 },
          { node_id: "not an id", agent_type: "writer" },
        ],
      },
    });
    expect(res.statusCode).toBe(400);
    const body = ErrorSchema.parse(res.json());
    expect(body.error.code).toBe("validation");
    const paths = (body.error.details.problems as { path: string }[]).map((p) => p.path);
    expect(paths).toEqual(expect.arrayContaining(["nodes[1].agent_type", "nodes[1].timeout", "nodes[2].node_id"]));
    expect(await engine.listWorkflows()).toEqual([]);
  });

  it("PUT refuses a document whose id differs from the URL's (400, path id)", async () => {
    const { app } = await testApi();
    const res = await app.inject({
      method: "PUT",
      url: "/v1/workflows/other",
      headers: admin,
      payload: WORKFLOWS.simple,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details.problems).toEqual([
      { path: "id", message: 'must be "other" (the id in the URL), got "simple"' },
    ]);
  });

  it("PUT of a body that is not an object is a 400 too", async () => {
    const { app } = await testApi();
    const res = await app.inject({ method: "PUT", url: "/v1/workflows/x", headers: admin, payload: [1, 2] });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe("validation");
  });

  it("GET lists workflows with their latest versions, and reads the latest or a given version", async () => {
    const { app, engine } = await testApi();
    await engine.registerWorkflow(WORKFLOWS.simple);
    await engine.registerWorkflow({ ...WORKFLOWS.simple, description: "v2" });

    const list = await app.inject({ url: "/v1/workflows", headers: admin });
    expect(list.statusCode).toBe(200);
    expect(list.json().workflows).toEqual([{ id: "simple", version: 2, created_at: expect.any(Number) }]);

    const latest = await app.inject({ url: "/v1/workflows/simple", headers: admin });
    expect(latest.json()).toMatchObject({ id: "simple", version: 2, definition: { description: "v2", version: 2 } });

    const v1 = await app.inject({ url: "/v1/workflows/simple?version=1", headers: admin });
    expect(v1.statusCode).toBe(200);
    expect(v1.json().definition).not.toHaveProperty("description");
  });

  it("GET answers 404 for an unknown workflow or version, 400 for a bad version", async () => {
    const { app, engine } = await testApi();
    await engine.registerWorkflow(WORKFLOWS.simple);
    const unknown = await app.inject({ url: "/v1/workflows/nope", headers: admin });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error).toMatchObject({ code: "not_found", message: expect.stringContaining("nope") });
    expect((await app.inject({ url: "/v1/workflows/simple?version=9", headers: admin })).statusCode).toBe(404);

    const bad = await app.inject({ url: "/v1/workflows/simple?version=first", headers: admin });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details.problems).toEqual([{ path: "query.version", message: expect.any(String) }]);
  });

  it("POST /validate checks a definition as PUT would and stores nothing: every error with its path, and warnings", async () => {
    const { app, engine } = await testApi();
    const validate = (payload: unknown, token: string = TOKENS.admin) =>
      app.inject({ method: "POST", url: "/v1/workflows/validate", headers: bearer(token), payload: payload as object });

    const bad = await validate({
      id: "bad",
      nodes: [
        { node_id: "a", agent_type: "writer" },
        { node_id: "b", agent_type: "writer", depends_on: ["nope"] },
      ],
    });
    expect(bad.statusCode).toBe(200);
    expect(bad.json()).toEqual({
      ok: false,
      errors: [{ path: "nodes[1].depends_on[0]", message: expect.stringContaining('unknown node "nope"') }],
      warnings: [],
    });

    // An agent type this server has no handler for is a warning, as PUT reports it; a reviewer may check too.
    const good = await validate({ id: "good", nodes: [{ node_id: "a", agent_type: "mystery" }] }, TOKENS.alice);
    expect(good.statusCode).toBe(200);
    expect(good.json()).toEqual({
      ok: true,
      errors: [],
      warnings: [{ path: "nodes[0].agent_type", message: expect.stringContaining("mystery") }],
    });

    const badSchema = await validate({ ...WORKFLOWS.simple, input_schema: { type: "nonsense" } });
    expect(badSchema.json()).toMatchObject({ ok: false, errors: [{ path: "input_schema" }] });

    expect(await engine.listWorkflows()).toEqual([]);
    expect((await validate(WORKFLOWS.simple, TOKENS.agent)).statusCode).toBe(403);
  });
});
