/**
 * How the PostgreSQL store connects: the pool's configuration (every connection's search_path
 * is the store's schema, bigint read as a JS number), the schema's quoted name, and a
 * description of the server without the password for error messages.
 *
 * Behind a transaction-mode pooler (PgBouncer; DESIGN §8), given as a `listenUrl` for the
 * listener's direct connection: a pooler refuses the startup `options` that carry the settings,
 * and hands each transaction whichever server connection is free, so the settings are set
 * again in each transaction (`perTransaction`) and no statement is prepared by name (a named
 * statement is prepared on one server connection and looked for on another).
 */
import pg from "pg";
import { ValidationError } from "../../errors.js";

export const DEFAULT_SCHEMA = "skein";
/** Prefix of the LISTEN/NOTIFY channel: `skein_ready_<schema>`. */
const CHANNEL_PREFIX = "skein_ready_";
/** Identifiers longer than 63 bytes are cut by PostgreSQL; the channel name must fit too. */
const MAX_SCHEMA_BYTES = 63 - CHANNEL_PREFIX.length;

const INT8_OID = 20;

/** How long opening a connection may take before it counts as unreachable, ms. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

export interface ConnectionSettings {
  /** The pool's configuration. */
  config: pg.PoolConfig;
  /**
   * The ready listener's connection (it LISTENs and holds the engine's lock: a session of its
   * own): the listen URL's when given, else the pool's server. Its `target` for messages.
   */
  listen: { config: pg.ClientConfig; target: string };
  /**
   * Null on a direct connection, whose sessions have the settings from their start. Behind a
   * pooler (a listen URL given), the statement that sets them for one transaction: each
   * transaction runs it first, and no statement is prepared by name.
   */
  perTransaction: pg.QueryConfig | null;
  /** The schema, and quoted for SQL. */
  schema: string;
  schemaSql: string;
  /** The notification channel's name, and quoted for LISTEN. */
  channel: string;
  channelSql: string;
  /** Where the server is, for messages: `postgres://user@host:port/db` (no password). */
  target: string;
}

/**
 * The pool's configuration for `url` with every object in `schema`; with `listenUrl`, `url` is
 * taken for a transaction-mode pooler and the listener connects to `listenUrl` instead.
 * @throws ValidationError for a schema name PostgreSQL cannot use as is.
 */
export function connectionSettings(
  url: string,
  schema: string,
  options: { poolSize: number; connectTimeoutMs: number; listenUrl?: string },
): ConnectionSettings {
  checkSchema(schema);
  const schemaSql = pg.escapeIdentifier(schema);
  const channel = CHANNEL_PREFIX + schema;
  // Per pool, not global: other pg users in the process keep their own parsers. Epoch ms and
  // sequence numbers stay far below 2^53.
  const types = new pg.TypeOverrides();
  types.setTypeParser(INT8_OID, Number);
  const settings = sessionSettings(schemaSql);
  const startupOptions = settings.map(([name, value]) => `-c ${name}=${escapeOption(value)}`).join(" ");
  const pooled = options.listenUrl !== undefined;
  const client = (of: string, withSettings: boolean): pg.ClientConfig => {
    const { connectionString, options: urlOptions } = withoutOptions(of);
    const startup = [urlOptions, withSettings ? startupOptions : null].filter((o) => o !== null).join(" ");
    return {
      connectionString,
      ...(startup ? { options: startup } : {}),
      connectionTimeoutMillis: options.connectTimeoutMs,
      // TCP keepalives: a connection to a vanished server fails instead of waiting for ever
      // (the ready listener's above all: it only reads).
      keepAlive: true,
      fallback_application_name: "skein",
    };
  };
  const listenUrl = options.listenUrl ?? url;
  return {
    config: { ...client(url, !pooled), types, max: options.poolSize },
    listen: { config: client(listenUrl, true), target: describeTarget(listenUrl) },
    perTransaction: pooled
      ? {
          text: `SELECT ${settings.map((_, i) => `set_config($${2 * i + 1}, $${2 * i + 2}, true)`).join(", ")}`,
          values: settings.flat(),
        }
      : null,
    schema,
    schemaSql,
    channel,
    channelSql: pg.escapeIdentifier(channel),
    target: describeTarget(url),
  };
}

/**
 * The settings every statement of Skein's runs with: its schema as the search_path, and plans
 * that stay good. Every statement Skein prepares runs with the same shapes of values over and
 * over: one plan each, kept (custom plans would replan every execution, a third of a small
 * statement's time). A plan is made when a connection first runs the statement, often while the
 * tables are still small, and nothing replans it unless ANALYZE runs (never, where autovacuum is
 * off): a plan that scanned a small table sequentially would go on scanning it as it grows, on
 * every lookup by key. Every statement of Skein's has an index for its access path, so
 * sequential scans are ruled out; and JIT compilation is too (it is for long analytical
 * queries, and a ruled-out scan's nominal cost would trigger it on every execution).
 */
function sessionSettings(schemaSql: string): [name: string, value: string][] {
  return [
    ["search_path", schemaSql],
    ["plan_cache_mode", "force_generic_plan"],
    ["enable_seqscan", "off"],
    ["jit", "off"],
  ];
}

function checkSchema(schema: string): void {
  const problem =
    schema.length === 0
      ? "is empty"
      : schema.includes("\0")
        ? "contains a NUL character"
        : Buffer.byteLength(schema) > MAX_SCHEMA_BYTES
          ? `is longer than ${MAX_SCHEMA_BYTES} bytes (the notification channel skein_ready_<schema> must fit in 63)`
          : null;
  if (problem) throw new ValidationError(`the PostgreSQL schema name ${JSON.stringify(schema)} ${problem}`);
}

/**
 * The startup `options` string is split on whitespace with backslash escapes (libpq): a quoted
 * schema name with spaces must survive that.
 */
function escapeOption(value: string): string {
  return value.replace(/[\\\s]/g, (c) => `\\${c}`);
}

/**
 * pg lets a URL's parameters override the configuration, so the URL's own `options` (say
 * `-c statement_timeout=5s`) would replace our search_path: take them out and append ours.
 */
function withoutOptions(url: string): { connectionString: string; options: string | null } {
  if (!/[?&]options=/.test(url)) return { connectionString: url, options: null };
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ValidationError(
      "cannot combine the `options` parameter of this PostgreSQL URL with the store's search_path; " +
        "give the host in the URL (postgres://user@host/db?options=...) or drop the options",
    );
  }
  const options = parsed.searchParams.get("options");
  parsed.searchParams.delete("options");
  return { connectionString: parsed.toString(), options };
}

/** `postgres://user@host:port/db`, without password or parameters. */
export function describeTarget(url: string): string {
  try {
    const u = new URL(url);
    u.password = "";
    u.search = "";
    u.hash = "";
    return u.toString();
  } catch {
    return "the PostgreSQL server of the given URL";
  }
}
