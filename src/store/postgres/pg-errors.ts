/**
 * PostgreSQL failures as Skein's DatabaseError, with a message that says what failed, where,
 * and what to do. `transient: true` marks a failure after which the same transaction may
 * succeed if tried again: a deadlock, a serialization failure, a lost connection, a server
 * starting up or out of connections, its disk full, two engines starting a run under one
 * idempotency key.
 */
import pg from "pg";
import { ENGINE_KEY_PREFIX, TRIGGER_KEY_PREFIX } from "../../core/types.js";
import { DatabaseError, ValidationError } from "../../errors.js";
import { StaleRunsError } from "../runs.js";

/** What skein_lock_trusted raises (migrations/019_trusted_runs.sql): a run changed, or the clock is off. */
const STALE_STATE = "SK409";

/** SQLSTATEs after which trying the same transaction again may succeed. */
const TRANSIENT_STATES: Record<string, string> = {
  "40001": "serialization failure",
  "40P01": "deadlock detected",
  "55P03": "lock not available",
  "53100": "the server's disk is full (free space there; Skein retries)",
  "53300": "too many connections",
  "57P01": "server shutting down",
  "57P02": "server crashed",
  "57P03": "server starting up",
};

/**
 * SQLSTATEs of class 08 that mean the connection is gone. Not the whole class: 08P01 (protocol
 * violation) is the server refusing a message, on a connection that still works, and trying the
 * same message again fails the same way for ever.
 */
const LOST_STATES = new Set(["08000", "08001", "08003", "08004", "08006", "08007", "57P01", "57P02"]);

/**
 * SQLSTATEs that mean a value sent cannot be stored as it is: an error of the input, never
 * worth trying again. A NUL character (`\u0000`) in an id or a text gives 22021 as a
 * parameter, 22P05 inside JSON.
 */
const INPUT_STATES: Record<string, string> = {
  "22021": "a character the database cannot store (a NUL byte, \\u0000, or a byte sequence invalid in UTF-8)",
  "22P05": "a character the database cannot store (a NUL byte, \\u0000, in JSON text)",
  "08P01": "a value the protocol cannot carry (a NUL byte, \\u0000, in the statement)",
  "54000": "a value beyond a limit of the database (too long for an index or a field)",
};

/** What happened when the connection was lost, by what it was doing. */
export type Phase = "read" | "transaction" | "commit";

const LOST: Record<Phase, (target: string, message: string) => string> = {
  read: (target, message) => `lost the connection to PostgreSQL at ${target} (${message}); try again`,
  transaction: (target, message) =>
    `lost the connection to PostgreSQL at ${target} during a transaction (${message}); ` +
    "it was rolled back and can be tried again",
  commit: (target, message) =>
    `lost the connection to PostgreSQL at ${target} while committing (${message}); ` +
    "the transaction may or may not have committed",
};

/** The runs' unique idempotency key (migrations/001_init.sql). */
const IDEMPOTENCY_CONSTRAINT = "runs_idempotency_key";
/** Events published by key, one per (name, key, idempotency key) (migrations/005_inbox.sql). */
const PUBLISHED_CONSTRAINT = "inbox_key_idempotency";

/** The SQLSTATE of an error the server answered (none for a failed socket). */
export function sqlState(e: unknown): string | undefined {
  return e instanceof pg.DatabaseError ? e.code : undefined;
}

function messageOf(e: unknown): string {
  if (e instanceof AggregateError && e.errors.length > 0) return e.errors.map(messageOf).join("; ");
  const text = e instanceof Error ? e.message : String(e);
  return text || (e as { code?: string }).code || "unknown error";
}

/** A network-level failure (refused, unreachable, reset): the socket's error code, not SQL. */
function isNetworkError(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  return !(e instanceof pg.DatabaseError) && typeof code === "string" && code.startsWith("E");
}

