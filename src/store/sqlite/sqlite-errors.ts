import { DatabaseError } from "../../errors.js";

/** Turns a SQLite error about the file itself into a DatabaseError that says what to do. */
export function databaseError(e: unknown, path: string): Error {
  const code = (e as { code?: string }).code;
  const message = e instanceof Error ? e.message : String(e);
  if (code === "SQLITE_NOTADB" || code === "SQLITE_CORRUPT") {
    return new DatabaseError(
      `${path} is not a SQLite database or is corrupt (${message}); point Skein at a Skein database or a new file`,
    );
  }
  if (code === "SQLITE_BUSY" || code === "SQLITE_LOCKED") {
    return new DatabaseError(`${path} is locked by another process (${message}); stop the other writer and retry`);
  }
  if (code === "SQLITE_CANTOPEN") {
    return new DatabaseError(`cannot open ${path} (${message}); check that the directory exists and is writable`);
  }
  return e instanceof Error ? e : new Error(message);
}

/**
 * SQLite's codes for a write refused for want of space: SQLITE_FULL (the OS said ENOSPC) and
 * SQLITE_IOERR_SHMSIZE (the shared-memory file next to the WAL could not grow).
 */
const NO_SPACE = new Set(["SQLITE_FULL", "SQLITE_IOERR_SHMSIZE"]);

/**
 * A write refused for want of space, as a transient DatabaseError: nothing was written, and
 * the same transaction succeeds once space is freed. Null for any other error.
 */
export function noSpaceError(e: unknown, path: string): DatabaseError | null {
  const code = (e as { code?: string }).code;
  if (code === undefined || !NO_SPACE.has(code)) return null;
  const message = e instanceof Error ? e.message : String(e);
  return new DatabaseError(
    `the disk holding ${path} is full (${code}: ${message}); free space there, and Skein carries on where it stopped`,
    { cause: e, transient: true },
  );
}
