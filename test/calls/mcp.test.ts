/**
 * The engine's MCP client (src/calls/mcp.ts) against a real MCP server built on the SDK
 * (test/fixtures/mcp-server.ts): in-process over Streamable HTTP, and as a child process on stdio.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { McpClients, type McpOptions, mcpOptionProblems } from "../../src/calls/mcp.js";
import { Secrets } from "../../src/engine/attempts/secrets.js";
import { NonRetryableError, RetryableError, ValidationError } from "../../src/errors.js";
import { type McpCall, type McpHttpServer, startMcpHttpServer } from "../fixtures/mcp-server.js";
import { tempDir } from "../helpers.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const FIXTURE = fileURLToPath(new URL("../fixtures/mcp-server.ts", import.meta.url));

const servers: McpHttpServer[] = [];
const clients: McpClients[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function httpServer(port?: number): Promise<McpHttpServer> {
  const server = await startMcpHttpServer(port === undefined ? {} : { port });
  servers.push(server);
  return server;
}

function clientsOf(option: McpOptions, secrets?: Secrets): McpClients {
  const c = new McpClients(option, secrets ? { secrets } : {});
  clients.push(c);
  return c;
}

/** The fixture on stdio, recording its calls in a file of its own. */
function stdioServer(): { option: McpOptions["servers"][string]; calls: () => McpCall[] } {
  const file = join(tempDir(), "mcp-calls.jsonl");
  return {
    option: {
      command: process.execPath,
      args: ["--import", "tsx", FIXTURE, "--stdio"],
      env: { MCP_CALLS_FILE: file },
      cwd: ROOT,
    },
    calls: () => {
      try {
        return readFileSync(file, "utf8")
          .trim()
          .split("\n")
          .filter((l) => l !== "")
          .map((l) => JSON.parse(l) as McpCall);
      } catch {
        return [];
      }
    },
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw e;
  }
}

const LOOKUP_PARAMETERS = {
  type: "object",
  properties: { order_id: { type: "string" } },
  required: ["order_id"],
};

describe("mcpOptionProblems", () => {
  it("accepts servers with url or command, and no option at all", () => {
    expect(mcpOptionProblems(undefined)).toEqual([]);
    expect(
      mcpOptionProblems({
        servers: {
          search: { url: "https://mcp.example.com/mcp", headers: { authorization: "Bearer x" } },
          "files_2-b": { command: "npx", args: ["-y", "server-files"], env: { ROOT: "/tmp" }, cwd: "/tmp" },
        },
      }),
    ).toEqual([]);
  });

  it("names every problem with its path: a bad name, both url and command, neither, a bad url scheme, bad fields", () => {
    const problems = mcpOptionProblems({
      servers: {
        "bad name!": { url: "https://mcp.example.com/mcp" },
        both: { url: "https://mcp.example.com/mcp", command: "npx" },
        neither: { args: ["x"] },
        ftp: { url: "ftp://mcp.example.com/mcp" },
        relative: { url: "/mcp" },
        headers: { url: "https://mcp.example.com/mcp", headers: { "bad header": "x" } },
        mixed: { command: "npx", headers: { a: "b" } },
        args: { command: "npx", args: "-y" },
        empty: { command: "" },
      },
    });
    const paths = problems.map((p) => p.path);
    expect(paths).toEqual([
      "mcp.servers.bad name!",
      "mcp.servers.both",
      "mcp.servers.neither",
      "mcp.servers.ftp.url",
      "mcp.servers.relative.url",
      "mcp.servers.headers.headers.bad header",
      "mcp.servers.mixed.headers",
      "mcp.servers.args.args",
      "mcp.servers.empty.command",
    ]);
    expect(problems[0]?.message).toMatch(/letters, digits, '_' or '-'/);
    expect(problems[1]?.message).toMatch(/both url and command/);
    expect(problems[2]?.message).toMatch(/neither url nor command/);
    expect(problems[3]?.message).toMatch(/http\(s\) URL.*"ftp:\/\/mcp.example.com\/mcp"/);
    expect(problems[6]?.message).toMatch(/is for a url server/);
  });

  it("refuses an option that is not { servers }; the constructor throws every problem", () => {
    expect(mcpOptionProblems({ server: {} })).toEqual([{ path: "mcp.servers", message: expect.any(String) }]);
    expect(mcpOptionProblems({ servers: {}, timeout: 5 })).toEqual([
      { path: "mcp.timeout", message: expect.stringMatching(/the only one is servers/) },
    ]);
    expect(() => new McpClients({ servers: { x: { url: "nope" } } })).toThrow(ValidationError);
  });
});

