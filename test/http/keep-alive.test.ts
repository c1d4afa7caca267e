/**
 * Kept-alive connections (issue 33): the server keeps an idle connection longer than the clients
 * that reuse it (undici's 4 s, load balancers' 60 s), so a client never sends a request on a
 * connection the server is closing; and closing the server still ends every connection at once.
 */
import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { bearer, TOKENS, testApi } from "./helpers.js";

const sockets: Socket[] = [];
afterEach(() => {
  for (const s of sockets.splice(0)) s.destroy();
});

/** A raw connection to `base`: what it has received so far, and whether the server closed it. */
function open(base: string): Promise<{ socket: Socket; text: () => string; closed: Promise<void> }> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    let text = "";
    const socket = connect(Number(url.port), url.hostname, () => resolve({ socket, text: () => text, closed }));
    sockets.push(socket);
    socket.setEncoding("utf8");
    socket.on("data", (c: string) => {
      text += c;
    });
    const closed = new Promise<void>((done) => socket.on("close", () => done()));
    socket.on("error", reject);
  });
}

/** Resolves once the connection has received `count` whole answers (each ends with its JSON body). */
async function answers(conn: { socket: Socket; text: () => string }, count: number): Promise<string[]> {
  const split = () =>
    conn
      .text()
      .split(/(?=HTTP\/1\.1 )/)
      .filter((a) => !a.startsWith("HTTP/1.1 100 "));
  const whole = (parts: string[]) =>
    parts.length >= count && parts.every((p) => /\r\n\r\n[\s\S]*\}$/.test(p.trimEnd().replace(/\r\n0$/, "")));
  while (!whole(split())) await new Promise((resolve) => conn.socket.once("data", resolve));
  return split();
}

const HEALTH = "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n";

describe("kept-alive connections", () => {
  it("tells clients a kept-alive connection lasts 72 s: past undici's 4 s and load balancers' 60 s", async () => {
    const { app } = await testApi();
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const conn = await open(base);
    conn.socket.write(HEALTH);
    const [answer] = await answers(conn, 1);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toMatch(/\r\nkeep-alive: timeout=72\r\n/i);
  });

  it("answers the next request on a connection that sat idle longer than the headers timeout", async () => {
    // Node counts the headers timeout from a request's first byte, not from the end of the last one.
    const { app } = await testApi({ server: { limits: { headersTimeoutMs: 100, requestTimeoutMs: 200 } } });
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const conn = await open(base);
    conn.socket.write(HEALTH);
    await answers(conn, 1);
    // The idle spell is the condition under test, not a wait for something to happen.
    await new Promise((resolve) => setTimeout(resolve, 400));
    conn.socket.write(HEALTH);
    const [, second] = await answers(conn, 2);
    expect(second).toMatch(/^HTTP\/1\.1 200 /);
  });

  it("closes every connection at once when the server closes: idle, answering a request, streaming events", async () => {
    const { app } = await testApi();
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const idle = await open(base);
    idle.socket.write(HEALTH);
    await answers(idle, 1);
    const stream = await open(base);
    stream.socket.write(`GET /v1/stream HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKENS.alice}\r\n\r\n`);
    while (!stream.text().includes(": connected")) await new Promise((resolve) => stream.socket.once("data", resolve));
    // A request the server has begun (it answered 100 Continue) whose body is still on its way.
    const body = JSON.stringify({ workflow_id: "missing", input: {} });
    const inFlight = await open(base);
    inFlight.socket.write(
      `POST /v1/runs HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${bearer(TOKENS.admin).authorization}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`,
    );
    while (!inFlight.text().includes("100 Continue"))
      await new Promise((resolve) => inFlight.socket.once("data", resolve));
    const closing = app.close();
    inFlight.socket.write(body);
    const [answer] = await answers(inFlight, 1);
    // Answered, and told not to send another request on that connection.
    expect(answer).toMatch(/^HTTP\/1\.1 404 /);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    // The server's keep-alive (72 s) would hold app.close() past the test's timeout.
    await closing;
    await Promise.all([idle.closed, stream.closed, inFlight.closed]);
  });
});
