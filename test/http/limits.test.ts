import { get, type IncomingMessage, request } from "node:http";
import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
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

describe("ids in paths", () => {
  it("takes the execution id of a 64-character node: an external worker claims, heartbeats and reports it", async () => {
    const { app, engine } = await testApi();
    const node = "n".repeat(64);
    await engine.registerWorkflow({ id: "w".repeat(64), nodes: [{ node_id: node, agent_type: "far_away" }] });
    const run = await engine.startRun("w".repeat(64));
    const call = (url: string, payload: object) =>
      app.inject({ method: "POST", url, headers: bearer(TOKENS.admin), payload });
    const claimed = await call("/v1/tasks/claim", { agent_types: ["far_away"], worker_id: "w1" });
    const [task] = claimed.json().tasks as { execution_id: string; attempt: number }[];
    expect(task?.execution_id.length).toBeGreaterThan(100); // over fastify's default maxParamLength
    const id = encodeURIComponent(task?.execution_id ?? "");
    const beat = await call(`/v1/tasks/${id}/heartbeat`, { attempt: task?.attempt, worker_id: "w1" });
    expect(beat.statusCode).toBe(200);
    const done = await call(`/v1/tasks/${id}/complete`, { attempt: task?.attempt, worker_id: "w1", output: { ok: 1 } });
    expect(done.statusCode).toBe(200);
    expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
  });

  it("answers a run id over its limit 400 with the path, and a path segment no id could be 414, in the error shape", async () => {
    const { app } = await testApi();
    const long = await app.inject({ url: `/v1/runs/${"r".repeat(201)}`, headers: bearer(TOKENS.admin) });
    expect(long.statusCode).toBe(400);
    expect(long.json().error.details.problems[0].path).toBe("params.run_id");
    const huge = await app.inject({ url: `/v1/runs/${"r".repeat(2001)}`, headers: bearer(TOKENS.admin) });
    expect(huge.statusCode).toBe(414);
    expect(huge.json()).toEqual({
      error: { code: "uri_too_long", message: expect.stringContaining("2000 characters"), details: {} },
    });
  });

  it("answers malformed percent-encoding 400 in the error shape", async () => {
    const { app } = await testApi();
    const res = await app.inject({ url: "/v1/runs/%E0%A4%A", headers: bearer(TOKENS.admin) });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      error: { code: "bad_request", message: expect.stringContaining("percent-encoding"), details: {} },
    });
  });
});

const held: IncomingMessage[] = [];
const sockets: Socket[] = [];
afterEach(() => {
  for (const r of held.splice(0)) r.destroy();
  for (const s of sockets.splice(0)) s.destroy();
});

/** Opens GET /v1/stream; resolves at its first bytes (or its whole refusal) with the status. */
function openStream(base: string, token: string): Promise<{ status: number; res: IncomingMessage; text: string }> {
  return new Promise((resolve, reject) => {
    get(`${base}/v1/stream`, { headers: bearer(token) }, (res) => {
      res.setEncoding("utf8");
      if (res.statusCode === 200) {
        held.push(res);
        res.once("data", (chunk: string) => resolve({ status: 200, res, text: chunk }));
        return;
      }
      let text = "";
      res.on("data", (c: string) => {
        text += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, res, text }));
    }).on("error", reject);
  });
}

/** A raw connection: what the server sent until it closed the connection. */
function rawConnection(base: string, send: string): Promise<string> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => socket.write(send));
    sockets.push(socket);
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (c: string) => {
      text += c;
    });
    socket.on("close", () => resolve(text));
    socket.on("error", reject);
  });
}

