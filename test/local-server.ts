/** A real local HTTP server (node:http) for the tests of what Skein calls: each request recorded, answered by the test's route. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}

export type Route = (req: SeenRequest, res: ServerResponse, raw: IncomingMessage) => void;

export interface TestServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  requests: SeenRequest[];
  /** Answers every request from now on. */
  route: Route;
  close(): Promise<void>;
}

/** Starts a server on a free loopback port; `close` ends its connections too. */
export async function startServer(route: Route): Promise<TestServer> {
  const state: TestServer = { url: "", requests: [], route, close: async () => undefined };
  const server: Server = createServer((raw, res) => {
    const chunks: Buffer[] = [];
    raw.on("data", (c: Buffer) => chunks.push(c));
    raw.on("end", () => {
      const seen = {
        method: raw.method ?? "",
        url: raw.url ?? "",
        headers: raw.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      state.requests.push(seen);
      state.route(seen, res, raw);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}

/** Answers with JSON. */
export function json(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(value));
}

/**
 * Writes `chunks` (a generator: never built in memory) as they are drained by the client, until
 * they end or the client closes the connection; resolves with the bytes written by then. A client
 * that stops reading early shows as a count far below the whole (the rest was never produced).
 */
export function pour(res: ServerResponse, chunks: Iterable<string>): Promise<number> {
  return new Promise((resolve) => {
    let written = 0;
    let closed = false;
    const it = chunks[Symbol.iterator]();
    const next = () => {
      while (!closed) {
        const step = it.next();
        if (step.done) {
          res.end(() => resolve(written));
          return;
        }
        written += Buffer.byteLength(step.value);
        if (!res.write(step.value)) {
          res.once("drain", next);
          return;
        }
      }
    };
    res.once("close", () => {
      closed = true;
      resolve(written);
    });
    next();
  });
}

/** `head` once, then `part` for ever (or `times` times). */
export function* repeated(head: string, part: string, times = Number.POSITIVE_INFINITY): Generator<string> {
  yield head;
  for (let i = 0; i < times; i++) yield part;
}
