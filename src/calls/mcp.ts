/**
 * The engine's MCP client (DESIGN: the `agent` node's MCP tools): the engine option
 * `mcp: { servers }` names Model Context Protocol servers, reached over Streamable HTTP (`url`)
 * or by starting a process that speaks it on stdio (`command`). An `agent` node lists a server's
 * tools for its model and calls the ones the model picks, through `McpClients`.
 *
 * One connection per server, made on first use and shared by every call: an MCP session is
 * stateful (an initialize handshake; for stdio, a child process), too dear to make per call.
 * A connection that closes (the child exits) or whose transport fails (a refused connection, an
 * HTTP error) is dropped, and the next call makes a new one: a restarted server must not wedge
 * the engine. A stateful HTTP server that forgot the session (it restarted: 404 on a request
 * with the session id) ran nothing; the spec has the client start a new session, and the call
 * is sent again on it, once.
 *
 * Failures the next attempt may not repeat (a connection, a timeout, a transport failure, a
 * JSON-RPC error answered by the server) are RetryableError; the rest (an unknown server or
 * tool, a secret refused for the host) NonRetryableError. A tool's own failure (`isError`) is
 * no exception: it is the tool's answer, for the model to read.
 *
 * Before connecting to a `url` server, every secret its URL and headers carry must allow its
 * host (the secret's `hosts`, DESIGN §13.1), as for an llm provider. The transport follows a
 * redirect only within the same origin (the SDK's default), so the headers stay on that host.
 */
import { createRequire } from "node:module";
import type { Readable } from "node:stream";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult, McpError, Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Json } from "../core/types.js";
import type { Secrets } from "../engine/attempts/secrets.js";
import { NonRetryableError, type Problem, RetryableError, SkeinError, ValidationError } from "../errors.js";

/** The SDK's parts this client uses. */
interface Sdk {
  Client: typeof import("@modelcontextprotocol/sdk/client/index.js").Client;
  StdioClientTransport: typeof import("@modelcontextprotocol/sdk/client/stdio.js").StdioClientTransport;
  getDefaultEnvironment: typeof import("@modelcontextprotocol/sdk/client/stdio.js").getDefaultEnvironment;
  StreamableHTTPClientTransport: typeof import("@modelcontextprotocol/sdk/client/streamableHttp.js").StreamableHTTPClientTransport;
  StreamableHTTPError: typeof import("@modelcontextprotocol/sdk/client/streamableHttp.js").StreamableHTTPError;
  McpError: typeof import("@modelcontextprotocol/sdk/types.js").McpError;
  ErrorCode: typeof import("@modelcontextprotocol/sdk/types.js").ErrorCode;
  ToolListChangedNotificationSchema: typeof import("@modelcontextprotocol/sdk/types.js").ToolListChangedNotificationSchema;
}

let sdk: Sdk | null = null;

/**
 * The SDK, loaded on the first connection: importing it costs about half a second of start-up,
 * which an engine (or a `skein` command) without MCP servers should not pay.
 */
async function loadSdk(): Promise<Sdk> {
  if (sdk) return sdk;
  const [client, stdio, http, types] = await Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/stdio.js"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
    import("@modelcontextprotocol/sdk/types.js"),
  ]);
  sdk = {
    Client: client.Client,
    StdioClientTransport: stdio.StdioClientTransport,
    getDefaultEnvironment: stdio.getDefaultEnvironment,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
    StreamableHTTPError: http.StreamableHTTPError,
    McpError: types.McpError,
    ErrorCode: types.ErrorCode,
    ToolListChangedNotificationSchema: types.ToolListChangedNotificationSchema,
  };
  return sdk;
}

/** Whether `e` is the SDK's JSON-RPC error (only once the SDK is loaded: before, nothing could throw one). */
function isMcpError(e: unknown): e is McpError {
  return sdk !== null && e instanceof sdk.McpError;
}

/** A server reached over Streamable HTTP, or a command started that speaks MCP on its stdin and stdout. */
export type McpServerOption =
  | { url: string; headers?: Record<string, string> }
  | { command: string; args?: string[]; env?: Record<string, string>; cwd?: string };

/** The engine option `mcp`. */
export interface McpOptions {
  /** By name: what an agent node's `mcp` names. */
  servers: Record<string, McpServerOption>;
}

/** One tool as the model sees it: OpenAI function-tool fields. */
export interface McpTool {
  name: string;
  description: string;
  /** The tool's `inputSchema` (JSON Schema), as the server gives it. */
  parameters: Record<string, Json>;
}

