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
