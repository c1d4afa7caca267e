/**
 * One engine per SQLite file (DESIGN §8), judged by the operating system rather than by a
 * heartbeat another process reads: the engine holds an exclusive SQLite lock on a side file,
 * `<db>-engine.lock`, for as long as it is open. SQLite's locks are fcntl locks, which the
 * kernel drops when the process dies however it dies (SIGKILL included), and which a stopped
 * or paused process (SIGSTOP, a VM pause, a debugger) keeps. SQLite also tracks its locks per
 * file within a process, so a second engine in the same process is refused alike.
 *
 * The side file holds nothing: only its lock matters. Clients never take it, so they open the
 * database beside the engine.
 */
import { realpathSync } from "node:fs";
import Database from "better-sqlite3";
import { databaseError } from "./sqlite-errors.js";

/**
 * The side file whose lock makes its holder the database's engine: beside the file itself, not
 * beside a symlink to it, so that every name of the database shares one lock.
 */
export function engineLockPath(path: string): string {
  return `${realPath(path)}-engine.lock`;
}

export class EngineLock {
  private constructor(private readonly db: Database.Database) {}

  /**
   * Takes the engine lock of the database at `path`, or returns null at once when another
   * engine (in any process) holds it.
   * @throws DatabaseError when the side file cannot be created (see databaseError)
   */
  static take(path: string): EngineLock | null {
    const file = engineLockPath(path);
    let db: Database.Database;
    try {
      // timeout 0: a held lock is an answer, not something to wait for.
      db = new Database(file, { timeout: 0 });
    } catch (e) {
      throw databaseError(e, file);
    }
    try {
      // No journal file beside it; then every lock, once taken, is kept until close.
      db.pragma("journal_mode = MEMORY");
      db.pragma("locking_mode = EXCLUSIVE");
      db.exec("BEGIN EXCLUSIVE; COMMIT");
      return new EngineLock(db);
    } catch (e) {
      db.close();
      const code = (e as { code?: string }).code ?? "";
      if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) return null;
      throw databaseError(e, file);
    }
  }

  /** Gives the lock up: another engine may open the database from now on. */
  release(): void {
    this.db.close();
  }
}

/** The file a path names, through symlinks; the path itself when it cannot be resolved (the open reports why). */
function realPath(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