describe("McpClients over Streamable HTTP", () => {
  it("lists the tools as the model sees them: names, descriptions, inputSchema as parameters", async () => {
    const server = await httpServer();
    const mcp = clientsOf({ servers: { shop: { url: server.url } } });
    expect(mcp.names()).toEqual(["shop"]);

    const tools = await mcp.listTools("shop");
    expect(tools.map((t) => t.name)).toEqual(["lookup", "add", "fail", "hang"]);
    expect(tools[0]).toEqual({
      name: "lookup",
      description: "Looks up an order's shipping status.",
      parameters: expect.objectContaining(LOOKUP_PARAMETERS),
    });
  });

  it("calls a tool with its arguments, the idempotency key in _meta and the configured headers", async () => {
    const server = await httpServer();
    const mcp = clientsOf({ servers: { shop: { url: server.url, headers: { "x-team": "triage" } } } });

    const result = await mcp.callTool("shop", "lookup", { order_id: "A-17" }, "run-1:ask:1");

    expect(result).toEqual({ content: "order A-17: shipped", isError: false });
    expect(server.calls).toHaveLength(1);
    expect(server.calls[0]).toMatchObject({
      tool: "lookup",
      arguments: { order_id: "A-17" },
      idempotency_key: "run-1:ask:1",
    });
    expect(server.calls[0]?.headers?.["x-team"]).toBe("triage");
  });

  it("returns structured content with its text, and a tool's failure as isError (not thrown)", async () => {
    const server = await httpServer();
    const mcp = clientsOf({ servers: { shop: { url: server.url } } });

    expect(await mcp.callTool("shop", "add", { a: 2, b: 3 }, "k-add")).toEqual({
      content: '{"sum":5}',
      isError: false,
      structured: { sum: 5 },
    });
    expect(await mcp.callTool("shop", "fail", {}, "k-fail")).toEqual({ content: "the tool failed", isError: true });
  });

  it("refuses a tool the server does not have, naming its tools, without calling it", async () => {
    const server = await httpServer();
    const mcp = clientsOf({ servers: { shop: { url: server.url } } });

    const error = await mcp.callTool("shop", "refund", {}, "k").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NonRetryableError);
    expect((error as Error).message).toBe(
      'MCP server "shop" has no tool "refund"; its tools are "lookup", "add", "fail", "hang"',
    );
    expect(server.calls).toEqual([]);
  });

  it("refuses a server that is not configured, naming those that are", async () => {
    const mcp = clientsOf({ servers: { shop: { url: "http://127.0.0.1:1/mcp" }, search: { command: "x" } } });
    for (const call of [() => mcp.listTools("crm"), () => mcp.callTool("crm", "lookup", {}, "k")]) {
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(NonRetryableError);
      expect((error as Error).message).toBe(
        'MCP server "crm" is not configured; this engine\'s MCP servers are "shop", "search" (engine option mcp.servers)',
      );
    }
    const none = await clientsOf({ servers: {} })
      .listTools("crm")
      .catch((e: unknown) => e);
    expect((none as Error).message).toMatch(/this engine has no MCP servers/);
  });

  it("fails retryably when the server is down", async () => {
    const server = await httpServer();
    const url = server.url;
    await server.close();
    const mcp = clientsOf({ servers: { shop: { url } } });

    const error = await mcp.listTools("shop").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as Error).message).toMatch(
      /^MCP server "shop" \(http:\/\/127\.0\.0\.1:\d+\/mcp\) failed during connecting: /,
    );
  });

  it("makes a new session when the server restarted on the same port: the next call works", async () => {
    const first = await httpServer();
    const mcp = clientsOf({ servers: { shop: { url: first.url } } });
    expect(await mcp.callTool("shop", "lookup", { order_id: "A" }, "k-1")).toMatchObject({ isError: false });
    await first.close();

    const second = await httpServer(first.port);
    const result = await mcp.callTool("shop", "lookup", { order_id: "B" }, "k-2");

    expect(result).toEqual({ content: "order B: shipped", isError: false });
    // The call went first with the old session (refused, so not run), then again on a new one.
    expect(second.unknownSessions()).toBeGreaterThanOrEqual(1);
    expect(second.calls.map((c) => [c.tool, c.idempotency_key])).toEqual([["lookup", "k-2"]]);
  });

  it("reconnects once the server is back after being down", async () => {
    const first = await httpServer();
    const mcp = clientsOf({ servers: { shop: { url: first.url } } });
    await first.close();
    await expect(mcp.listTools("shop")).rejects.toBeInstanceOf(RetryableError);

    await httpServer(first.port);
    expect((await mcp.listTools("shop")).map((t) => t.name)).toContain("lookup");
  });

  it("aborts a call by its signal: the server hears the cancellation, and the connection still serves", async () => {
    const server = await httpServer();
    const mcp = clientsOf({ servers: { shop: { url: server.url } } });
    const controller = new AbortController();
    const reason = new Error("the attempt timed out");

    const call = mcp.callTool("shop", "hang", {}, "k-hang", controller.signal).catch((e: unknown) => e);
    await server.callOf("hang");
    controller.abort(reason);

    expect(await call).toBe(reason);
    expect(await server.callOf("hang:cancelled")).toMatchObject({ idempotency_key: "k-hang" });
    expect(await mcp.callTool("shop", "lookup", { order_id: "C" }, "k-c")).toMatchObject({ isError: false });
  });

  it("refuses to send a secret in a header to a host outside its hosts, before any request", async () => {
    const server = await httpServer();
    const secrets = new Secrets({ MCP_TOKEN: { value: "tok-1234567890", hosts: ["mcp.example.com"] } });
    const mcp = clientsOf(
      { servers: { shop: { url: server.url, headers: { authorization: "Bearer tok-1234567890" } } } },
      secrets,
    );

    const error = await mcp.listTools("shop").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NonRetryableError);
    expect((error as Error).message).toMatch(
      /^MCP server "shop" at http:\/\/127\.0\.0\.1:\d+\/mcp: secret MCP_TOKEN may be sent only to mcp\.example\.com \(its hosts\), not to 127\.0\.0\.1/,
    );
    expect(server.requests()).toBe(0);
  });

  it("closes: later calls fail retryably, and closing again is harmless", async () => {
    const server = await httpServer();
    const mcp = clientsOf({ servers: { shop: { url: server.url } } });
    await mcp.listTools("shop");
    await mcp.close();
    await mcp.close();
    await expect(mcp.listTools("shop")).rejects.toBeInstanceOf(RetryableError);
  });
});

