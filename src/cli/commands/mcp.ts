/** `skein mcp`: an MCP server on stdio over the database or `skein serve`'s API, for coding agents. */
import type { Command } from "commander";
import { withClient } from "../database.js";
import { dbOf, examples, explicitDb } from "../options.js";
import { CliError } from "../output.js";
import { stopSignal } from "../signals.js";

interface McpCliOptions {
  url?: string;
  token?: string;
  allowWrites?: boolean;
}

export function registerMcp(program: Command): void {
  program
    .command("mcp")
    .summary("serve Skein's runs to a coding agent (MCP on stdio)")
    .description(
      "serve a Model Context Protocol server on stdin/stdout, for a coding agent (Claude Code, Cursor, ...): tools to list, search and read runs (state, failed nodes' errors, graph, events) and the reviews waiting; with --allow-writes also to start a run, decide a review, send an event, cancel and retry. Over the database (--db), or over skein serve's HTTP API (--url). Nothing but the protocol goes to stdout",
    )
    .option("--url <url>", "reach Skein through skein serve's HTTP API at this address instead of the database")
    .option("--token <token>", "with --url: a bearer token of skein serve's tokens; else SKEIN_TOKEN")
    .option(
      "--allow-writes",
      "also serve the tools that act: start_run, decide_review, send_event, cancel_run, retry_run",
    )
    .addHelpText(
      "after",
      `${examples(
        "skein mcp --db sqlite:./skein.db",
        "skein mcp --url http://127.0.0.1:8080 --allow-writes",
      )}\nIn a coding agent's MCP configuration (docs/cli.md#skein-from-a-coding-agent-mcp):\n  {"mcpServers": {"skein": {"command": "npx", "args": ["skein", "mcp", "--db", "sqlite:/path/to/skein.db"]}}}\n`,
    )
    .action(async (options: McpCliOptions, command: Command) => {
      const serve = {
        allowWrites: options.allowWrites === true,
        version: command.parent?.version() ?? "unknown",
      };
      const { serveStdio } = await import("../../mcp/server.js");
      const stop = stopSignal();
      try {
        if (options.url !== undefined) {
          if (explicitDb(command) !== undefined) throw new CliError("pass --db or --url, not both");
          const { httpApi } = await import("../../mcp/http-api.js");
          await serveStdio(
            httpApi(httpUrl(options.url), options.token ?? process.env.SKEIN_TOKEN),
            serve,
            stop.received,
          );
          return;
        }
        if (options.token !== undefined) throw new CliError("--token is for --url: the database needs none");
        const { engineApi } = await import("../../mcp/engine-api.js");
        await withClient(dbOf(command), (client) => serveStdio(engineApi(client), serve, stop.received));
      } finally {
        stop.dispose();
      }
    });
}

function httpUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CliError(`--url ${value} is not a URL: write skein serve's address, e.g. http://127.0.0.1:8080`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new CliError(`--url ${value}: expected an http:// or https:// URL`);
  }
  return value;
}