/** A tool call's outcome: `content` is what goes back to the model (text joined, or JSON of structuredContent), `isError` the server's flag. */
export interface McpCallResult {
  content: string;
  isError: boolean;
  structured?: Json;
}

/** The `_meta` key of a tools/call request that carries the visit's idempotency key, the same on every attempt. */
export const IDEMPOTENCY_META_KEY = "skein/idempotency_key";

/** A server's name: what a node's `mcp` spells, and a key safe in paths, metrics and logs. */
export const MCP_SERVER_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * How long one request (initialize, a page of tools/list, a tool call) may take before it fails
 * retryably: the SDK's default, made explicit. A node's own timeout aborts sooner through the signal.
 */
export const MCP_REQUEST_TIMEOUT_MS = 60_000;

/** The most of a stdio server's stderr kept for the message of a failure (its last words say why it died). */
const STDERR_TAIL_CHARS = 2048;

const VERSION = (createRequire(import.meta.url)("../../package.json") as { version: string }).version;

const URL_KEYS = new Set(["url", "headers"]);
const COMMAND_KEYS = new Set(["command", "args", "env", "cwd"]);
/** A header's name as RFC 9110 allows it (a `token`): fetch refuses others, and only when called. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Every problem of the option (paths like `mcp.servers.search.url`), [] when valid or absent. Checked by createEngine. */
export function mcpOptionProblems(option: unknown): Problem[] {
  if (option === undefined) return [];
  if (!isObject(option) || !isObject(option.servers)) {
    return [
      {
        path: "mcp.servers",
        message:
          'must be an object of MCP servers by name, e.g. { search: { url: "https://mcp.example.com/mcp" } } or { files: { command: "npx", args: [...] } }',
      },
    ];
  }
  const problems: Problem[] = [];
  for (const key of Object.keys(option)) {
    if (key !== "servers")
      problems.push({ path: `mcp.${key}`, message: "is not an mcp option: the only one is servers" });
  }
  for (const [name, server] of Object.entries(option.servers)) {
    problems.push(...serverProblems(name, server));
  }
  return problems;
}