describe("McpClients over stdio", () => {
  it("starts the command once, lists its tools and calls them with the idempotency key", async () => {
    const stdio = stdioServer();
    const mcp = clientsOf({ servers: { local: stdio.option } });

    const tools = await mcp.listTools("local");
    expect(tools.map((t) => t.name)).toEqual(["lookup", "add", "fail", "hang"]);
    expect(tools[0]).toEqual({
      name: "lookup",
      description: "Looks up an order's shipping status.",
      parameters: expect.objectContaining(LOOKUP_PARAMETERS),
    });
    expect(await mcp.callTool("local", "lookup", { order_id: "S-1" }, "run-2:ask:1")).toEqual({
      content: "order S-1: shipped",
      isError: false,
    });
    expect(await mcp.callTool("local", "add", { a: 1, b: 1 }, "run-2:ask:2")).toMatchObject({ structured: { sum: 2 } });

    const calls = stdio.calls();
    expect(calls.map((c) => [c.tool, c.arguments, c.idempotency_key])).toEqual([
      ["lookup", { order_id: "S-1" }, "run-2:ask:1"],
      ["add", { a: 1, b: 1 }, "run-2:ask:2"],
    ]);
    expect(calls[0]?.pid).toBe(calls[1]?.pid);
  });

  it("close() ends the child process", async () => {
    const stdio = stdioServer();
    const mcp = clientsOf({ servers: { local: stdio.option } });
    await mcp.callTool("local", "lookup", { order_id: "S-2" }, "k");
    const pid = stdio.calls()[0]?.pid as number;
    expect(alive(pid)).toBe(true);

    await mcp.close();

    expect(alive(pid)).toBe(false);
  });

  it("starts the command again after its process died", async () => {
    const stdio = stdioServer();
    const mcp = clientsOf({ servers: { local: stdio.option } });
    await mcp.callTool("local", "lookup", { order_id: "1" }, "k-1");
    const first = stdio.calls()[0]?.pid as number;
    process.kill(first, "SIGKILL");

    // The call right after the kill may still meet the dying session (a retryable failure) or a new one.
    await mcp.callTool("local", "lookup", { order_id: "2" }, "k-2").catch((e: unknown) => {
      expect(e).toBeInstanceOf(RetryableError);
    });
    expect(await mcp.callTool("local", "lookup", { order_id: "3" }, "k-3")).toMatchObject({ isError: false });
    const last = stdio.calls().at(-1);
    expect(last).toMatchObject({ arguments: { order_id: "3" } });
    expect(last?.pid).not.toBe(first);
  });

  it("fails retryably, with the process's stderr, when the command exits at once", async () => {
    const mcp = clientsOf({
      servers: {
        broken: { command: process.execPath, args: ["-e", "console.error('no config file'); process.exit(3)"] },
      },
    });
    const error = await mcp.listTools("broken").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as Error).message).toMatch(
      /^MCP server "broken" \(command ".*"\) closed the connection during connecting/,
    );
    expect((error as Error).message).toMatch(/no config file/);
  });
});
