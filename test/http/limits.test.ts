import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { bearer, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

const json = { ...bearer(TOKENS.admin), "content-type": "application/json" };

function nested(levels: number): unknown {
  let value: unknown = "leaf";
  for (let i = 0; i < levels; i++) value = { deeper: value };
  return value;
}

/** POSTs `body` (bytes) over a real connection and resolves with the status and the answer's text. */
function post(url: string, body: Buffer, headers: Record<string, string>): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: "POST", headers: { ...headers, "content-length": String(body.length) } },
      (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (c: string) => {
          text += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    // The server may answer and close before reading the whole body: that is the point.
    req.on("error", (e: NodeJS.ErrnoException) => {
      if (e.code !== "EPIPE" && e.code !== "ECONNRESET") reject(e);
    });
    req.end(body);
  });
}

describe("request limits", () => {
  it("refuses __proto__ and constructor.prototype keys (400) without polluting anything", async () => {
    const { app } = await testApi();
    for (const payload of [
      '{"workflow_id":"simple","input":{"__proto__":{"polluted":true}}}',
      '{"workflow_id":"simple","input":{"constructor":{"prototype":{"polluted":true}}}}',
    ]) {
      const res = await app.inject({ method: "POST", url: "/v1/runs", headers: json, payload });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({
        code: "bad_request",
        message: expect.stringMatching(/__proto__|prototype/),
      });
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("refuses JSON nested deeper than 64 levels (400 with the path), and takes 64", async () => {
    const { app, engine } = await testApi();
    await engine.registerWorkflow(WORKFLOWS.simple);
    const start = (input: unknown) =>
      app.inject({ method: "POST", url: "/v1/runs", headers: json, payload: { workflow_id: "simple", input } });
    const deep = await start(nested(64));
    expect(deep.statusCode).toBe(400);
    expect(deep.json().error.details.problems).toEqual([{ path: "body", message: expect.stringContaining("64") }]);
    // The body itself is one level: an input of 63 makes 64.
    expect((await start(nested(63))).statusCode).toBe(201);
    // Far deeper than any stack: refused, not a crash.
    const huge = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: json,
      payload: `${"[".repeat(200_000)}${"]".repeat(200_000)}`,
    });
    expect(huge.statusCode).toBe(400);
  });

  it("answers 413 in the error shape for a body over the limit", async () => {
    const { app } = await testApi({ server: { bodyLimit: 100 } });
    const res = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: json,
      payload: { workflow_id: "simple", input: { text: "x".repeat(200) } },
    });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toEqual({
      error: {
        code: "payload_too_large",
        message: expect.stringContaining("100 bytes"),
        details: { limit_bytes: 100 },
      },
    });
  });

  it("answers 413 over a real port for a body over the default 1 MiB", async () => {
    const { app } = await testApi();
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const body = Buffer.from(JSON.stringify({ workflow_id: "simple", input: { text: "x".repeat(1_100_000) } }));
    const res = await post(`${base}/v1/runs`, body, json);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.text).error.code).toBe("payload_too_large");
  });

  it("answers malformed JSON 400 and other media types 415", async () => {
    const { app } = await testApi();
    const bad = await app.inject({ method: "POST", url: "/v1/runs", headers: json, payload: '{"workflow_id":' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe("bad_request");
    const text = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: { ...bearer(TOKENS.admin), "content-type": "text/plain" },
      payload: "simple",
    });
    expect(text.statusCode).toBe(415);
    expect(text.json().error.code).toBe("unsupported_media_type");
  });
});

describe("failures", () => {
  it("answers an unexpected error 500 without its message", async () => {
    const { app, engine } = await testApi();
    engine.listWorkflows = async () => {
      throw new Error("cannot open /secret/path/skein.db");
    };
    const res = await app.inject({ url: "/v1/workflows", headers: bearer(TOKENS.admin) });
    expect(res.statusCode).toBe(500);
    expect(res.json().error.code).toBe("internal");
    expect(res.body).not.toContain("secret");
  });

  it("answers 503 once the engine is closed, and /v1/ready says not ready", async () => {
    const { app, engine } = await testApi();
    await engine.close();
    const res = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: json,
      payload: { workflow_id: "simple" },
    });
    expect(res.statusCode).toBe(503);
    expect(res.json().error.code).toBe("unavailable");
    expect((await app.inject({ url: "/v1/ready" })).statusCode).toBe(503);
    expect((await app.inject({ url: "/v1/health" })).statusCode).toBe(200);
  });

  it("answers unknown routes 404 in the error shape", async () => {
    const { app } = await testApi();
    const res = await app.inject({ url: "/v1/nothing-here" });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe("not_found");
  });
});
