/**
 * PostgreSQL databases of the peers bench: each PostgreSQL system gets a fresh database of its
 * own on the server of bench/postgres.ts (BENCH_PG_URL, default the local one), dropped at the
 * end, so that its commits can be counted (pg_stat_database.xact_commit is per database) and no
 * system reads another's tables.
 */
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { PG_URL } from "../postgres.js";

/** `url` pointing at another database of the same server. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  u.search = "";
  return u.toString();
}

/** Administration goes through the server's `postgres` database, never one a system uses. */
const ADMIN_URL = withDatabase(PG_URL, "postgres");

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Databases created by this process and not dropped yet. */
const created = new Set<string>();

/** Creates a fresh database named after `name`; returns its URL. */
export async function createDatabase(name: string): Promise<{ name: string; url: string }> {
  const db = `skein_peers_${name.replace(/[^a-z0-9]/g, "_")}_${randomBytes(3).toString("hex")}`;
  await admin((c) => c.query(`CREATE DATABASE ${pg.escapeIdentifier(db)}`));
  created.add(db);
  return { name: db, url: withDatabase(PG_URL, db) };
}

/** Drops a database, ending the sessions still connected to it (a killed system's, an abandoned child's). */
export async function dropDatabase(db: string): Promise<void> {
  await admin((c) => c.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(db)} WITH (FORCE)`));
  created.delete(db);
}

/** Drops every database this process created and has not dropped yet; returns what failed. */
export async function dropLeftoverDatabases(): Promise<string[]> {
  const failed: string[] = [];
  for (const db of [...created]) {
    await dropDatabase(db).catch((e: unknown) => failed.push(`${db}: ${(e as Error).message}`));
  }
  return failed;
}

/**
 * The database's committed transactions (pg_stat_database.xact_commit) once no session is
 * connected to it. A backend reports its counts when it ends, otherwise only now and then (up
 * to 10 s later on PostgreSQL 15), so the caller closes every connection first.
 */
export async function committedTransactions(db: string): Promise<number> {
  return admin(async (c) => {
    for (let waited = 0; ; waited += 20) {
      const { rows } = await c.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1",
        [db],
      );
      if (rows[0]?.n === 0) break;
      if (waited > 10_000) throw new Error(`sessions still connected to ${db} after 10 s`);
      await sleep(20);
    }
    // A backend leaves pg_stat_activity a moment before its exit hook has flushed its counts.
    await sleep(50);
    await c.query("SELECT pg_stat_clear_snapshot()");
    const { rows } = await c.query<{ n: string }>(
      "SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = $1",
      [db],
    );
    return Number(rows[0]?.n ?? Number.NaN);
  });
}
