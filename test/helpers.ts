/**
 * Shared test set-up: a real database per test (a SQLite file, or with SKEIN_TEST_DB=postgres a
 * fresh schema on the PostgreSQL server at SKEIN_TEST_PG_URL), a manual clock, and engines
 * closed after each test.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import Database from "better-sqlite3";
import pg from "pg";
import pino from "pino";
import { afterEach, describe } from "vitest";
import { createEngine, type Engine, type EngineOptions, ManualClock } from "../src/index.js";
import { resendOnReset } from "../src/worker/connection-reset.js";

/** The store this test run uses: the project's suite runs once on each (vitest.config.ts). */
export const onPostgres = process.env.SKEIN_TEST_DB === "postgres";
export const PG_URL = process.env.SKEIN_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** Tests of what only SQLite has (one file, one engine per file, WAL). */
export const describeSqlite: typeof describe = onPostgres ? (describe.skip as typeof describe) : describe;

const open: Engine[] = [];
const dirs: string[] = [];
const schemas: string[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((e) => e.close({ timeoutMs: 100 })));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  await dropSchemas(schemas.splice(0));
});

async function dropSchemas(names: string[]): Promise<void> {
  if (names.length === 0) return;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    for (const name of names) await client.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
  } finally {
    await client.end();
  }
}

export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "skein-test-"));
  dirs.push(dir);
  return dir;
}

/**
 * A fresh database URL: a SQLite file, or a new PostgreSQL schema (dropped after the test); by
 * default the store of this test run.
 */
export function tempDb(store: "sqlite" | "postgres" = onPostgres ? "postgres" : "sqlite"): string {
  if (store === "postgres") {
    const schema = `skein_t_${randomBytes(6).toString("hex")}`;
    schemas.push(schema);
    return `${PG_URL}?schema=${schema}`;
  }
  return `sqlite:${join(tempDir(), "skein.db")}`;
}

/** An engine on a fresh SQLite file with a manual clock; closed after the test. */
export async function testEngine(
  options: EngineOptions = {},
): Promise<{ engine: Engine; clock: ManualClock; database: string }> {
  const clock = (options.clock as ManualClock | undefined) ?? new ManualClock();
  const database = options.database ?? tempDb();
  const engine = await createEngine({ ...options, clock, database });
  open.push(engine);
  return { engine, clock, database };
}

/** Methods a request may be sent twice with: reading, and PUT (registering the same workflow is the same version). */
const IDEMPOTENT_METHODS = new Set(["GET", "HEAD", "PUT"]);

/**
 * `fetch` for tests that talk to a server over a real port: a request that met a reset connection
 * before any answer (the server closing a kept-alive connection as it is reused, on a slow machine)
 * is sent again once when that changes nothing: GET, HEAD, PUT, and a POST the caller marks
 * `resend` (a report fenced by its attempt, a start with an idempotency key).
 */
export function fetchApi(url: string | URL, init: RequestInit & { resend?: boolean } = {}): Promise<Response> {
  const { resend, ...request } = init;
  const resendable = resend ?? IDEMPOTENT_METHODS.has((request.method ?? "GET").toUpperCase());
  return resendOnReset(resendable, () => fetch(url, request));
}

/** Resolves when `predicate` holds for an event of the engine (no sleeping). */
export function nextEvent(
  engine: Engine,
  predicate: (e: import("../src/index.js").RunEvent) => boolean,
): Promise<import("../src/index.js").RunEvent> {
  return new Promise((resolve) => {
    const off = engine.subscribe((e) => {
      if (e.type !== "node.progress" && predicate(e)) {
        off();
        resolve(e);
      }
    });
  });
}

/**
 * PostgreSQL: a trigger on the database's visits that aborts every update whose output mentions
 * "stall" with serialization_failure (40001), a real transient failure, so the engine retries
 * that result for ever. Returns the function that drops the trigger.
 */
export async function stallResults(database: string): Promise<() => Promise<void>> {
  const url = new URL(database);
  const schema = url.searchParams.get("schema") as string;
  url.searchParams.delete("schema");
  const query = async (sql: string) => {
    const admin = new pg.Client({ connectionString: url.toString() });
    await admin.connect();
    try {
      await admin.query(sql);
    } finally {
      await admin.end();
    }
  };
  await query(`
    CREATE FUNCTION "${schema}".stall() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.output::text LIKE '%stall%' THEN
        RAISE EXCEPTION 'stalled on purpose' USING ERRCODE = '40001';
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER stall BEFORE UPDATE ON "${schema}".visits FOR EACH ROW EXECUTE FUNCTION "${schema}".stall();`);
  return () => query(`DROP TRIGGER stall ON "${schema}".visits`);
}

/**
 * SQL on a test database beside its engine, as an operator or an older Skein would write it:
 * `$1`-style parameters on both stores, or (without parameters) several statements at once.
 */
export async function sqlOn(database: string, text: string, params?: unknown[]): Promise<void> {
  if (database.startsWith("sqlite:")) {
    const db = new Database(database.slice("sqlite:".length));
    try {
      if (params) db.prepare(text.replace(/\$\d+/g, "?")).run(...params);
      else db.exec(text);
    } finally {
      db.close();
    }
    return;
  }
  const url = new URL(database);
  const schema = url.searchParams.get("schema") as string;
  url.search = "";
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(`SET search_path TO ${pg.escapeIdentifier(schema)}`);
    await client.query(text, params);
  } finally {
    await client.end();
  }
}

/** A line a `capturedLogger` logged (pino's JSON). */
export type LogLine = { msg: string; level: number } & Record<string, unknown>;

/**
 * A logger whose lines a test reads: `lines`, and `logged(text)`, which resolves once a line
 * whose message contains `text` is logged (no sleeping).
 */
export function capturedLogger(level: "debug" | "info" | "warn" = "warn") {
  const lines: LogLine[] = [];
  const waiting: { text: string; resolve: () => void }[] = [];
  const out = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split("\n")) {
        if (!line) continue;
        const parsed = JSON.parse(line) as LogLine;
        lines.push(parsed);
        for (const w of waiting) if (parsed.msg.includes(w.text)) w.resolve();
      }
      done();
    },
  });
  const logged = (text: string) => new Promise<void>((resolve) => waiting.push({ text, resolve }));
  return { logger: pino({ level }, out), lines, logged };
}
