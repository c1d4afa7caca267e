/** The store a database URL names: a SQLite file, or a PostgreSQL schema (pg loaded only then). */
import { ValidationError } from "../errors.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import type { Store } from "../store/store.js";
import { systemClock } from "./clock.js";
import type { EngineOptions } from "./engine-options.js";

export async function openStore(url: string, options: EngineOptions): Promise<Store> {
  if (url.startsWith("sqlite:")) {
    return SqliteStore.open({
      path: url.slice("sqlite:".length) || "./skein.db",
      synchronous: options.synchronous,
      busyTimeoutMs: options.busyTimeoutMs,
      logger: options.logger,
    });
  }
  if (url.startsWith("postgres://") || url.startsWith("postgresql://")) {
    // Loaded only when used: SQLite users never load pg.
    const { PostgresStore } = await import("../store/postgres/postgres-store.js");
    const parsed = new URL(url);
    const schema = parsed.searchParams.get("schema") ?? undefined;
    parsed.searchParams.delete("schema");
    return PostgresStore.open({
      url: parsed.toString(),
      schema,
      // The database's clock judges time on PostgreSQL; a test's manual clock replaces it.
      clock: options.clock && options.clock !== systemClock ? options.clock : undefined,
      logger: options.logger,
    });
  }
  throw new ValidationError(
    `unsupported database "${url}": use sqlite:<path>, sqlite::memory: or postgres://user@host:5432/db?schema=skein`,
  );
}