/** Why connecting to (or opening) the database failed, as a DatabaseError; other errors unchanged. */
export function connectError(e: unknown, target: string): Error {
  if (e instanceof DatabaseError) return e;
  const state = sqlState(e);
  const message = messageOf(e);
  const cause = { cause: e };
  switch (state) {
    case "3D000":
      return new DatabaseError(
        `the database of ${target} does not exist (${message}); create it (createdb) or fix the database name in the URL`,
        cause,
      );
    case "28P01":
    case "28000":
      return new DatabaseError(
        `PostgreSQL at ${target} refused the login (${message}); check the user and password in the URL, and pg_hba.conf`,
        cause,
      );
    case "42501":
      return new DatabaseError(
        `the user of ${target} lacks a privilege Skein needs (${message}); grant CREATE on the database, ` +
          "or create the schema for that user first",
        cause,
      );
    case "08P01":
      // While connecting, a protocol violation is a startup parameter refused: what a
      // transaction-mode pooler (PgBouncer) answers to the `options` that carry Skein's settings.
      return new DatabaseError(
        `the server at ${target} refused a startup parameter (${message}): it is likely a connection pooler ` +
          "(PgBouncer in transaction mode), which takes no startup `options`. Behind a pooler, give Skein a direct " +
          "connection to the same database for the session it needs as listenDatabase (CLI --listen-database, env " +
          "SKEIN_LISTEN_DATABASE): it then sends the pooler no options (drop any ?options= from the pooler's URL too)",
        cause,
      );
    case "53300":
    case "57P03":
      return new DatabaseError(`PostgreSQL at ${target} cannot take a connection now (${message}); retry later`, {
        ...cause,
        transient: true,
      });
  }
  if (state === undefined) {
    // No SQLSTATE: the server was never reached (refused, unknown host, timeout, TLS), or the
    // connection ended while it was being opened. Trying again may find it up.
    return new DatabaseError(
      `cannot connect to PostgreSQL at ${target} (${message}); check that the server is running and that the URL's host and port are right`,
      { ...cause, transient: true },
    );
  }
  const mapped = statementError(e, target, { broken: false, phase: "read" });
  return mapped instanceof DatabaseError
    ? mapped
    : new DatabaseError(`PostgreSQL at ${target} refused the connection (${state}: ${message})`, cause);
}

/**
 * The error to throw for a failed statement. A lost connection (the client saw its socket
 * fail: `broken`), a transient SQLSTATE and a duplicate idempotency key become a transient
 * DatabaseError; a value the database cannot store (a NUL byte in an id) a ValidationError;
 * other errors (a bug: a constraint, a syntax error) are returned unchanged.
 */
export function statementError(e: unknown, target: string, context: { broken: boolean; phase: Phase }): Error {
  if (e instanceof DatabaseError || e instanceof ValidationError) return e;
  const state = sqlState(e);
  const message = messageOf(e);
  const input = state === undefined ? undefined : INPUT_STATES[state];
  if (input && !context.broken) {
    return new ValidationError(
      `PostgreSQL refused a value of this request: it holds ${input} (${state}: ${message}); ` +
        "nothing was written: send ids and text without such characters",
    );
  }
  const lost = context.broken || isNetworkError(e) || (state !== undefined && LOST_STATES.has(state));
  if (lost) {
    return new DatabaseError(LOST[context.phase](target, message), {
      cause: e,
      transient: true,
      ambiguous: context.phase === "commit",
    });
  }
  // The check of a transaction that trusted the runs it holds (migrations/019_trusted_runs.sql).
  if (state === STALE_STATE) return new StaleRunsError(`PostgreSQL at ${target}: ${message}; nothing was written`, e);
  const transient = state === undefined ? undefined : TRANSIENT_STATES[state];
  if (transient) {
    return new DatabaseError(
      `PostgreSQL at ${target} aborted the transaction: ${transient} (${state}: ${message}); it can be tried again`,
      { cause: e, transient: true },
    );
  }
  // Two clients' starts under one key race: trying again finds the other's run. A key of the
  // engine's (`skein:`) is different: every transaction that writes it again would fail the same,
  // so it is refused like any statement, the dispatcher isolates the input, everyone else commits.
  // But a trigger's: two engines published one event at once, and trying again finds the other's
  // event and runs (DESIGN §17), as it finds the event itself when the inbox's key is the one hit.
  const { constraint, detail } = e as pg.DatabaseError;
  const engineKey = detail?.includes(`=(${ENGINE_KEY_PREFIX}`) && !detail.includes(`=(${TRIGGER_KEY_PREFIX}`);
  if (state === "23505" && constraint === IDEMPOTENCY_CONSTRAINT && !engineKey) {
    return new DatabaseError(
      `another engine started a run with the same idempotency key at the same time (${message}); ` +
        "trying again finds that run",
      { cause: e, transient: true },
    );
  }
  if (state === "23505" && constraint === PUBLISHED_CONSTRAINT) {
    return new DatabaseError(
      `another engine published the same event at the same time (${message}); trying again finds that event`,
      { cause: e, transient: true },
    );
  }
  return e instanceof Error ? e : new Error(message);
}