describe("event streams", () => {
  it("caps streams per token (429) and in total (503), with Retry-After, and frees a slot when one closes", async () => {
    const { app } = await testApi({ server: { limits: { streamsPerToken: 2, streams: 3 } } });
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const first = await openStream(base, TOKENS.alice);
    expect(first.status).toBe(200);
    expect((await openStream(base, TOKENS.alice)).status).toBe(200);
    const third = await openStream(base, TOKENS.alice);
    expect(third.status).toBe(429);
    expect(third.res.headers["retry-after"]).toBe("5");
    expect(JSON.parse(third.text).error).toMatchObject({
      code: "too_many_requests",
      details: { retry_after_seconds: 5 },
    });
    expect((await openStream(base, TOKENS.bob)).status).toBe(200);
    const full = await openStream(base, TOKENS.admin);
    expect(full.status).toBe(503);
    expect(full.res.headers["retry-after"]).toBe("5");
    expect(JSON.parse(full.text).error).toMatchObject({ code: "unavailable", details: { retry_after_seconds: 5 } });
    // Closing one gives its slot back once the server sees the connection close.
    first.res.destroy();
    let again = await openStream(base, TOKENS.admin);
    for (let tries = 0; again.status !== 200 && tries < 200; tries++) again = await openStream(base, TOKENS.admin);
    expect(again.status).toBe(200);
  });

  it("drops a client that reads nothing once a megabyte waits for it, at once: its slot comes back, no heartbeat follows", async () => {
    const t = await testApi({ server: { heartbeatMs: 20, limits: { streamsPerToken: 1 } } });
    await t.engine.registerWorkflow({
      id: "big",
      nodes: [
        {
          node_id: "check",
          agent_type: "human_review",
          timeout: 3600,
          payload: { title: "t", big: "{{ input.big }}", assignees: ["alice"] },
        },
      ],
    });
    const base = await t.app.listen({ host: "127.0.0.1", port: 0 });
    const url = new URL(base);
    const socket = connect(Number(url.port), url.hostname);
    sockets.push(socket);
    socket.on("error", () => undefined);
    socket.write(`GET /v1/stream HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKENS.alice}\r\n\r\n`);
    await new Promise<void>((resolve) => socket.once("data", () => resolve()));
    socket.pause(); // reads nothing more: the kernel's buffers fill, then the server's
    const big = "x".repeat(400_000);
    for (let i = 0; i < 40; i++) await t.engine.startRun("big", { input: { big } });
    // Heartbeats every 20 ms meanwhile: one written after the stream ended would crash the process.
    let again = await openStream(base, TOKENS.alice);
    for (let tries = 0; again.status !== 200 && tries < 100; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      again = await openStream(base, TOKENS.alice);
    }
    expect(again.status).toBe(200);
  });

  it("gives back nothing it did not take: a client that leaves while its run is read holds no slot", async () => {
    const t = await testApi({ server: { limits: { streamsPerToken: 1 } } });
    await t.engine.registerWorkflow(WORKFLOWS.review);
    const run = await t.engine.startRun("review");
    const base = await t.app.listen({ host: "127.0.0.1", port: 0 });
    // The run is read slowly (PostgreSQL's round trip), and the client leaves meanwhile.
    const getRun = t.engine.getRun.bind(t.engine);
    let reading: () => void = () => undefined;
    const read = new Promise<void>((resolve) => {
      reading = resolve;
    });
    let left: Promise<void> = Promise.resolve();
    t.engine.getRun = (async (id: string) => {
      reading();
      await left;
      return getRun(id);
    }) as typeof t.engine.getRun;
    const req = request(`${base}/v1/stream?run_id=${run.run_id}`, { headers: bearer(TOKENS.alice) });
    const closed = new Promise<void>((resolve) => req.on("close", () => resolve()));
    req.on("error", () => undefined);
    left = new Promise((resolve) => closed.then(() => setTimeout(resolve, 50)));
    req.end();
    await read;
    req.destroy();
    await left;
    t.engine.getRun = getRun;
    expect((await openStream(base, TOKENS.alice)).status).toBe(200);
  });
});

describe("the connection: timeouts and oversized headers", () => {
  const limits = { headersTimeoutMs: 150, requestTimeoutMs: 300, keepAliveTimeoutMs: 100, idleTimeoutMs: 400 };

  it("answers headers that never end 408 in the error shape and closes the connection", async () => {
    const { app } = await testApi({ server: { limits } });
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const text = await rawConnection(base, "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n");
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)).error.code).toBe("request_timeout");
  });

  it("answers a request line and headers over 16 KiB 431 in the error shape", async () => {
    const { app } = await testApi();
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const text = await rawConnection(base, `GET /v1/runs/${"r".repeat(20_000)} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    expect(text).toMatch(/^HTTP\/1\.1 431 /);
    expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)).error.code).toBe("headers_too_large");
  });

  it("answers an HTTP/1.1 request without a Host header 400 in the error shape", async () => {
    const { app } = await testApi();
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const text = await rawConnection(
      base,
      `GET /v1/runs HTTP/1.1\r\nAuthorization: Bearer ${TOKENS.admin}\r\nConnection: close\r\n\r\n`,
    );
    expect(text).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)).error).toMatchObject({
      code: "bad_request",
      message: expect.stringContaining("Host"),
    });
  });

  it("answers a body that never arrives in full 408", async () => {
    const { app } = await testApi({ server: { limits } });
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const text = await rawConnection(
      base,
      `POST /v1/runs HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKENS.admin}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"workflow_id":`,
    );
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
  });

  it("closes a kept-alive connection that sends no further request, and one that sends nothing", async () => {
    const { app } = await testApi({ server: { limits } });
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const answered = await rawConnection(base, "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    expect(answered).toMatch(/^HTTP\/1\.1 200 /);
    expect(answered).toContain("keep-alive");
    // A connection that never starts a request is timed out like one whose headers never end.
    expect(await rawConnection(base, "")).toMatch(/^HTTP\/1\.1 408 /);
  });

  it("keeps an event stream open past the idle timeout: its heartbeats are traffic", async () => {
    const { app } = await testApi({ server: { limits, heartbeatMs: 50 } });
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const stream = await openStream(base, TOKENS.alice);
    let beats = 0;
    let closed = false;
    stream.res.on("close", () => {
      closed = true;
    });
    // 12 heartbeats of 50 ms outlast the 400 ms idle timeout.
    await new Promise<void>((resolve) =>
      stream.res.on("data", (chunk: string) => {
        beats += chunk.split(": heartbeat").length - 1;
        if (beats >= 12) resolve();
      }),
    );
    expect(closed).toBe(false);
  });
});
