/**
 * `skein mcp`: a Model Context Protocol server on stdio, for coding agents (Claude Code, Cursor,
 * ...) to read runs and, with `allowWrites`, act on them. Built on the SDK's McpServer; the tools
 * (tools.ts) call a SkeinApi, over the database or over `skein serve`'s HTTP API.
 *
 * stdout is the protocol's channel: nothing else may write there (the engine's logger is silent
 * unless given one; the CLI writes its notes to stderr).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { SkeinApi } from "./skein-api.js";
import { TOOLS } from "./tools.js";

export interface McpServerOptions {
  /** Serve the write tools (start_run, decide_review, send_event, cancel_run, retry_run). */
  allowWrites: boolean;
  /** The package's version, told to the client. */
  version: string;
}

/** The server with its tools: read tools always, write tools only with `allowWrites`. */
export function skeinMcpServer(api: SkeinApi, options: McpServerOptions): McpServer {
  const served = TOOLS.filter((t) => options.allowWrites || !t.writes);
  const server = new McpServer(
    { name: "skein", version: options.version },
    {
      capabilities: { tools: {} },
      instructions: options.allowWrites
        ? "Skein durable workflow runs: find and read runs (list_workflows, list_runs, get_run, get_events, list_reviews), and start, review, send events to, cancel or retry them."
        : "Skein durable workflow runs, read-only: find and read runs (list_workflows, list_runs, get_run, get_events, list_reviews). Starting, reviewing, sending events, cancelling and retrying need the server started with skein mcp --allow-writes.",
    },
  );
  for (const t of served) {
    server.registerTool(
      t.name,
      { description: t.description, inputSchema: t.input, annotations: t.annotations },
      // The SDK has parsed the arguments with t.input; a thrown error becomes a tool error (isError).
      (args: unknown) => t.call(api, args as never),
    );
  }
  return server;
}

/**
 * Serves on stdin and stdout until stdin ends (the client closed) or `stop` resolves, then
 * closes the server. The caller closes the api.
 */
export async function serveStdio(api: SkeinApi, options: McpServerOptions, stop: Promise<unknown>): Promise<void> {
  const server = skeinMcpServer(api, options);
  const transport = new StdioServerTransport();
  // The SDK's stdio transport does not watch for the end of stdin: a client gone leaves it open.
  const ended = new Promise<void>((resolve) => {
    process.stdin.once("end", resolve);
    process.stdin.once("close", resolve);
  });
  const closed = new Promise<void>((resolve) => {
    server.server.onclose = resolve;
  });
  // A line that is not JSON-RPC, say: the client hears nothing of it, the person debugging does.
  server.server.onerror = (e) => process.stderr.write(`skein mcp: ${e.message}\n`);
  await server.connect(transport);
  await Promise.race([ended, closed, stop]);
  await server.close();
}
