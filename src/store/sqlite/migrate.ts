/**
 * Numbered SQL migrations (`migrations/NNN_name.sql`), each applied in its own transaction and
 * recorded in `skein_migrations`. A file with tables but no `skein_migrations` is someone else's
 * database and is refused rather than written to (assertSkeinDatabase, before any setting).
 */
import { readdirSync, readFileSync } from "node:fs";
import type Database from "better-sqlite3";
import { DatabaseError } from "../../errors.js";
import { databaseError } from "./sqlite-errors.js";

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

const MIGRATIONS_DIR = new URL("./migrations/", import.meta.url);

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
 * Refuses a file that is not empty and not a Skein database, reading only: it runs before
 * anything configures the file (WAL is a setting stored in it), so someone else's database is
 * left exactly as it was.
 * @throws DatabaseError for a foreign database, or a file that is not SQLite or is corrupt
 */
export function assertSkeinDatabase(db: Database.Database, path: string): void {
  let tables: string[];
  try {
    tables = (
      db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all() as {
        name: string;
      }[]
    ).map((t) => t.name);
  } catch (e) {
    throw databaseError(e, path);
  }
  if (tables.length > 0 && !tables.includes("skein_migrations")) {
    throw new DatabaseError(
      `${path} is a SQLite database but not a Skein one (it has tables ${tables.slice(0, 5).join(", ")}); ` +
        "Skein left it unchanged: use a new file for Skein",
    );
  }
}

export function migrate(db: Database.Database, path: string): void {
  const migrations = loadMigrations();
  try {
    db.exec(
      "CREATE TABLE IF NOT EXISTS skein_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
    );
    const applied = new Set(
      (db.prepare("SELECT version FROM skein_migrations").all() as { version: number }[]).map((r) => r.version),
    );
    const newest = Math.max(0, ...applied);
    const known = Math.max(0, ...migrations.map((m) => m.version));
    if (newest > known) {
      throw new DatabaseError(
        `${path} has schema version ${newest}, newer than this Skein knows (${known}); upgrade Skein to open it`,
      );
    }
    for (const m of migrations) {
      if (applied.has(m.version)) continue;
      db.transaction(() => {
        // Inserting the version first makes a concurrent migrator fail on the primary key, not on half a schema.
        db.prepare("INSERT INTO skein_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(
          m.version,
          m.name,
          Date.now(),
        );
        db.exec(m.sql);
      }).immediate();
    }
  } catch (e) {
    if (e instanceof DatabaseError) throw e;
    throw databaseError(e, path);
  }
}