function serverProblems(name: string, server: unknown): Problem[] {
  const at = `mcp.servers.${name}`;
  const problems: Problem[] = [];
  if (!MCP_SERVER_NAME.test(name)) {
    problems.push({
      path: at,
      message:
        "a server's name is 1 to 64 letters, digits, '_' or '-' (agent nodes name it in their mcp field): rename it",
    });
  }
  if (!isObject(server)) {
    problems.push({ path: at, message: "must be { url, headers? } or { command, args?, env?, cwd? }" });
    return problems;
  }
  const hasUrl = server.url !== undefined;
  const hasCommand = server.command !== undefined;
  if (hasUrl && hasCommand) {
    problems.push({
      path: at,
      message:
        "has both url and command: give url for a server over HTTP, or command for one the engine starts, not both",
    });
    return problems;
  }
  if (!hasUrl && !hasCommand) {
    problems.push({
      path: at,
      message: "has neither url nor command: give url (a server over HTTP) or command (one the engine starts on stdio)",
    });
    return problems;
  }
  const allowed = hasUrl ? URL_KEYS : COMMAND_KEYS;
  for (const key of Object.keys(server)) {
    if (allowed.has(key)) continue;
    const other = hasUrl ? COMMAND_KEYS.has(key) : URL_KEYS.has(key);
    problems.push({
      path: `${at}.${key}`,
      message: other
        ? `is for ${hasUrl ? "a command server, and this one has url" : "a url server, and this one has command"}: remove it`
        : `is not a server option: ${hasUrl ? "a url server has url and headers" : "a command server has command, args, env and cwd"}`,
    });
  }
  if (hasUrl) {
    if (!isHttpUrl(server.url)) {
      problems.push({
        path: `${at}.url`,
        message: `must be an http(s) URL such as "https://mcp.example.com/mcp", got ${JSON.stringify(server.url)}`,
      });
    }
    const headers = server.headers;
    if (headers !== undefined) {
      if (!isObject(headers) || Object.values(headers).some((v) => typeof v !== "string")) {
        problems.push({ path: `${at}.headers`, message: "must be an object of header names to strings" });
      } else {
        for (const key of Object.keys(headers)) {
          if (!HEADER_NAME.test(key)) {
            problems.push({
              path: `${at}.headers.${key}`,
              message: "is not a valid header name (letters, digits, and !#$%&'*+-.^_`|~)",
            });
          }
        }
      }
    }
    return problems;
  }
  if (typeof server.command !== "string" || server.command.trim() === "") {
    problems.push({ path: `${at}.command`, message: 'must be a non-empty string: the program to start, e.g. "npx"' });
  }
  if (server.args !== undefined && (!Array.isArray(server.args) || server.args.some((a) => typeof a !== "string"))) {
    problems.push({ path: `${at}.args`, message: "must be a list of strings" });
  }
  if (
    server.env !== undefined &&
    (!isObject(server.env) || Object.values(server.env).some((v) => typeof v !== "string"))
  ) {
    problems.push({ path: `${at}.env`, message: "must be an object of variable names to strings" });
  }
  if (server.cwd !== undefined && (typeof server.cwd !== "string" || server.cwd === "")) {
    problems.push({ path: `${at}.cwd`, message: "must be a non-empty string: the directory to start the command in" });
  }
  return problems;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function isHttpUrl(v: unknown): boolean {
  if (typeof v !== "string") return false;
  try {
    const url = new URL(v);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
}

/** One live session with a server. */
interface Connection {
  client: Client;
  /** The tools as last listed on this session; null until listed, and again when the server says they changed. */
  tools: McpTool[] | null;
  /** True once the session has a server-given id (Streamable HTTP, stateful): a 404 then means the server forgot it. */
  hasSession: () => boolean;
  /** The end of a stdio server's stderr, for messages; "" for HTTP. */
  stderr: string;
  /** True once closed by us: closing fires the client's onclose, which must not close it again. */
  dropped: boolean;
}

/** A connection being made (or made), with the connection once it is. */
interface Entry {
  ready: Promise<Connection>;
  connection?: Connection;
}

export class McpClients {
  private readonly servers: ReadonlyMap<string, McpServerOption>;
  private readonly secrets: Secrets | undefined;
  private readonly clientName: string;
  private readonly entries = new Map<string, Entry>();
  private closed = false;

  /** @throws ValidationError listing every problem of the option (createEngine checks it first) */
  constructor(option: McpOptions | undefined, context: { secrets?: Secrets; clientName?: string } = {}) {
    const problems = mcpOptionProblems(option);
    if (problems.length > 0) throw new ValidationError("mcp is invalid", problems);
    this.servers = new Map(Object.entries(option?.servers ?? {}));
    this.secrets = context.secrets;
    this.clientName = context.clientName ?? "skein";
  }

  /** The server names configured. */
  names(): string[] {
    return [...this.servers.keys()];
  }

  /** The server's tools (all pages of tools/list). Connects on first use; one connection per server, reused. */
  async listTools(server: string, signal?: AbortSignal): Promise<McpTool[]> {
    this.optionOf(server);
    return this.use(server, "tools/list", signal, (c) => this.toolsOf(c, signal));
  }

  /** Calls one tool; `idempotencyKey` goes in the request's `_meta["skein/idempotency_key"]`. */
  async callTool(
    server: string,
    name: string,
    args: Record<string, Json>,
    idempotencyKey: string,
    signal?: AbortSignal,
  ): Promise<McpCallResult> {
    this.optionOf(server);
    return this.use(server, `tools/call "${name}"`, signal, async (c) => {
      await this.checkTool(server, c, name, signal);
      const result = (await c.client.callTool(
        { name, arguments: args, _meta: { [IDEMPOTENCY_META_KEY]: idempotencyKey } },
        undefined,
        { timeout: MCP_REQUEST_TIMEOUT_MS, ...(signal ? { signal } : {}) },
      )) as CallToolResult;
      return resultOf(result);
    });
  }

  /** Closes every connection (stdio: the child process ends). Idempotent; later calls fail retryably. */
  async close(): Promise<void> {
    this.closed = true;
    const entries = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(
      entries.map(async (e) => {
        const c = await e.ready.catch(() => undefined);
        if (c !== undefined) await shut(c);
      }),
    );
  }

  /** The server's option, or the non-retryable failure naming the servers there are. */
  private optionOf(server: string): McpServerOption {
    const option = this.servers.get(server);
    if (option !== undefined) return option;
    if (this.servers.size === 0) {
      throw new NonRetryableError(
        `MCP server "${server}" is not configured, and this engine has no MCP servers: give createEngine({ mcp: { servers: { ${JSON.stringify(server)}: { url } } } }) or { command }`,
      );
    }
    throw new NonRetryableError(
      `MCP server "${server}" is not configured; this engine's MCP servers are ${this.names()
        .map((n) => `"${n}"`)
        .join(", ")} (engine option mcp.servers)`,
    );
  }

  /**
   * Runs `fn` on the server's connection, making one if needed; a failure is dropped connection
   * and a RetryableError, except a session the server forgot, which is made again and `fn` run once more.
   */
  private async use<T>(
    server: string,
    what: string,
    signal: AbortSignal | undefined,
    fn: (c: Connection) => Promise<T>,
  ): Promise<T> {
    for (let again = false; ; again = true) {
      const c = await this.connection(server, signal);
      try {
        return await fn(c);
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        if (e instanceof SkeinError) throw e;
        if (!isMcpError(e) || e.code === sdk?.ErrorCode.ConnectionClosed) this.drop(server, c);
        // The server answered 404 to a request with our session id: it forgot the session and ran nothing (the MCP spec, Session Management).
        const forgotten = sdk !== null && e instanceof sdk.StreamableHTTPError && e.code === 404 && c.hasSession();
        if (forgotten && !again) continue;
        throw this.failure(server, c, what, e);
      }
    }
  }

  private failure(server: string, c: Connection, what: string, e: unknown): RetryableError {
    const who = `MCP server "${server}" (${this.where(server)})`;
    const stderr = c.stderr === "" ? "" : `; its stderr ends:\n${c.stderr}`;
    if (isMcpError(e)) {
      if (e.code === sdk?.ErrorCode.RequestTimeout) {
        return new RetryableError(`${who} did not answer ${what} within ${MCP_REQUEST_TIMEOUT_MS} ms`, { cause: e });
      }
      if (e.code === sdk?.ErrorCode.ConnectionClosed) {
        return new RetryableError(`${who} closed the connection during ${what}${stderr}`, { cause: e });
      }
      return new RetryableError(`${who} answered ${what} with error ${e.code}: ${serverMessage(e)}`, { cause: e });
    }
    return new RetryableError(`${who} failed during ${what}: ${causeOf(e)}${stderr}`, { cause: e });
  }

  /** The server's tools on this connection: listed once (every page), again after the server says they changed. */
  private async toolsOf(c: Connection, signal: AbortSignal | undefined): Promise<McpTool[]> {
    if (c.tools !== null) return c.tools;
    const tools: McpTool[] = [];
    let cursor: string | undefined;
    do {
      const page = await c.client.listTools(cursor === undefined ? {} : { cursor }, {
        timeout: MCP_REQUEST_TIMEOUT_MS,
        ...(signal ? { signal } : {}),
      });
      tools.push(...page.tools.map(toolOf));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    c.tools = tools;
    return tools;
  }

  /** Refuses a tool the server does not list, after listing afresh (it may have gained the tool since). */
  private async checkTool(server: string, c: Connection, name: string, signal: AbortSignal | undefined): Promise<void> {
    const cached = c.tools !== null;
    let tools = await this.toolsOf(c, signal);
    if (tools.some((t) => t.name === name)) return;
    if (cached) {
      c.tools = null;
      tools = await this.toolsOf(c, signal);
      if (tools.some((t) => t.name === name)) return;
    }
    throw new NonRetryableError(
      `MCP server "${server}" has no tool "${name}"; its tools are ${tools.length === 0 ? "none" : tools.map((t) => `"${t.name}"`).join(", ")}`,
    );
  }

  /** The server's connection, made once and shared; a caller whose signal aborts stops waiting, the connecting goes on. */
  private async connection(server: string, signal: AbortSignal | undefined): Promise<Connection> {
    if (this.closed)
      throw new RetryableError(`MCP server "${server}": the MCP clients are closed (the engine is closing)`);
    let entry = this.entries.get(server);
    if (entry === undefined) {
      const made: Entry = { ready: this.connect(server) };
      made.ready.then(
        (c) => {
          made.connection = c;
        },
        () => {
          if (this.entries.get(server) === made) this.entries.delete(server);
        },
      );
      this.entries.set(server, made);
      entry = made;
    }
    return abortable(entry.ready, signal);
  }

  /** Drops the connection if it is still the server's; the next call makes a new one. */
  private drop(server: string, c: Connection): void {
    const entry = this.entries.get(server);
    if (entry?.connection === c) this.entries.delete(server);
    void shut(c);
  }

  private async connect(server: string): Promise<Connection> {
    const option = this.optionOf(server);
    const {
      Client,
      StreamableHTTPClientTransport,
      StdioClientTransport,
      getDefaultEnvironment,
      ToolListChangedNotificationSchema,
    } = await loadSdk();
    const client = new Client({ name: this.clientName, version: VERSION });
    let connection: Connection;
    let transport: StreamableHTTPClientTransport | StdioClientTransport;
    if ("url" in option) {
      const url = new URL(option.url);
      const host = url.hostname.replace(/^\[|\]$/g, "");
      const headers = option.headers ?? {};
      const refused = this.secrets?.hostRefusal([option.url, ...Object.values(headers)], host) ?? null;
      if (refused !== null) throw new NonRetryableError(`MCP server "${server}" at ${option.url}: ${refused}`);
      const http = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
      transport = http;
      connection = { client, tools: null, hasSession: () => http.sessionId !== undefined, stderr: "", dropped: false };
    } else {
      const stdio = new StdioClientTransport({
        command: option.command,
        args: option.args ?? [],
        // The SDK's safe inherited variables (PATH, HOME, ...), so the command is found and runs.
        env: { ...getDefaultEnvironment(), ...option.env },
        ...(option.cwd === undefined ? {} : { cwd: option.cwd }),
        stderr: "pipe",
      });
      transport = stdio;
      connection = { client, tools: null, hasSession: () => false, stderr: "", dropped: false };
      const stderr = stdio.stderr as Readable | null;
      stderr?.setEncoding("utf8");
      stderr?.on("data", (chunk: string) => {
        connection.stderr = (connection.stderr + chunk).slice(-STDERR_TAIL_CHARS);
      });
    }
    // A session that ends (the child exited, the transport closed) is dropped at once.
    client.onclose = () => this.drop(server, connection);
    // Errors off the request path (a lost notification stream) surface on the next request, if they matter.
    client.onerror = () => undefined;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      connection.tools = null;
    });
    try {
      await client.connect(transport, { timeout: MCP_REQUEST_TIMEOUT_MS });
    } catch (e) {
      await shut(connection);
      throw this.failure(server, connection, "connecting", e);
    }
    return connection;
  }

  /** The server's address for messages: its URL without query, or its command. */
  private where(server: string): string {
    const option = this.servers.get(server);
    if (option === undefined) return "?";
    if ("url" in option) {
      const url = new URL(option.url);
      return `${url.origin}${url.pathname}`;
    }
    return `command ${JSON.stringify(option.command)}`;
  }
}

/** Closes the connection once (stdio: ends the child, waiting up to the SDK's grace periods). */
async function shut(c: Connection): Promise<void> {
  if (c.dropped) return;
  c.dropped = true;
  await c.client.close().catch(() => undefined);
}

function toolOf(t: Tool): McpTool {
  return {
    name: t.name,
    description: t.description ?? t.title ?? "",
    parameters: t.inputSchema as Record<string, Json>,
  };
}

/** What the model reads: the text of the content blocks, else the structured content as JSON; blocks without text named. */
function resultOf(r: CallToolResult): McpCallResult {
  const text = (r.content ?? [])
    .map(blockText)
    .filter((t) => t !== "")
    .join("\n");
  const structured = r.structuredContent as Json | undefined;
  const content = text === "" && structured !== undefined ? JSON.stringify(structured) : text;
  return { content, isError: r.isError === true, ...(structured === undefined ? {} : { structured }) };
}

function blockText(b: CallToolResult["content"][number]): string {
  switch (b.type) {
    case "text":
      return b.text;
    case "resource":
      return "text" in b.resource ? b.resource.text : `[resource ${b.resource.uri}: binary, not shown]`;
    case "resource_link":
      return `[resource link ${b.uri}${b.name ? ` (${b.name})` : ""}]`;
    default:
      return `[${b.type}${"mimeType" in b ? ` ${b.mimeType}` : ""}: not shown]`;
  }
}

/** A JSON-RPC error's message without the SDK's "MCP error <code>: " prefix. */
function serverMessage(e: McpError): string {
  return e.message.replace(/^MCP error -?\d+: /, "");
}

function causeOf(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const cause = e.cause instanceof Error ? `: ${e.cause.message}` : "";
  return `${e.message}${cause}`;
}

/** `promise`, or the signal's reason as soon as it aborts (the promise goes on, for others). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}
