/** `skein serve`: an engine, the HTTP API and the admin page over the database, until SIGINT or SIGTERM. */
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { type Command, InvalidArgumentError } from "commander";
import type { TokenEntry } from "../../http/auth.js";
import { loadAgents } from "../agents-module.js";
import { library } from "../database.js";
import { LLM_ENV_HELP, llmFromEnv, mcpFromEnv } from "../llm-env.js";
import { dbOf, examples, listenDatabaseOption } from "../options.js";
import { CliError } from "../output.js";
import { stopSignal } from "../signals.js";

interface ServeOptions {
  port: number;
  host: string;
  agents?: string;
  tokens?: string;
  bodyLimit: number;
  publicUrl?: string;
  egressAllow?: string[];
}

export function registerServe(program: Command): void {
  program
    .command("serve")
    .summary("run an engine, the HTTP API and the admin page")
    .description(
      "run an engine (with the agents module's handlers), the HTTP API under /v1 and the admin page at / until SIGINT/SIGTERM; logs one JSON line per request (pino, stdout), the listening URL on stderr",
    )
    .option("--port <n>", "TCP port (0: any free port)", portNumber, 8080)
    .option("--host <address>", "address to listen on; anything but loopback needs tokens", "127.0.0.1")
    .option("--agents <module>", "agents module (.js, .mjs or .ts): its default export maps agent_type to handler")
    .option(
      "--tokens <file>",
      'bearer tokens, a JSON list of { "token", "role": "admin"|"agent"|"reviewer"|"metrics", "name", "agent_types", "workflows" }; else SKEIN_TOKENS (the same JSON); none: the API is open, on loopback only (and answers only loopback Host names)',
    )
    .option("--body-limit <bytes>", "largest request body; larger ones get 413", positiveInt, 1024 * 1024)
    .option("--public-url <url>", "the API's address as clients reach it (review notification links, OpenAPI servers)")
    .option(
      "--egress-allow <entry>",
      "with tokens, http nodes may not call private or loopback addresses: allow this host name (*.example.com), CIDR, private or loopback (repeatable; else SKEIN_EGRESS_ALLOW, comma-separated)",
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .addHelpText(
      "after",
      `${examples(
        "skein serve --agents ./agents.ts",
        "skein serve --host 0.0.0.0 --port 8080 --tokens ./tokens.json --db sqlite:./skein.db",
      )}\nLog level: SKEIN_LOG_LEVEL (default info).\n${LLM_ENV_HELP}\n`,
    )
    .action(async (options: ServeOptions, command: Command) => {
      const tokens = await readTokens(options.tokens);
      if (tokens.length === 0 && !isLoopback(options.host)) {
        throw new CliError(
          `refusing to listen on ${options.host} without tokens: anyone who reaches it could start and cancel runs. Pass --tokens <file> (or SKEIN_TOKENS), or listen on loopback (--host 127.0.0.1)`,
        );
      }
      const publicUrl = options.publicUrl === undefined ? undefined : httpUrl(options.publicUrl);
      const agents = options.agents === undefined ? {} : await loadAgents(options.agents);
      const { pino } = await import("pino");
      const logger = pino({ level: process.env.SKEIN_LOG_LEVEL ?? "info" }, pino.destination({ dest: 1, sync: true }));
      const { createEngine } = await library();
      const { createServer, prometheusMetrics } = await import("../../http/server.js");
      // The engine's instruments go to this provider, whose reader GET /metrics serves.
      const metrics = prometheusMetrics();
      const { secretsFromEnv } = await import("../../engine/attempts/secrets.js");
      const engine = await createEngine({
        database: dbOf(command),
        ...listenDatabaseOption(),
        agents,
        logger,
        secrets: secretsFromEnv(),
        // Served with tokens, tenants share this host's network: private and loopback only when allowed (DESIGN §13.1).
        ...(tokens.length > 0
          ? { egress: { deny: ["private", "loopback"], allow: egressAllow(options.egressAllow) } }
          : {}),
        meterProvider: metrics.meterProvider,
        ...llmFromEnv(),
        ...mcpFromEnv(),
        ...(publicUrl ? { publicUrl } : {}),
      });
      const stop = stopSignal();
      try {
        const app = await createServer({
          engine,
          tokens,
          bodyLimit: options.bodyLimit,
          logger,
          publicUrl,
          metrics: metrics.reader,
        });
        try {
          await app.listen({ host: options.host, port: options.port });
        } catch (e) {
          const code = (e as NodeJS.ErrnoException).code;
          if (code === "EADDRINUSE" || code === "EACCES" || code === "EADDRNOTAVAIL" || code === "ENOTFOUND") {
            throw new CliError(
              `cannot listen on ${options.host}:${options.port} (${code}): pick another --host or --port`,
            );
          }
          throw e;
        }
        const url = urlOf(app.server.address() as AddressInfo);
        logger.info(
          { url, engine_id: engine.engineId, agent_types: Object.keys(agents), tokens: tokens.length },
          "serving",
        );
        process.stderr.write(
          `skein: serving the HTTP API on ${url}/v1, the admin page on ${url}/ and metrics on ${url}/metrics (${tokens.length > 0 ? `${tokens.length} token${tokens.length > 1 ? "s" : ""}` : "no tokens: open, loopback only"}); SIGINT or SIGTERM stops\n`,
        );
        const signal = await stop.received;
        logger.info({ signal }, "stopping: no new requests; closing event streams, then the engine");
        await app.close();
        await engine.close();
        await metrics.meterProvider.shutdown();
        logger.info("stopped");
      } finally {
        stop.dispose();
        await engine.close();
      }
    });
}

/** --egress-allow entries, else SKEIN_EGRESS_ALLOW (comma-separated), else none. */
function egressAllow(flags: string[] | undefined): string[] {
  if (flags !== undefined && flags.length > 0) return flags;
  return (process.env.SKEIN_EGRESS_ALLOW ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

/** --tokens FILE, else SKEIN_TOKENS, else none. @throws CliError or ValidationError saying what is wrong and where */
async function readTokens(file: string | undefined): Promise<TokenEntry[]> {
  const env = process.env.SKEIN_TOKENS;
  let text: string;
  let source: string;
  if (file !== undefined) {
    source = `tokens file ${file}`;
    try {
      text = readFileSync(file, "utf8");
    } catch (e) {
      throw new CliError(`cannot read the tokens file ${file}: ${(e as Error).message}`);
    }
  } else if (env !== undefined && env.trim() !== "") {
    source = "SKEIN_TOKENS";
    text = env;
  } else {
    return [];
  }
  // A ValidationError lists every problem with its path; the CLI prints it and exits 2.
  const { parseTokens } = await import("../../http/auth.js");
  return parseTokens(text, source);
}

/** 127.0.0.0/8, ::1 and localhost: reachable from this machine only. */
function isLoopback(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  return h === "localhost" || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h);
}

function httpUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CliError(`--public-url ${value} is not a URL: write e.g. https://skein.example.com`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new CliError(`--public-url ${value}: expected an http:// or https:// URL`);
  }
  return value.replace(/\/+$/, "");
}

function urlOf(address: AddressInfo): string {
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

function portNumber(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError("expected a port from 0 to 65535.");
  return n;
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new InvalidArgumentError("expected a whole number of bytes, at least 1.");
  return n;
}
