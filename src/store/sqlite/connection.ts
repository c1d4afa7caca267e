/**
 * How the SQLite store connects: connections with this process's settings, the settings the
 * write connection stores in the file (WAL), and the checks made before opening at all.
 */
import { statSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import type { Logger } from "pino";
import { DatabaseError } from "../../errors.js";
import { databaseError } from "./sqlite-errors.js";

type Db = Database.Database;

/** How the SQLite store opens its file (`SqliteStore.open`). */
export interface SqliteOptions {
  /** A file path, or `:memory:`. */
  path: string;
  /** `normal` (default: durable across process crashes, may lose the last commits on power loss) or `full`. */
  synchronous?: "normal" | "full";
  /** How long a write waits for a lock held by another connection, in ms. Default 5000. */
  busyTimeoutMs?: number;
  logger?: Pick<Logger, "warn">;
}

/** Checkpoint once the WAL passes this size: pages written many times between checkpoints are copied once. */
export const WAL_CHECKPOINT_BYTES = 16 * 1024 * 1024;

export function walBytes(path: string): number {
  if (path === ":memory:") return 0;
  try {
    return statSync(`${path}-wal`).size;
  } catch {
    return 0;
  }
}

/**
 * A connection with this process's settings only (none of them is stored in the file): the
 * file is checked before `configure` changes it. The read connection is configured here whole.
 */
export function openConnection(path: string, options: SqliteOptions & { readonly?: boolean }): Db {
  let db: Db;
  try {
    // The busy timeout as an option, not a value written into a PRAGMA's text.
    db = new Database(path, {
      readonly: options.readonly ?? false,
      fileMustExist: options.readonly ?? false,
      timeout: options.busyTimeoutMs ?? 5000,
    });
    db.pragma(`synchronous = ${options.synchronous === "full" ? "FULL" : "NORMAL"}`);
    db.pragma("foreign_keys = ON");
    // Reads through a memory map and a larger page cache: fewer system calls per statement
    // once the file outgrows SQLite's default 2 MB cache.
    db.pragma("mmap_size = 268435456");
    db.pragma("cache_size = -32768");
    // Search's substring test on run text the index has not taken yet (migration 013), case
    // folded as the trigram tokenizer folds it; the caller gives `q` folded already.
    db.function("skein_contains", { deterministic: true }, (text, q) =>
      typeof text === "string" && text.toLowerCase().includes(String(q)) ? 1 : 0,
    );
  } catch (e) {
    throw databaseError(e, path);
  }
  return db;
}

/** The write connection's settings, WAL among them (stored in the file): only for a Skein database. */
export function configure(db: Db, options: SqliteOptions): void {
  try {
    db.pragma("journal_mode = WAL");
    db.pragma("wal_autocheckpoint = 0");
    // After a checkpoint the WAL restarts and is cut back to this size, so its size tells
    // how much was written since (see WAL_CHECKPOINT_BYTES).
    db.pragma(`journal_size_limit = ${WAL_CHECKPOINT_BYTES / 4}`);
  } catch (e) {
    throw databaseError(e, options.path);
  }
}

/** better-sqlite3 says only "the directory does not exist": say which, and what to do. */
export function assertDirectory(path: string): void {
  const dir = dirname(path);
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    throw new DatabaseError(
      `cannot open ${path}: the directory ${dir} does not exist; create it (mkdir -p ${dir}) or use another path`,
    );
  }
  if (!isDir) throw new DatabaseError(`cannot open ${path}: ${dir} is not a directory; use another path`);
}
