/**
 * Opening the library for a command: a client (no engine) for the commands that read or write
 * through the database, or an engine for those that run workflows. The library is imported
 * here, on first use, so that `skein --help` never loads it.
 */
import { existsSync } from "node:fs";
import { dirname } from "node:path";
import type { Logger } from "pino";
import type { AgentHandler, Engine, RunWithNodes } from "../index.js";
import { llmFromEnv, mcpFromEnv } from "./llm-env.js";
import { listenDatabaseOption } from "./options.js";
import { CliError } from "./output.js";
import { resolveRun } from "./run-ids.js";

/** The library's public surface, loaded on demand. */
export function library(): Promise<typeof import("../index.js")> {
  return import("../index.js");
}

/**
 * Runs `fn` with a client on `db`, closing it afterwards. A reading command refuses a SQLite
 * file that does not exist rather than creating an empty one.
 */
export async function withClient<T>(
  db: string,
  fn: (client: Engine) => Promise<T>,
  options: { mustExist?: boolean } = { mustExist: true },
): Promise<T> {
  if (options.mustExist !== false) assertDatabaseExists(db);
  const { createClient } = await library();
  const client = await createClient({ database: db, ...listenDatabaseOption() });
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

/**
 * The run a whole or abbreviated run id names (run-ids.ts), with its nodes; callers go on with
 * its `run_id`. @throws CliError (exit 2) naming the database when there is no such run, or
 * listing the runs an ambiguous abbreviation names
 */
export function getRunOrFail(client: Engine, runId: string, db: string): Promise<RunWithNodes> {
  return resolveRun(client, runId, db);
}

/** An engine serving `db` with the given agents (it recovers what a dead engine left). */
export async function openEngine(db: string, agents: Record<string, AgentHandler>, logger?: Logger): Promise<Engine> {
  const { createEngine } = await library();
  const { secretsFromEnv } = await import("../engine/attempts/secrets.js");
  return createEngine({
    database: db,
    ...listenDatabaseOption(),
    agents,
    secrets: secretsFromEnv(),
    ...llmFromEnv(),
    ...mcpFromEnv(),
    ...(logger ? { logger } : {}),
  });
}

/** False for a SQLite file that does not exist (other URLs: true, the library explains them). */
export function databaseExists(db: string): boolean {
  if (!db.startsWith("sqlite:")) return true;
  const path = sqlitePath(db);
  return path === ":memory:" || existsSync(path);
}

function sqlitePath(db: string): string {
  return db.slice("sqlite:".length) || "./skein.db";
}

function assertDatabaseExists(db: string): void {
  if (databaseExists(db)) return;
  const path = sqlitePath(db);
  const dir = dirname(path);
  if (!existsSync(dir)) {
    throw new CliError(
      `no database at ${path}: the directory ${dir} does not exist; pass --db sqlite:<path> (or set SKEIN_DB) to use another file`,
    );
  }
  throw new CliError(
    `no database at ${path}: pass --db sqlite:<path> (or set SKEIN_DB) to use another file, or create it with skein workflows put <file>`,
  );
}
