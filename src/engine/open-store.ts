/** The store a database URL names: a SQLite file, or a PostgreSQL schema (pg loaded only then). */

import { systemClock } from "../clock.js";
import { ValidationError } from "../errors.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import type { Store } from "../store/store.js";
import type { EngineOptions } from "./engine-options.js";

export async function openStore(url: string, options: EngineOptions): Promise<Store> {
  const postgres = isPostgres(url);
  if (options.listenDatabase !== undefined && !postgres) {
    throw new ValidationError(
      `listenDatabase is for PostgreSQL behind a connection pooler, but the database is "${url}"; drop listenDatabase`,
    );
  }
  if (url.startsWith("sqlite:")) {
    return SqliteStore.open({
      path: url.slice("sqlite:".length) || "./skein.db",
      synchronous: options.synchronous,
      busyTimeoutMs: options.busyTimeoutMs,
      logger: options.logger,
    });
  }
  if (postgres) {
    // Loaded only when used: SQLite users never load pg.
    const { PostgresStore } = await import("../store/postgres/postgres-store.js");
    const parsed = new URL(url);
    const schema = parsed.searchParams.get("schema") ?? undefined;
    parsed.searchParams.delete("schema");
    return PostgresStore.open({
      url: parsed.toString(),
      schema,
      listenUrl: options.listenDatabase === undefined ? undefined : listenUrl(options.listenDatabase, schema),
      // The database's clock judges time on PostgreSQL; a test's manual clock replaces it.
      clock: options.clock && options.clock !== systemClock ? options.clock : undefined,
      logger: options.logger,
    });
  }
  throw new ValidationError(
    `unsupported database "${url}": use sqlite:<path>, sqlite::memory: or postgres://user@host:5432/db?schema=skein`,
  );
}

function isPostgres(url: string): boolean {
  return url.startsWith("postgres://") || url.startsWith("postgresql://");
}

/** listenDatabase without `?schema=` (the database's names it); one naming another schema is refused. */
function listenUrl(url: string, schema: string | undefined): string {
  if (!isPostgres(url)) {
    throw new ValidationError(
      `listenDatabase "${url}" is not a PostgreSQL URL: give a direct connection to the pooler's database, postgres://user@host:5432/db`,
    );
  }
  const parsed = new URL(url);
  const own = parsed.searchParams.get("schema");
  if (own !== null && own !== schema) {
    throw new ValidationError(
      `listenDatabase names schema "${own}" but the database ${schema === undefined ? "names none" : `names "${schema}"`}; ` +
        "the schema is the database's: drop ?schema= from listenDatabase",
    );
  }
  parsed.searchParams.delete("schema");
  return parsed.toString();
}
