import { accessSync, constants, statSync } from "node:fs";
import { dirname } from "node:path";
import { DatabaseError } from "../../errors.js";

/** better-sqlite3's error code: the extended one (`SQLITE_READONLY_CANTINIT`), whose prefix is the primary. */
function codeOf(e: unknown): string {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : "";
}

function isCode(e: unknown, primary: string): boolean {
  const code = codeOf(e);
  return code === primary || code.startsWith(`${primary}_`);
}

/** True for a SQLite error saying the file's content is damaged or not a database at all. */
export function isCorruption(e: unknown): boolean {
  return isCode(e, "SQLITE_CORRUPT") || isCode(e, "SQLITE_NOTADB");
}

/**
 * Turns a SQLite error about the file itself (not a database, corrupt, read-only, cannot be
 * opened, locked) or a full disk (transient: `noSpaceError`) into a DatabaseError that names
 * the path and says what to do; any other error (a constraint) is returned unchanged.
 */
export function databaseError(e: unknown, path: string): Error {
  const full = noSpaceError(e, path);
  if (full) return full;
  const message = e instanceof Error ? e.message : String(e);
  const cause = { cause: e };
  if (isCode(e, "SQLITE_NOTADB")) {
    return new DatabaseError(
      `${path} is not a SQLite database or is corrupt (${message}); point Skein at a Skein database or a new file`,
      cause,
    );
  }
  if (isCode(e, "SQLITE_CORRUPT")) {
    return new DatabaseError(
      `${path} is corrupt (${message}); stop every process using it and restore it from a backup ` +
        `(sqlite3 ${path} ".recover" may save part of it), or point Skein at a new file`,
      cause,
    );
  }
  if (isCode(e, "SQLITE_READONLY")) {
    return new DatabaseError(readOnlyMessage(path, message), cause);
  }
  if (isCode(e, "SQLITE_BUSY") || isCode(e, "SQLITE_LOCKED")) {
    return new DatabaseError(
      `${path} is locked by another process (${message}); stop the other writer and retry`,
      cause,
    );
  }
  if (isCode(e, "SQLITE_CANTOPEN")) return new DatabaseError(cannotOpenMessage(path, message), cause);
  return e instanceof Error ? e : new Error(message);
}

function writable(path: string): boolean {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

function readOnlyMessage(path: string, message: string): string {
  const dir = dirname(path);
  if (!writable(dir)) {
    return (
      `cannot write beside ${path}: its directory ${dir} is read-only (${message}); SQLite keeps its ` +
      "write-ahead log (-wal, -shm) there: make the directory writable for this user, or move the database"
    );
  }
  return `${path} is read-only (${message}); make the file writable for this user (chmod u+w), or copy it somewhere writable`;
}

function cannotOpenMessage(path: string, message: string): string {
  const dir = dirname(path);
  let kind: "missing" | "file" | "directory" = "missing";
  try {
    kind = statSync(dir).isDirectory() ? "directory" : "file";
  } catch {}
  if (kind === "missing") {
    return `cannot open ${path}: the directory ${dir} does not exist (${message}); create it (mkdir -p ${dir}) or use another path`;
  }
  if (kind === "file") return `cannot open ${path}: ${dir} is not a directory (${message}); use another path`;
  try {
    if (statSync(path).isDirectory()) {
      return `cannot open ${path}: it is a directory (${message}); name a database file inside it, e.g. ${path}/skein.db`;
    }
  } catch {}
  if (!writable(dir)) {
    return `cannot open ${path}: its directory ${dir} is not writable (${message}); make it writable for this user, or use another path`;
  }
  return `cannot open ${path} (${message}); check that the file and its directory are readable and writable by this user`;
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
