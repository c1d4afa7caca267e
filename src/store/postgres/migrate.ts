/**
 * Numbered SQL migrations (`migrations/NNN_name.sql`) into the store's schema, each recorded in
 * `skein_migrations`, all pending ones in one transaction: a fresh schema is made in one go
 * (a third of the time one transaction each took), and an upgrade that fails leaves the schema
 * as it was. The transaction first takes an advisory lock on the schema and only then reads what
 * is applied, so processes migrating at once apply each migration once, one after the other. A schema with tables but no
 * `skein_migrations` belongs to someone else and is refused rather than written to.
 */
import { readdirSync, readFileSync } from "node:fs";
import type pg from "pg";
import { DatabaseError } from "../../errors.js";
import { Session } from "./session.js";

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

const MIGRATIONS_DIR = new URL("./migrations/", import.meta.url);

/** First key of the migration lock ("skmg"); the second is the schema's hash. */
const MIGRATION_LOCK = 0x736b6d67;

export function loadMigrations(): Migration[] {
  return readdirSync(MIGRATIONS_DIR)
    .filter((f) => /^\d{3}_.+\.sql$/.test(f))
    .sort()
    .map((file) => ({
      version: Number(file.slice(0, 3)),
      name: file.slice(4, -4),
      sql: readFileSync(new URL(file, MIGRATIONS_DIR), "utf8"),
    }));
}

/**
 * Brings `schema` up to the newest migration. Safe to run from several processes at once.
 * @throws DatabaseError when the schema is newer than this Skein, or not a Skein schema.
 */
export async function migrate(
  pool: pg.Pool,
  where: { schema: string; schemaSql: string; target: string },
  migrations: Migration[] = loadMigrations(),
): Promise<void> {
  const known = Math.max(0, ...migrations.map((m) => m.version));
  const session = await Session.open(pool, where.target);
  let ok = false;
  try {
    await session.query("BEGIN");
    await session.query({
      text: "SELECT pg_advisory_xact_lock($1, hashtext($2))",
      values: [MIGRATION_LOCK, where.schema],
    });
    const applied = await appliedVersions(session, where);
    const newest = Math.max(0, ...applied);
    if (newest > known) {
      throw new DatabaseError(
        `schema ${where.schemaSql} at ${where.target} has Skein schema version ${newest}, newer than this ` +
          `Skein knows (${known}); upgrade Skein to use it`,
      );
    }
    const pending = migrations.filter((m) => !applied.has(m.version));
    // SET LOCAL: objects of a schema created in this transaction go where they belong.
    if (pending.length > 0) await session.query(`SET LOCAL search_path TO ${where.schemaSql}`);
    for (const next of pending) {
      await session.query(next.sql);
      await session.query({
        text: "INSERT INTO skein_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
        values: [next.version, next.name, Date.now()],
      });
    }
    await session.query("COMMIT", "commit");
    ok = true;
  } finally {
    if (!ok && !session.isBroken) await session.query("ROLLBACK").catch(() => undefined);
    session.release();
  }
}

/** The versions recorded in the schema, creating the schema and the version table when missing. */
async function appliedVersions(
  session: Session,
  where: { schema: string; schemaSql: string; target: string },
): Promise<Set<number>> {
  const { rows } = await session.query<{ tables: string[] | null; exists: boolean }>({
    text: `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS exists,
             (SELECT array_agg(tablename::text ORDER BY tablename) FROM pg_tables WHERE schemaname = $1) AS tables`,
    values: [where.schema],
  });
  const tables = rows[0]?.tables ?? [];
  if (tables.length > 0 && !tables.includes("skein_migrations")) {
    throw new DatabaseError(
      `schema ${where.schemaSql} at ${where.target} has tables (${tables.slice(0, 5).join(", ")}) but is not a ` +
        "Skein schema; give Skein a schema of its own with the `schema` option",
    );
  }
  // Only when missing: CREATE SCHEMA checks the CREATE privilege on the database even with
  // IF NOT EXISTS, and a user may have been given a schema without that privilege.
  if (!rows[0]?.exists) await session.query(`CREATE SCHEMA ${where.schemaSql}`);
  await session.query(
    `CREATE TABLE IF NOT EXISTS ${where.schemaSql}.skein_migrations (
       version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`,
  );
  const versions = await session.query<{ version: number }>(`SELECT version FROM ${where.schemaSql}.skein_migrations`);
  return new Set(versions.rows.map((r) => r.version));
}
