/**
 * Egress of the `http` node (DESIGN §13.1): never link-local addresses nor the engine's own API;
 * `egress: { allow, deny }` checked on the addresses DNS gives and on every redirect hop.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createServer } from "../../src/http/server.js";
import { testEngine } from "../helpers.js";
import { json, startServer } from "../local-server.js";

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

const call = (url: string) => ({
  id: "call",
  nodes: [{ node_id: "c", agent_type: "http", retry_count: 2, payload: { url: "{{ input.url }}" } }],
  ...(url ? {} : {}),
});

async function failure(engine: Awaited<ReturnType<typeof testEngine>>["engine"], url: string) {
  const run = await engine.waitForRun((await engine.startRun("call", { input: { url } })).run_id);
  return run.nodes[0];
}

describe("egress", () => {
  it("never calls a link-local address (cloud metadata), not retried", async () => {
    const { engine } = await testEngine({});
    await engine.registerWorkflow(call(""));
    const node = await failure(engine, "http://169.254.169.254/latest/meta-data/");
    expect(node).toMatchObject({ state: "FAILED", reason: "non_retryable", attempt: 1 });
    expect(node?.error?.message).toContain(
      "169.254.169.254 resolves to 169.254.169.254, a link-local address (cloud metadata services live there), which the http node never calls",
    );
  });

  it("deny loopback refuses a name that resolves there (after DNS) and a redirect hop there; allow lifts it", async () => {
    const target = await startServer((_r, res) => json(res, 200, { ok: true }));
    cleanup.push(() => target.close());
    const port = new URL(target.url).port;
    const { engine } = await testEngine({ egress: { deny: ["loopback"] } });
    await engine.registerWorkflow(call(""));
    const byName = await failure(engine, `http://localhost:${port}/x`);
    expect(byName).toMatchObject({ state: "FAILED", reason: "non_retryable", attempt: 1 });
    expect(byName?.error?.message).toMatch(
      /localhost \((127\.0\.0\.1|::1)\) is refused by the egress rule "loopback" of the egress option; add it to egress\.allow \(skein serve: --egress-allow\) if the http node may call it/,
    );
    expect(target.requests).toHaveLength(0);

    // Allowed: 127.0.0.1 itself; its redirect to 127.0.0.2 (loopback, not allowed) is refused.
    const { engine: allowing } = await testEngine({ egress: { deny: ["loopback"], allow: ["127.0.0.1"] } });
    await allowing.registerWorkflow(call(""));
    target.route = (req, res) => {
      if (req.url === "/redirect") {
        res.writeHead(302, { location: `http://127.0.0.2:${port}/landed` });
        res.end();
      } else json(res, 200, { ok: true });
    };
    const direct = await allowing.waitForRun(
      (await allowing.startRun("call", { input: { url: `${target.url}/ok` } })).run_id,
    );
    expect(direct.status).toBe("SUCCEEDED");
    const hop = await failure(allowing, `${target.url}/redirect`);
    expect(hop?.error?.message).toContain('127.0.0.2 (127.0.0.2) is refused by the egress rule "loopback"');
    expect(target.requests.map((r) => r.url)).toEqual(["/ok", "/redirect"]);
  });

  it("never calls the engine's own API once served", async () => {
    const { engine } = await testEngine({});
    await engine.registerWorkflow(call(""));
    const app = await createServer({ engine });
    cleanup.push(() => app.close());
    await app.listen({ host: "127.0.0.1", port: 0 });
    const address = app.server.address() as { port: number };
    const node = await failure(engine, `http://127.0.0.1:${address.port}/v1/runs`);
    expect(node).toMatchObject({ state: "FAILED", reason: "non_retryable" });
    expect(node?.error?.message).toContain(`is this engine's own HTTP API, which the http node never calls`);
  });

  it("refuses a bad egress option at start, with the path", async () => {
    await expect(testEngine({ egress: { deny: ["10.0.0.0/99"] } })).rejects.toThrow(
      /egress\.deny\[0\]: "10\.0\.0\.0\/99" is not a host name/,
    );
  });
});
