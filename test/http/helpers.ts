/**
 * The HTTP API in process: a server over a test engine (test/helpers.ts: a fresh database, a
 * manual clock), closed after each test. Requests go through `app.inject`, without a port.
 */
import type { FastifyInstance } from "fastify";
import { afterEach } from "vitest";
import type { TokenEntry } from "../../src/http/auth.js";
import { createServer, type ServerOptions } from "../../src/http/server.js";
import { type EngineOptions, NonRetryableError, type Task } from "../../src/index.js";
import { testEngine } from "../helpers.js";
import { json, startServer, type TestServer } from "../local-server.js";

export const TOKENS = {
  admin: "admin-0123456789abcdef",
  alice: "reviewer-alice-0123456789",
  bob: "reviewer-bob-0123456789ab",
  agent: "agent-0123456789abcdef01",
} as const;

export const TOKEN_LIST: TokenEntry[] = [
  { token: TOKENS.admin, role: "admin", name: "ops" },
  { token: TOKENS.alice, role: "reviewer", name: "alice" },
  { token: TOKENS.bob, role: "reviewer", name: "bob" },
  { token: TOKENS.agent, role: "agent", name: "worker-1", agent_types: ["writer"] },
];

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

export const agents = {
  writer: (task: Task) => ({ title: "t", node: task.node_id }),
  broken: () => {
    throw new NonRetryableError("the upstream API said no");
  },
};

export const WORKFLOWS = {
  /** a -> b: succeeds at once. */
  simple: {
    id: "simple",
    nodes: [
      { node_id: "a", agent_type: "writer" },
      { node_id: "b", agent_type: "writer", depends_on: ["a"] },
    ],
  },
  /** draft, then a review only alice may decide, then publish. */
  review: {
    id: "review",
    nodes: [
      { node_id: "draft", agent_type: "writer" },
      {
        node_id: "check",
        agent_type: "human_review",
        depends_on: ["draft"],
        timeout: 3600,
        payload: { title: "Publish {{ nodes.draft.output.title }}?", assignees: ["alice"] },
        next_on_success: "publish",
      },
      { node_id: "publish", agent_type: "writer" },
    ],
  },
  /** Fails for good at its only node. */
  failing: { id: "failing", nodes: [{ node_id: "a", agent_type: "broken" }] },
};

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

/** An API over a fresh engine (with `agents`), with the test tokens unless `open`. */
export async function testApi(
  options: { open?: boolean; engine?: EngineOptions; server?: Partial<ServerOptions> } = {},
) {
  const t = await testEngine({ agents, ...options.engine });
  const app = await createServer({
    engine: t.engine,
    ...(options.open ? {} : { tokens: TOKEN_LIST }),
    ...options.server,
  });
  apps.push(app);
  return { ...t, app };
}

const proxies: TestServer[] = [];
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((p) => p.close()));
});

/**
 * A real HTTP server in front of `app` that resets the connection of the next `resets[name]`
 * requests whose path ends in `/<name>` (`claim`, `heartbeat`, `complete`, ...) before any
 * answer, as a server closing a kept-alive connection does, and hands every other one to the API.
 * `sent(name)` counts the requests that arrived, reset ones too. Closed after the test.
 */
export async function resettingProxy(app: FastifyInstance, resets: Record<string, number>) {
  const proxy = await startServer((req, res, raw) => {
    const name = req.url.slice(req.url.lastIndexOf("/") + 1);
    if ((resets[name] ?? 0) > 0) {
      resets[name] = (resets[name] ?? 0) - 1;
      raw.socket.resetAndDestroy();
      return;
    }
    void app
      .inject({ method: req.method as "POST", url: req.url, headers: req.headers, payload: req.body })
      .then((answer) => json(res, answer.statusCode, answer.json()));
  });
  proxies.push(proxy);
  return { url: proxy.url, sent: (name: string) => proxy.requests.filter((r) => r.url.endsWith(`/${name}`)).length };
}
