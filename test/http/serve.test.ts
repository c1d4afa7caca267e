/** `skein serve` as a child process (the built CLI): refusals, start, a run over HTTP, SIGTERM. */
import { describe, expect, it } from "vitest";
import { AGENTS, requireBuiltCli, Skein, skein, until, workspace } from "../cli/helpers.js";
import { fetchApi } from "../helpers.js";
import { TOKEN_LIST, TOKENS } from "./helpers.js";

requireBuiltCli();

const admin = { authorization: `Bearer ${TOKENS.admin}`, "content-type": "application/json" };

describe("skein serve", () => {
  it("refuses to listen beyond loopback without tokens (exit 2)", async () => {
    const ws = workspace();
    const r = await skein(["serve", "--host", "0.0.0.0", "--port", "0", "--db", ws.db], ws.dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/refusing to listen on 0\.0\.0\.0 without tokens.*--tokens <file>/);
  });

  it("refuses a bad tokens file, naming every problem with its path (exit 2)", async () => {
    const ws = workspace();
    const file = ws.file("tokens.json", [{ token: "short", role: "root", name: "x" }]);
    const r = await skein(["serve", "--port", "0", "--tokens", file, "--db", ws.db], ws.dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("is not a valid token list");
    expect(r.stderr).toMatch(/\[0\]\.token: must be at least 16 characters/);
    expect(r.stderr).toMatch(/\[0\]\.role: must be one of/);
  });

  it("serves the API with tokens from SKEIN_TOKENS, runs a workflow, and exits 0 on SIGTERM", async () => {
    const ws = workspace();
    const server = new Skein(["serve", "--port", "0", "--host", "0.0.0.0", "--agents", AGENTS, "--db", ws.db], ws.dir, {
      SKEIN_TOKENS: JSON.stringify(TOKEN_LIST),
      SKEIN_LOG_LEVEL: "info",
    });
    const [, listening] = await server.waitFor(/serving the HTTP API on (http:\/\/\S+)\/v1/, undefined, "stderr");
    const url = (listening as string).replace("0.0.0.0", "127.0.0.1");

    const health = await fetchApi(`${url}/v1/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok" });
    expect((await fetchApi(`${url}/v1/runs`)).status).toBe(401);

    const put = await fetchApi(`${url}/v1/workflows/echo`, {
      method: "PUT",
      headers: admin,
      body: JSON.stringify({ id: "echo", nodes: [{ node_id: "a", agent_type: "echo" }] }),
    });
    expect(put.status).toBe(201);
    const started = await fetchApi(`${url}/v1/runs`, {
      method: "POST",
      headers: admin,
      body: JSON.stringify({ workflow_id: "echo", input: { topic: "x" } }),
    });
    expect(started.status).toBe(201);
    const { run_id } = (await started.json()) as { run_id: string };
    const done = await until(
      "the run to succeed",
      async () => (await (await fetchApi(`${url}/v1/runs/${run_id}`, { headers: admin })).json()) as { status: string },
      (run) => run.status !== "RUNNING",
    );
    expect(done.status).toBe("SUCCEEDED");
    // skein serve wires the engine's metrics to GET /metrics (test/http/metrics.test.ts parses them).
    const scraped = await fetchApi(`${url}/metrics`, { headers: admin });
    expect(scraped.status).toBe(200);
    expect(scraped.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const text = await scraped.text();
    expect(text).toContain('skein_runs_ended_total{workflow="echo",status="succeeded"} 1');
    expect(text).toContain('skein_attempts_total{agent_type="echo",outcome="succeeded"} 1');

    server.proc.kill("SIGTERM");
    const result = await server.result();
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('"msg":"stopped"');
    // Requests are logged with a trace id, never with the token.
    expect(result.stdout).toMatch(/"trace_id":"[0-9a-f]{32}".*"url":"\/v1\/runs"/);
    expect(result.stdout).not.toContain(TOKENS.admin);
  });
});
