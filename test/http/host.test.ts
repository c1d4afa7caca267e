/**
 * DNS rebinding (DESIGN §13): with no tokens the API answers only requests for its loopback
 * names (and the host of its public URL), since a page on evil.example whose name now points at
 * 127.0.0.1 sends `Host: evil.example`.
 */
import { describe, expect, it } from "vitest";
import { bearer, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

describe("Host header of an open API", () => {
  it("refuses another site's name (403 in the error shape) and starts nothing", async () => {
    const { app, engine } = await testApi({ open: true });
    await engine.registerWorkflow(WORKFLOWS.simple);
    for (const host of ["evil.example", "evil.example:8080", "127.0.0.1.evil.example", "localhost.evil.example"]) {
      const res = await app.inject({
        method: "POST",
        url: "/v1/runs",
        headers: { host },
        payload: { workflow_id: "simple" },
      });
      expect(res.statusCode).toBe(403);
      expect(res.json().error).toMatchObject({ code: "forbidden", message: expect.stringContaining("localhost") });
    }
    // Reads, the page and unknown URLs alike.
    for (const url of ["/v1/runs", "/", "/v1/nothing"]) {
      expect((await app.inject({ url, headers: { host: "evil.example" } })).statusCode).toBe(403);
    }
    expect(await engine.listRuns()).toEqual([]);
  });

  it("refuses a page of another site that calls it by a loopback name (its Origin), and starts or cancels nothing", async () => {
    const { app, engine } = await testApi({ open: true });
    await engine.registerWorkflow(WORKFLOWS.review);
    const run = await engine.startRun("review");
    // A browser sends a cross-site POST without a body (no-cors) with no preflight: only its Origin tells.
    for (const origin of ["https://evil.example", "http://localhost.evil.example", "null", "not a url"]) {
      const res = await app.inject({
        method: "POST",
        url: `/v1/runs/${run.run_id}/cancel`,
        headers: { host: "127.0.0.1:8080", origin },
      });
      expect(res.statusCode, origin).toBe(403);
      expect(res.json().error.code).toBe("forbidden");
    }
    expect((await engine.getRun(run.run_id)).status).toBe("RUNNING");
    // The admin page, served from the API itself, sends its own origin.
    const own = await app.inject({
      method: "POST",
      url: `/v1/runs/${run.run_id}/cancel`,
      headers: { host: "127.0.0.1:8080", origin: "http://127.0.0.1:8080" },
    });
    expect(own.statusCode).toBe(200);
  });

  it("answers loopback names with any port", async () => {
    const { app } = await testApi({ open: true });
    for (const host of [
      "localhost",
      "localhost:8080",
      "127.0.0.1",
      "127.0.0.1:3000",
      "[::1]",
      "[::1]:8080",
      "LOCALHOST:1",
    ]) {
      expect((await app.inject({ url: "/v1/workflows", headers: { host } })).statusCode, host).toBe(200);
    }
  });

  it("answers the host of the public URL", async () => {
    const { app } = await testApi({ open: true, server: { publicUrl: "https://skein.example.com:8443" } });
    expect((await app.inject({ url: "/v1/workflows", headers: { host: "skein.example.com:8443" } })).statusCode).toBe(
      200,
    );
    expect((await app.inject({ url: "/v1/workflows", headers: { host: "other.example.com" } })).statusCode).toBe(403);
  });

  it("leaves an API with tokens to its tokens", async () => {
    const { app } = await testApi();
    const res = await app.inject({
      url: "/v1/workflows",
      headers: { host: "skein.internal", ...bearer(TOKENS.admin) },
    });
    expect(res.statusCode).toBe(200);
  });
});
