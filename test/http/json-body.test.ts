/**
 * Request bodies are stored as received or refused (DESIGN §13): what JSON.parse would change
 * silently (invalid UTF-8, integers beyond 2^53, numbers past a float's range) or what could
 * poison a prototype is a 400 with the path, and no run is stored.
 */
import { describe, expect, it } from "vitest";
import { bearer, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

const json = { ...bearer(TOKENS.admin), "content-type": "application/json" };

async function api() {
  const t = await testApi();
  await t.engine.registerWorkflow(WORKFLOWS.simple);
  const start = (payload: string | Buffer) => t.app.inject({ method: "POST", url: "/v1/runs", headers: json, payload });
  const runs = async () => (await t.app.inject({ method: "GET", url: "/v1/runs", headers: json })).json().runs;
  return { ...t, start, runs };
}

describe("strict JSON bodies", () => {
  it("refuses invalid UTF-8 with the byte offset instead of storing U+FFFD", async () => {
    const { start, runs } = await api();
    const head = Buffer.from('{"workflow_id":"simple","input":{"name":"caf');
    const body = Buffer.concat([head, Buffer.from([0xe9]), Buffer.from('"}}')]);
    const res = await start(body);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe("bad_request");
    expect(res.json().error.details.problems).toEqual([
      { path: "body", message: expect.stringContaining(`byte ${head.length} (0xe9) is not valid UTF-8`) },
    ]);
    expect(await runs()).toEqual([]);
  });

  it("refuses an integer beyond 2^53 with its JSON path, and keeps the safe ones exactly", async () => {
    const { start, runs, engine } = await api();
    const res = await start('{"workflow_id":"simple","input":{"order":{"ids":[1, 12345678901234567890]}}}');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details.problems).toEqual([
      {
        path: "body.input.order.ids[1]",
        message: expect.stringContaining("the integer 12345678901234567890 is outside ±(2^53-1)"),
      },
    ]);
    expect(res.json().error.message).toContain("body.input.order.ids[1]");
    expect(await runs()).toEqual([]);

    const ok = await start(
      '{"workflow_id":"simple","input":{"max":9007199254740991,"min":-9007199254740991,"f":1.5e300}}',
    );
    expect(ok.statusCode).toBe(201);
    const run = await engine.getRun(ok.json().run_id);
    expect(run?.input).toEqual({ max: Number.MAX_SAFE_INTEGER, min: Number.MIN_SAFE_INTEGER, f: 1.5e300 });
  });

  it("refuses a number that overflows a float (it would become null)", async () => {
    const { start } = await api();
    const res = await start('{"workflow_id":"simple","input":{"x":-1e400}}');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details.problems).toEqual([
      { path: "body.input.x", message: expect.stringContaining("beyond the range of a 64-bit float") },
    ]);
  });

  it("does not mistake digits inside strings for numbers", async () => {
    const { start } = await api();
    const res = await start('{"workflow_id":"simple","input":{"card":"12345678901234567890","e":"1e999"}}');
    expect(res.statusCode).toBe(201);
  });

  it("refuses __proto__ keys, escaped or not, with the path, and the prototype stays clean", async () => {
    const { start, runs } = await api();
    const res = await start('{"workflow_id":"simple","input":{"list":[{"\\u005f_proto__":{"polluted":true}}]}}');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details.problems).toEqual([
      { path: "body.input.list[0].__proto__", message: expect.stringContaining("prototype poisoning") },
    ]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(await runs()).toEqual([]);
  });

  it("refuses escaped lone surrogates, which no UTF-8 store can keep", async () => {
    const { start } = await api();
    const res = await start('{"workflow_id":"simple","input":{"s":"a\\ud800b"}}');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details.problems[0].path).toBe("body.input.s");
    // A well-formed pair is text.
    expect((await start('{"workflow_id":"simple","input":{"s":"\\ud83d\\ude00"}}')).statusCode).toBe(201);
  });

  it("parses bodies sent with a charset parameter the same way", async () => {
    const { app, engine } = await api();
    const res = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: { ...json, "content-type": "application/json; charset=utf-8" },
      payload: '{"workflow_id":"simple","input":{"n":12345678901234567890}}',
    });
    expect(res.statusCode).toBe(400);
    const ok = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: { ...json, "content-type": "application/json; charset=utf-8" },
      payload: '{"workflow_id":"simple","input":{"name":"café"}}',
    });
    expect(ok.statusCode).toBe(201);
    expect((await engine.getRun(ok.json().run_id))?.input).toEqual({ name: "café" });
  });

  it("says where malformed JSON fails", async () => {
    const { start } = await api();
    const res = await start('{"workflow_id":\n ]');
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: "bad_request", message: expect.stringContaining("line 2") });
  });

  it("refuses a NUL character in a path segment, a query value or a body's id with 400 naming the field", async () => {
    const { app, engine, start, runs } = await api();
    const get = (url: string) => app.inject({ method: "GET", url, headers: json });
    const post = (url: string, payload: object) => app.inject({ method: "POST", url, headers: json, payload });
    const nul = "holds a NUL character (\\u0000), which the database cannot store: remove it";
    const answers = [
      [await get("/v1/runs/x%00y"), "params.run_id"],
      [await get("/v1/runs?workflow_id=simple%00"), "query.workflow_id"],
      [await post("/v1/runs/x%00y/cancel", {}), "params.run_id"],
      [await start('{"workflow_id":"simple","idempotency_key":"k\\u0000"}'), "idempotency_key"],
      [await post("/v1/events", { name: "go\u0000", key: "k" }), "name"],
    ] as const;
    for (const [res, path] of answers) {
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error).toMatchObject({ code: "validation", details: { problems: [{ path, message: nul }] } });
    }
    expect(await runs()).toEqual([]);
    expect(await engine.listRuns()).toEqual([]);
  });
});
