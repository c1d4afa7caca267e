/**
 * The PostgreSQL side of the bench: the server (BENCH_PG_URL, default the local one with trust
 * auth), a fresh schema per measurement, dropped afterwards even when the measurement failed
 * or was abandoned, and the server settings the numbers depend on.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { type BenchDb, percentile } from "./lib.js";

export const PG_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** Schemas created and not dropped yet. */
const leftover = new Set<string>();

/** A fresh schema (created and migrated by the first engine, store or client that opens `url`). */
export function tempSchema(name: string): BenchDb & { schema: string } {
  const schema = `skein_bench_${name.replace(/[^a-z0-9]/g, "_")}_${randomBytes(4).toString("hex")}`;
  leftover.add(schema);
  return {
    schema,
    url: `${PG_URL}${PG_URL.includes("?") ? "&" : "?"}schema=${schema}`,
    cleanup: () => dropSchemas([schema]),
  };
}

/** Drops every schema this process created and has not dropped yet; returns what failed. */
export async function dropLeftoverSchemas(): Promise<string[]> {
  return dropSchemas([...leftover]);
}

async function dropSchemas(schemas: string[]): Promise<string[]> {
  if (schemas.length === 0) return [];
  const failed: string[] = [];
  await withClient(async (client) => {
    // An engine of an abandoned measurement may still hold locks in it: do not wait for ever.
    await client.query("SET lock_timeout = '10s'");
    for (const schema of schemas) {
      try {
        await client.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(schema)} CASCADE`);
        leftover.delete(schema);
      } catch (e) {
        failed.push(`${schema}: ${(e as Error).message}`);
      }
    }
  });
  return failed;
}

/**
 * What the numbers depend on: the server's version and durability settings, and the p50 of 200
 * `SELECT 1` round trips from this process (what every statement of a transaction pays at least;
 * it grows with the machine's load, as the server's processes wait for a core).
 */
export async function serverSettings(): Promise<Record<string, string | number>> {
  return withClient(async (client) => {
    const { rows } = await client.query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_settings
        WHERE name IN ('server_version', 'synchronous_commit', 'fsync', 'wal_sync_method', 'commit_delay',
                       'shared_buffers', 'max_connections')`,
    );
    const trips: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t0 = performance.now();
      await client.query("SELECT 1");
      trips.push(performance.now() - t0);
    }
    return { ...Object.fromEntries(rows.map((r) => [r.name, r.setting])), round_trip_p50_ms: percentile(trips, 50) };
  });
}

/**
 * Writes out what earlier measurements left dirty in the server's buffers (CHECKPOINT, as
 * pgbench does before a run), so that their checkpoint does not land in the next measurement's
 * commits: each PostgreSQL measurement starts from the same quiet server.
 */
export async function checkpoint(): Promise<void> {
  await withClient((client) => client.query("CHECKPOINT"));
}

async function withClient<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
