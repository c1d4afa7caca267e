/**
 * Reads a fault case's database (`sqlite:<file>`, or a postgres URL with `?schema=`) on a
 * connection of its own, as committed: what the oracles, the polls and the explanations of a
 * failed case look at. Statements use `$1, $2 …` parameters on both stores.
 */
import Database from "better-sqlite3";
import pg from "pg";

export type Row = Record<string, unknown>;
export type Query = (sql: string, params?: unknown[]) => Promise<Row[]>;

/** Opens the database read-only, gives `fn` its queries, and closes it. */
export async function withDatabase<T>(database: string, fn: (query: Query) => Promise<T>): Promise<T> {
  if (database.startsWith("sqlite:")) {
    const db = new Database(database.slice("sqlite:".length), { readonly: true, fileMustExist: true });
    try {
      return await fn(async (sql, params = []) => db.prepare(sql.replace(/\$\d+/g, "?")).all(...params) as Row[]);
    } finally {
      db.close();
    }
  }
  const url = new URL(database);
  const schema = url.searchParams.get("schema") ?? "skein";
  url.search = "";
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(`SET search_path TO ${pg.escapeIdentifier(schema)}`);
    return await fn(async (sql, params = []) => (await client.query(sql, params)).rows);
  } finally {
    await client.end();
  }
}
