/** Run tags over HTTP (DESIGN §16): POST /v1/runs takes them, GET /v1/runs?tag=name:value filters by them. */
import { describe, expect, it } from "vitest";
import { RunSchema } from "../../src/http/schemas.js";
import { bearer, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

const admin = bearer(TOKENS.admin);

describe("run tags over HTTP", () => {
  it("starts a run with tags and lists runs by every tag given; a malformed tag is a 400", async () => {
    const { app, engine } = await testApi();
    await engine.registerWorkflow(WORKFLOWS.simple);
    const start = async (tags: Record<string, string>) => {
      const res = await app.inject({
        method: "POST",
        url: "/v1/runs",
        headers: admin,
        payload: { workflow_id: "simple", tags },
      });
      expect(res.statusCode, res.body).toBe(201);
      return RunSchema.parse(res.json());
    };
    const acme = await start({ customer: "acme", tier: "gold" });
    const globex = await start({ customer: "globex", tier: "gold" });
    expect(acme.tags).toEqual({ customer: "acme", tier: "gold" });
    const list = async (query: string) => {
      const res = await app.inject({ url: `/v1/runs?${query}`, headers: admin });
      expect(res.statusCode, res.body).toBe(200);
      return (res.json() as { runs: { run_id: string }[] }).runs.map((r) => r.run_id).sort();
    };
    expect(await list("tag=customer:acme")).toEqual([acme.run_id]);
    expect(await list("tag=tier:gold")).toEqual([acme.run_id, globex.run_id].sort());
    expect(await list("tag=tier:gold&tag=customer:globex")).toEqual([globex.run_id]);

    const bad = await app.inject({ url: "/v1/runs?tag=customer", headers: admin });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details.problems[0]).toMatchObject({ path: "query.tag" });
    const badStart = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: admin,
      payload: { workflow_id: "simple", tags: { "no spaces": "x" } },
    });
    expect(badStart.statusCode).toBe(400);
    expect(badStart.json().error.details.problems[0]).toMatchObject({ path: "tags.no spaces" });
  });
});
