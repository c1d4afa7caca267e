/**
 * `skein serve` with tokens denies private and loopback addresses to the http node (DESIGN
 * §13.1), `--egress-allow` and SKEIN_EGRESS_ALLOW lift it, and the engine's own API stays out
 * of reach even then. The built CLI as a child process, a real local server as the target.
 */
import { afterEach, describe, expect, it } from "vitest";
import { requireBuiltCli, Skein, until, workspace } from "../cli/helpers.js";
import { fetchApi } from "../helpers.js";
import { json, startServer, type TestServer } from "../local-server.js";
import { TOKEN_LIST, TOKENS } from "./helpers.js";

requireBuiltCli();

const admin = { authorization: `Bearer ${TOKENS.admin}`, "content-type": "application/json" };

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

interface RunView {
  status: string;
  nodes: { node_id: string; state: string; reason?: string; attempt: number; error?: { message: string } }[];
}

/** `skein serve` with the test tokens and `args`; its base URL once it listens. */
async function serve(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ url: string; port: number }> {
  const ws = workspace();
  const server = new Skein(["serve", "--port", "0", "--host", "127.0.0.1", "--db", ws.db, ...args], ws.dir, {
    SKEIN_TOKENS: JSON.stringify(TOKEN_LIST),
    ...env,
  });
  const [, url] = await server.waitFor(/serving the HTTP API on (http:\/\/\S+)\/v1/, undefined, "stderr");
  const put = await fetchApi(`${url}/v1/workflows/call`, {
    method: "PUT",
    headers: admin,
    body: JSON.stringify({
      id: "call",
      nodes: [{ node_id: "c", agent_type: "http", retry_count: 2, payload: { url: "{{ input.url }}" } }],
    }),
  });
  expect(put.status, await put.clone().text()).toBe(201);
  return { url: url as string, port: Number(new URL(url as string).port) };
}

/** Starts `call` with `target` as its URL (admin token) and waits for its end. */
async function call(base: string, target: string): Promise<RunView> {
  const started = await fetchApi(`${base}/v1/runs`, {
    method: "POST",
    headers: admin,
    body: JSON.stringify({ workflow_id: "call", input: { url: target } }),
  });
  expect(started.status).toBe(201);
  const { run_id } = (await started.json()) as { run_id: string };
  return until(
    "the run to end",
    async () => (await (await fetchApi(`${base}/v1/runs/${run_id}`, { headers: admin })).json()) as RunView,
    (run) => run.status !== "RUNNING",
  );
}

async function target(): Promise<TestServer> {
  const s = await startServer((_req, res) => json(res, 200, { ok: true }));
  servers.push(s);
  return s;
}

describe("skein serve's egress", () => {
  it("with tokens, refuses loopback to the http node, not retried, and nothing reaches the address", async () => {
    const local = await target();
    const { url } = await serve([]);
    const run = await call(url, `${local.url}/hook`);
    expect(run.status).toBe("FAILED");
    expect(run.nodes[0]).toMatchObject({ state: "FAILED", reason: "non_retryable", attempt: 1 });
    expect(run.nodes[0]?.error?.message).toContain(
      '127.0.0.1 (127.0.0.1) is refused by the egress rule "loopback" of the egress option; add it to egress.allow (skein serve: --egress-allow) if the http node may call it',
    );
    expect(local.requests).toHaveLength(0);
  });

  it("--egress-allow loopback lifts it, and the engine's own API is still refused", async () => {
    const local = await target();
    const { url, port } = await serve(["--egress-allow", "loopback"]);
    const ok = await call(url, `${local.url}/hook`);
    expect(ok.status).toBe("SUCCEEDED");
    expect(local.requests.map((r) => r.url)).toEqual(["/hook"]);

    for (const own of [`http://127.0.0.1:${port}/v1/health`, `http://localhost:${port}/v1/runs`]) {
      const refused = await call(url, own);
      expect(refused.status).toBe("FAILED");
      expect(refused.nodes[0]).toMatchObject({ state: "FAILED", reason: "non_retryable", attempt: 1 });
      expect(refused.nodes[0]?.error?.message).toMatch(
        new RegExp(
          `:${port} \\((127\\.0\\.0\\.1|::1)\\) is this engine's own HTTP API, which the http node never calls`,
        ),
      );
    }
  });

  it("SKEIN_EGRESS_ALLOW (comma-separated) lifts it too", async () => {
    const local = await target();
    const { url } = await serve([], { SKEIN_EGRESS_ALLOW: "10.9.9.9/32, 127.0.0.1" });
    const ok = await call(url, `${local.url}/env`);
    expect(ok.status).toBe("SUCCEEDED");
    expect(local.requests.map((r) => r.url)).toEqual(["/env"]);
  });
});
