import { afterEach, describe, expect, it } from "vitest";
import { type RunEvent, ValidationError } from "../../../src/index.js";
import { nextEvent, testEngine } from "../../helpers.js";
import { json, startServer, type TestServer } from "../../local-server.js";

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function server(route: Parameters<typeof startServer>[0]): Promise<TestServer> {
  const s = await startServer(route);
  servers.push(s);
  return s;
}

const retrying = (e: RunEvent) => e.type === "node.retrying";

describe("the http node", () => {
  it("calls the URL and outputs { status, headers, body } with a JSON body parsed; Idempotency-Key is the execution_id", async () => {
    const s = await server((req, res) => json(res, 200, { seen: req.url, n: 12 }, { "x-trace": "abc" }));
    const { engine } = await testEngine();
    await engine.registerWorkflow({
      id: "get",
      nodes: [
        {
          node_id: "call",
          agent_type: "http",
          payload: {
            url: `${s.url}/items/{{ input.id }}`,
            query: { page: 2, tag: ["a", "b"] },
            headers: { "X-Api": "v1" },
          },
        },
      ],
    });
    const run = await engine.waitForRun((await engine.startRun("get", { input: { id: "7" } })).run_id);
    expect(run.status).toBe("SUCCEEDED");
    const output = run.nodes[0]?.output as { status: number; headers: Record<string, string>; body: unknown };
    expect(output.status).toBe(200);
    expect(output.body).toEqual({ seen: "/items/7?page=2&tag=a&tag=b", n: 12 });
    expect(output.headers["x-trace"]).toBe("abc");
    expect(output.headers["content-type"]).toBe("application/json");
    expect(s.requests).toHaveLength(1);
    expect(s.requests[0]?.method).toBe("GET");
    expect(s.requests[0]?.headers["x-api"]).toBe("v1");
    expect(s.requests[0]?.headers["idempotency-key"]).toBe(`${run.run_id}:call:1`);
  });

  it("sends a JSON body, keeps an Idempotency-Key the payload sets, and parses text as text", async () => {
    const s = await server((_req, res) => {
      res.writeHead(201, { "content-type": "text/plain" });
      res.end("created");
    });
    const { engine } = await testEngine();
    await engine.registerWorkflow({
      id: "post",
      nodes: [
        {
          node_id: "call",
          agent_type: "http",
          payload: { method: "POST", url: s.url, headers: { "idempotency-KEY": "mine" }, body: { a: [1, 2] } },
        },
      ],
    });
    const run = await engine.waitForRun((await engine.startRun("post")).run_id);
    expect(run.nodes[0]?.output).toMatchObject({ status: 201, body: "created" });
    expect(s.requests[0]).toMatchObject({ method: "POST", body: '{"a":[1,2]}' });
    expect(s.requests[0]?.headers["content-type"]).toBe("application/json");
    expect(s.requests[0]?.headers["idempotency-key"]).toBe("mine");
  });

  it("keeps a body that is not UTF-8 as received, in base64 with body_encoding, never with U+FFFD", async () => {
    const latin1 = Buffer.from("café", "latin1"); // 0xe9 alone is not UTF-8
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0xff, 0x00]);
    const s = await server((req, res) => {
      res.writeHead(200, { "content-type": req.url === "/png" ? "image/png" : "text/plain; charset=iso-8859-1" });
      res.end(req.url === "/png" ? png : req.url === "/utf8" ? Buffer.from("café") : latin1);
    });
    const { engine } = await testEngine();
    await engine.registerWorkflow({
      id: "bytes",
      nodes: ["latin1", "png", "utf8"].map((name) => ({
        node_id: name,
        agent_type: "http",
        payload: { url: `${s.url}/${name}` },
      })),
    });
    const run = await engine.waitForRun((await engine.startRun("bytes")).run_id);
    const output = (id: string) => run.nodes.find((n) => n.node_id === id)?.output as Record<string, unknown>;
    expect(output("latin1")).toMatchObject({ body: latin1.toString("base64"), body_encoding: "base64" });
    expect(Buffer.from(output("png").body as string, "base64")).toEqual(png);
    expect(output("png").body_encoding).toBe("base64");
    // UTF-8 text stays text, with no marker.
    expect(output("utf8").body).toBe("café");
    expect(output("utf8")).not.toHaveProperty("body_encoding");
  });

  it("retries a 500 with the same Idempotency-Key, then succeeds", async () => {
    const s = await server((_req, res) => {
      if (s.requests.length === 1) json(res, 500, { error: "boom" });
      else json(res, 200, { ok: true });
    });
    const { engine, clock } = await testEngine();
    await engine.registerWorkflow({
      id: "flaky",
      nodes: [{ node_id: "call", agent_type: "http", retry_count: 2, retry_interval: 2, payload: { url: s.url } }],
    });
    const event = nextEvent(engine, retrying);
    const started = await engine.startRun("flaky");
    const retry = await event;
    expect(retry.data.error).toMatchObject({ name: "RetryableError" });
    expect((retry.data.error as { message: string }).message).toMatch(/answered 500 .*boom/);
    const done = engine.waitForRun(started.run_id);
    await clock.advance(2_000);
    const run = await done;
    expect(run.status).toBe("SUCCEEDED");
    expect(s.requests.map((r) => r.headers["idempotency-key"])).toEqual([
      `${run.run_id}:call:1`,
      `${run.run_id}:call:1`,
    ]);
  });

  it("honours a 429's Retry-After (seconds) for the retry's delay", async () => {
    const s = await server((_req, res) => {
      if (s.requests.length === 1) json(res, 429, { error: "slow down" }, { "retry-after": "3" });
      else json(res, 200, { ok: true });
    });
    const { engine, clock } = await testEngine();
    await engine.registerWorkflow({
      id: "limited",
      nodes: [{ node_id: "call", agent_type: "http", retry_count: 1, retry_interval: 600, payload: { url: s.url } }],
    });
    const event = nextEvent(engine, retrying);
    const started = await engine.startRun("limited");
    const retry = await event;
    expect((retry.data.retry_at as number) - retry.at).toBe(3_000);
    await clock.advance(2_999);
    expect(s.requests).toHaveLength(1);
    const done = engine.waitForRun(started.run_id);
    await clock.advance(1);
    expect((await done).status).toBe("SUCCEEDED");
    expect(s.requests).toHaveLength(2);
  });

  it("honours a 503's Retry-After given as an HTTP date, judged by the engine's clock", async () => {
    const { engine, clock } = await testEngine();
    const s = await server((_req, res) => {
      if (s.requests.length === 1) {
        json(res, 503, { error: "maintenance" }, { "retry-after": new Date(clock.now() + 5_000).toUTCString() });
      } else json(res, 200, { ok: true });
    });
    await engine.registerWorkflow({
      id: "maintenance",
      nodes: [{ node_id: "call", agent_type: "http", retry_count: 1, retry_interval: 600, payload: { url: s.url } }],
    });
    const event = nextEvent(engine, retrying);
    const started = await engine.startRun("maintenance");
    const retry = await event;
    expect((retry.data.retry_at as number) - retry.at).toBe(5_000);
    const done = engine.waitForRun(started.run_id);
    await clock.advance(5_000);
    expect((await done).status).toBe("SUCCEEDED");
  });

  it("drops Authorization on a redirect to another origin, keeps it on the same origin", async () => {
    const other = await server((req, res) => json(res, 200, { auth: req.headers.authorization ?? null }));
    const s = await server((req, res) => {
      const to = req.url === "/away" ? `${other.url}/landing` : "/here";
      if (req.url === "/here") json(res, 200, { auth: req.headers.authorization ?? null });
      else {
        res.writeHead(307, { location: to });
        res.end();
      }
    });
    const { engine } = await testEngine();
    const node = (id: string, path: string) => ({
      node_id: id,
      agent_type: "http",
      payload: { url: `${s.url}${path}`, headers: { Authorization: "Bearer abc" } },
    });
    await engine.registerWorkflow({ id: "auth", nodes: [node("away", "/away"), node("near", "/near")] });
    const run = await engine.waitForRun((await engine.startRun("auth")).run_id);
    expect(run.nodes.find((n) => n.node_id === "away")?.output).toMatchObject({ body: { auth: null } });
    expect(run.nodes.find((n) => n.node_id === "near")?.output).toMatchObject({ body: { auth: "Bearer abc" } });
    expect(other.requests).toHaveLength(1);
  });

  it("fails a 404 at once, not retried, with the status and the start of the body", async () => {
    const s = await server((_req, res) => json(res, 404, { error: "no such item" }));
    const { engine } = await testEngine();
    await engine.registerWorkflow({
      id: "missing",
      nodes: [{ node_id: "call", agent_type: "http", retry_count: 3, payload: { url: `${s.url}/x?key=k` } }],
    });
    const run = await engine.waitForRun((await engine.startRun("missing")).run_id);
    expect(run.status).toBe("FAILED");
    expect(run.nodes[0]).toMatchObject({ reason: "non_retryable", attempt: 1 });
    expect(run.nodes[0]?.error?.message).toBe(
      `GET ${s.url}/x answered 404 Not Found: {"error":"no such item"}; ok_status lists the statuses that succeed (default 2xx)`,
    );
    expect(s.requests).toHaveLength(1);
  });

  it("follows redirects (a POST's 303 becomes a GET) and stops a redirect loop after max_redirects", async () => {
    const s = await server((req, res) => {
      if (req.url === "/form") {
        res.writeHead(303, { location: "/done" });
        res.end();
      } else if (req.url === "/done") json(res, 200, { method: req.method });
      else {
        res.writeHead(302, { location: "/loop" });
        res.end();
      }
    });
    const { engine } = await testEngine();
    await engine.registerWorkflow({
      id: "redirects",
      nodes: [
        { node_id: "form", agent_type: "http", payload: { method: "POST", url: `${s.url}/form`, body: "x=1" } },
        { node_id: "loop", agent_type: "http", retry_count: 2, payload: { url: `${s.url}/loop` } },
      ],
    });
    const run = await engine.waitForRun((await engine.startRun("redirects")).run_id);
    const form = run.nodes.find((n) => n.node_id === "form");
    expect(form?.output).toMatchObject({ status: 200, body: { method: "GET" } });
    const loop = run.nodes.find((n) => n.node_id === "loop");
    expect(loop).toMatchObject({ state: "FAILED", reason: "non_retryable", attempt: 1 });
    expect(loop?.error?.message).toMatch(/stopped after 5 redirects \(max_redirects\)/);
    expect(s.requests.filter((r) => r.url === "/loop")).toHaveLength(6);
    expect(s.requests.find((r) => r.url === "/done")?.body).toBe("");
  });

  it("refuses a response body over maxPayloadBytes (invalid_output), reading no more than it must", async () => {
    const s = await server((_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("x".repeat(200_000));
    });
    const { engine } = await testEngine({ maxPayloadBytes: 10_000 });
    await engine.registerWorkflow({
      id: "big",
      nodes: [{ node_id: "call", agent_type: "http", retry_count: 2, payload: { url: s.url } }],
    });
    const run = await engine.waitForRun((await engine.startRun("big")).run_id);
    // The visit's reason is the error's (DESIGN §12), not the generic non_retryable.
    expect(run.nodes[0]).toMatchObject({ state: "FAILED", reason: "invalid_output", attempt: 1 });
    expect(run.nodes[0]?.error).toMatchObject({ reason: "invalid_output" });
    expect(run.nodes[0]?.error?.message).toMatch(/over the limit of 10000 bytes \(maxPayloadBytes\)/);
  });

  it("aborts the request at the node's timeout: the server sees the socket closed", async () => {
    let closed!: () => void;
    const socketClosed = new Promise<void>((resolve) => {
      closed = resolve;
    });
    let arrived!: () => void;
    const requestArrived = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    // Never answers.
    const s = await server((_req, _res, raw) => {
      raw.socket.on("close", closed);
      arrived();
    });
    const { engine, clock } = await testEngine();
    await engine.registerWorkflow({
      id: "hang",
      nodes: [{ node_id: "call", agent_type: "http", timeout: 30, retry_count: 0, payload: { url: s.url } }],
    });
    const started = await engine.startRun("hang");
    await requestArrived;
    const done = engine.waitForRun(started.run_id);
    await clock.advance(30_000);
    const run = await done;
    expect(run.nodes[0]).toMatchObject({ state: "FAILED" });
    expect(run.nodes[0]?.error?.reason).toBe("timeout");
    await socketClosed;
  });

  it("timeout_ms fails the attempt as retryable (judged by the engine's clock)", async () => {
    let arrived!: () => void;
    const requestArrived = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const s = await server(() => arrived());
    const { engine, clock } = await testEngine();
    await engine.registerWorkflow({
      id: "slow",
      nodes: [{ node_id: "call", agent_type: "http", retry_count: 1, payload: { url: s.url, timeout_ms: 500 } }],
    });
    const event = nextEvent(engine, retrying);
    await engine.startRun("slow");
    await requestArrived;
    await clock.advance(500);
    const retry = await event;
    expect((retry.data.error as { message: string }).message).toMatch(/no whole response within timeout_ms \(500 ms\)/);
  });

  it("validates the payload, and workers may not claim http nodes", async () => {
    const { engine } = await testEngine();
    const problems = async (payload: Record<string, unknown>) => {
      const e = await engine
        .registerWorkflow({ id: "bad", nodes: [{ node_id: "call", agent_type: "http", payload }] })
        .catch((err: unknown) => err);
      return e instanceof ValidationError ? e.problems.map((p) => `${p.path}: ${p.message}`) : [];
    };
    expect(await problems({ url: "ftp://example.com/x" })).toEqual([
      "nodes[0].payload.url: must use http:// or https://, not ftp://",
    ]);
    expect(await problems({ url: "/relative" })).toEqual([
      'nodes[0].payload.url: must be an absolute URL with http:// or https://, got "/relative"',
    ]);
    expect(await problems({ url: "https://example.com", method: "get", body: 1, ok_status: ["2yy"] })).toEqual([
      'nodes[0].payload.method: must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, got "get"',
      'nodes[0].payload.ok_status: must be a non-empty list of statuses (200) or ranges ("200-299", "2xx"), got "2yy"',
    ]);
    expect(await problems({ url: "{{ input.url }}", timeout_ms: 0 })).toEqual([
      "nodes[0].payload.timeout_ms: must be an integer of milliseconds from 1 to 86400000, got 0",
    ]);
    await expect(engine.claimTasks({ worker_id: "w", agent_types: ["http"] })).rejects.toThrow(
      /http nodes run in the engine/,
    );
  });
});
