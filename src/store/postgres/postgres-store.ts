/**
 * The PostgreSQL store: many engines on many machines share one database (DESIGN §8). Every
 * object lives in one schema (`skein` unless told), which each pooled connection has as its
 * search_path. A store runs its transactions one at a time on one pooled connection; reads
 * outside transactions use the rest of the pool concurrently. Runs are changed under their
 * row locks (store.ts), the database's clock judges every due time (DESIGN §7), and
 * LISTEN/NOTIFY wakes idle engines when another one makes visits ready.
 *
 * Behind a transaction-mode pooler (`listenUrl` given, DESIGN §8) every transaction sets the
 * schema and the plan settings itself, reads outside a transaction become one-statement
 * transactions that do the same, and nothing is prepared by name (connection.ts); the listener
 * and the engine's lock, which need a session, use the direct connection at `listenUrl`.
 */

import pg from "pg";
import type { Logger } from "pino";
import type { Compensation, MapItem, Run, RunEvent, Schedule, Visit } from "../../core/types.js";
import { DatabaseError, ValidationError } from "../../errors.js";
import { Serial } from "../serial.js";
import type {
  ChildRun,
  EngineRow,
  LoadedRun,
  ReadyNotice,
  RunFilter,
  RunRead,
  ScheduleFilter,
  Store,
  StoredWorkflow,
  StoreGauges,
  StoreTx,
  TransactionOptions,
  VisitKey,
} from "../store.js";
import { likeLiteral, searchTextOf } from "../store.js";
import {
  type ConnectionSettings,
  connectionSettings,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_SCHEMA,
} from "./connection.js";
import { ENGINE_LOCK_HELD_BY, engineLockName } from "./engine-lock.js";
import { gaugeStatements } from "./gauges.js";
import { RUNS_WAITING_ON_KEY } from "./inbox.js";
import { type DbMapItem, LIST_MAP_ITEMS, mapItemFromDb } from "./map-items.js";
import { migrate } from "./migrate.js";
import { connectError } from "./pg-errors.js";
import { HOLDS_ATTEMPTS, type LoadedRunRow, loadRunsSql, loadRunsValues, PostgresTx, runRead } from "./postgres-tx.js";
import { ReadyListener } from "./ready-listener.js";
import {
  COMPENSATION_COLUMNS,
  compensationFromDb,
  type DbCompensation,
  type DbEvent,
  type DbRun,
  type DbVisit,
  eventFromDb,
  RUN_COLUMNS,
  runFromDb,
  STORED_EVENT_COLUMNS,
  selectList,
  VISIT_COLUMNS,
  visitFromDb,
  WORKFLOW_COLUMNS,
} from "./rows.js";
import { runIdStatements } from "./run-ids.js";
import { listSchedulesSql, SCHEDULE_BY_ID, scheduleFromDb } from "./schedules.js";
import { Session, watchConnection } from "./session.js";

export interface PostgresOptions {
  /** A connection URL: `postgres://user:password@host:5432/database`. */
  url: string;
  /** The schema holding Skein's tables, created when missing. Default `skein`. */
  schema?: string;
  /**
   * A direct connection to the same database, for what needs a session of its own (LISTEN and
   * the engine's liveness lock). Given, `url` is taken for a transaction-mode pooler
   * (PgBouncer): no startup options, no session state between transactions, no named
   * prepared statements. Default: none, `url` is a direct connection and carries everything.
   */
  listenUrl?: string;
  /**
   * The clock of every due time. Default: the database's (`clock_timestamp()`, read once per
   * transaction), so that engines on machines with skewed clocks agree. Tests pass a manual clock.
   */
  clock?: { now(): number };
  logger?: Pick<Logger, "warn" | "error">;
  /**
   * Connections in the pool: one carries this store's transactions, the others concurrent reads.
   * The listener for ready visits has one more of its own. Default 5, at least 2.
   */
  poolSize?: number;
  /** How long opening a connection may take, ms. Default 10 000. */
  connectTimeoutMs?: number;
}

export const DEFAULT_POOL_SIZE = 5;

/** The database's time in epoch ms. clock_timestamp(), not now(): now() is the transaction's start. */
const DB_NOW = "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

const BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED";

/**
 * What a transaction's BEGIN round trip runs after BEGIN (named: prepared once per connection,
 * kept plans; unnamed behind a pooler): the database's time, the runs' locks, waiting or not,
 * and the read of the runs it locked. The run ids are bound as an array parameter, never
 * written into the SQL.
 */
const BEGIN_STATEMENTS = {
  now: { name: "skein_now", text: `SELECT ${DB_NOW} AS now` },
  lock: {
    name: "skein_lock_runs",
    text: "SELECT run_id FROM runs WHERE run_id = ANY($1::text[]) ORDER BY run_id FOR UPDATE",
  },
  tryLock: {
    name: "skein_try_lock_runs",
    text: "SELECT run_id FROM runs WHERE run_id = ANY($1::text[]) FOR UPDATE SKIP LOCKED",
  },
  load: { name: "skein_load_locked", text: loadRunsSql("$1::text[]", "$2::bigint[]") },
} as const satisfies Record<string, { name: string; text: string }>;

/** First key of workflow registration locks ("skwf"); the second is a hash of schema and id. */
const WORKFLOW_LOCK = 0x736b7766;

const SQL = {
  // $4: the clock's time, or null for the database's. $5: how long a heartbeat stays fresh.
  // Engines found dead by their free lock are left to the sweeps, which give a lock its grace.
  registerEngine: `
    WITH t AS (SELECT coalesce($4::bigint, ${DB_NOW}) AS now),
    me AS (INSERT INTO engines (engine_id, host, pid, started_at, heartbeat_at, served_types)
           SELECT $1, $2, $3, t.now, t.now, $6::json FROM t),
    d AS (UPDATE engines e SET stopped_at = t.now FROM t
           WHERE e.stopped_at IS NULL AND e.heartbeat_at < t.now - $5::bigint AND e.engine_id <> $1
          RETURNING e.engine_id)
    SELECT engine_id FROM d WHERE ${HOLDS_ATTEMPTS}`,
  // A heartbeat also revives an engine another one took for dead while it was merely slow: if
  // it dies later, its newer attempts are recovered as soon as its heartbeat goes stale again.
  heartbeat: `UPDATE engines SET heartbeat_at = coalesce($2::bigint, ${DB_NOW}), stopped_at = NULL,
                               served_types = coalesce($3::json, served_types)
              WHERE engine_id = $1`,
  servedTypes: `SELECT DISTINCT json_array_elements_text(served_types) AS agent_type FROM engines
                WHERE stopped_at IS NULL AND heartbeat_at >= coalesce($1::bigint, ${DB_NOW}) - $2::bigint
                  AND served_types IS NOT NULL`,
  // An engine that stops while attempts it held still run (closed before they returned) is
  // not stopped but made stale at once, so the next engine to look takes it and recovers them.
  stopEngine: `
    WITH d AS (SELECT $1::text AS engine_id),
    h AS (SELECT ${HOLDS_ATTEMPTS} AS held FROM d)
    UPDATE engines e SET stopped_at = CASE WHEN h.held THEN NULL ELSE coalesce($2::bigint, ${DB_NOW}) END,
                         heartbeat_at = CASE WHEN h.held THEN 0 ELSE e.heartbeat_at END
      FROM h WHERE e.engine_id = $1`,
} as const;

const RUNS = selectList(RUN_COLUMNS);
const RUN_ID_STATEMENTS = runIdStatements(RUNS);
const VISITS = selectList(VISIT_COLUMNS);
const WORKFLOWS = selectList(WORKFLOW_COLUMNS);

/** How many times a read that lost its connection is tried. */
const READ_ATTEMPTS = 3;
const GAUGES = gaugeStatements(DB_NOW);
/** The same for marking an engine stopped, which closing waits for. */
const STOP_ATTEMPTS = 5;

export class PostgresStore implements Store {
  readonly exclusive = false;
  private readonly serial = new Serial();
  private readonly listener: ReadyListener;
  /** Other engines seen with their liveness lock free, since when (takeDeadEngines). */
  private readonly lockFree = new Map<string, number>();
  private closing: Promise<void> | null = null;
  private closed = false;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly settings: ConnectionSettings,
    private readonly clock: { now(): number } | undefined,
    private readonly logger: Pick<Logger, "warn" | "error">,
  ) {
    // When this engine's own listener was cut, others' likely were too (a failover, a
    // terminate-all): what it saw free before it was back proves nothing, so the grace starts over.
    this.listener = new ReadyListener(settings.listen.config, settings.channel, settings.channelSql, logger, () =>
      this.lockFree.clear(),
    );
  }

  /**
   * Connects, creates the schema when missing and migrates it.
   * @throws DatabaseError when the server cannot be reached, refuses the login, has no such
   *   database, or holds a schema that is newer than this Skein or not Skein's.
   * @throws ValidationError for an unusable schema name or pool size.
   */
  static async open(options: PostgresOptions): Promise<PostgresStore> {
    const schema = options.schema ?? DEFAULT_SCHEMA;
    const poolSize = options.poolSize ?? DEFAULT_POOL_SIZE;
    if (!Number.isInteger(poolSize) || poolSize < 2) {
      // A transaction's work may read outside it (a workflow definition): one connection would wait for itself.
      throw new ValidationError(`poolSize must be an integer of at least 2, got ${poolSize}`);
    }
    const settings = connectionSettings(options.url, schema, {
      poolSize,
      connectTimeoutMs: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      listenUrl: options.listenUrl,
    });
    const logger = options.logger ?? { warn: () => {}, error: () => {} };
    // Pipeline mode: a transaction's BEGIN, its locks and its reads go out together, each with
    // its parameters bound, and come back in one round trip (Session.pipeline). Every other use
    // of a connection waits for each answer, so it behaves as without.
    const pool = new pg.Pool({ ...settings.config, pipeline: true });
    // An idle connection that fails (a server restart) is dropped by the pool; without a
    // listener the event would crash the process.
    // (Logged without the error's `client`: pg attaches the whole connection to it.)
    pool.on("connect", watchConnection);
    pool.on("error", (err) =>
      logger.warn(
        { err: { message: err.message, code: (err as { code?: string }).code } },
        "skein: an idle PostgreSQL connection failed; the pool replaces it",
      ),
    );
    try {
      // Through the pooler too: each migration is one transaction, under a transaction-level lock.
      await migrate(pool, { schema, schemaSql: settings.schemaSql, target: settings.target });
    } catch (e) {
      await pool.end().catch(() => undefined);
      throw connectError(e, settings.target);
    }
    return new PostgresStore(pool, settings, options.clock, logger);
  }

  async registerEngine(engine: EngineRow, staleBefore: number): Promise<string[]> {
    // The liveness lock first: once the row is committed another engine's sweep may look, and
    // a registered engine without its lock would look dead to it.
    const lockName = engineLockName(this.settings.schema, engine.engine_id);
    await this.listener
      .holdLock(lockName)
      .catch((e: unknown) => Promise.reject(connectError(e, this.settings.listen.target)));
    if (this.settings.perTransaction) await this.checkListenReachesPool(lockName);
    // Many engines share the database: nothing to refuse. With the database's clock, the
    // freshness window is the caller's (its now - staleBefore), judged by the database's now.
    const rows = await this.read<{ engine_id: string }>({
      name: "skein_register_engine",
      text: SQL.registerEngine,
      values: [
        engine.engine_id,
        engine.host,
        engine.pid,
        this.clock ? engine.heartbeat_at : null,
        engine.heartbeat_at - staleBefore,
        engine.served_types ? JSON.stringify(engine.served_types) : null,
      ],
    });
    return rows.map((r) => r.engine_id);
  }

  /**
   * Behind a pooler: the lock just taken on the listen connection must be seen through the
   * pooler, where other engines look for it. It is not when listenUrl names another server or
   * database (this engine would be taken for dead, and notifications would go elsewhere), or a
   * pooler itself (the lock and the LISTEN would sit on a server connection shared with others).
   * @throws DatabaseError saying which connection to fix.
   */
  private async checkListenReachesPool(lockName: string): Promise<void> {
    const pid = this.listener.backendPid;
    if (pid === null) return; // reconnecting already: the lock is taken again, on another backend
    const [row] = await this.read<{ held: boolean }>({ text: ENGINE_LOCK_HELD_BY, values: [pid, lockName] });
    if (row?.held || this.listener.backendPid !== pid) return;
    throw new DatabaseError(
      `the listen database ${this.settings.listen.target} does not reach the database of ${this.settings.target}: ` +
        "the lock this engine holds on its listen connection is not seen through the database's connections, so " +
        "other engines would take it for dead and their notifications would not reach it; give listenDatabase a " +
        "direct connection (not through the pooler) to the same server and database",
    );
  }

  async heartbeat(engineId: string, now: number, servedTypes?: string[]): Promise<void> {
    await this.read({
      name: "skein_heartbeat",
      text: SQL.heartbeat,
      values: [engineId, this.clock ? now : null, servedTypes ? JSON.stringify(servedTypes) : null],
    });
  }

  async servedTypes(now: number, freshMs: number): Promise<string[]> {
    const rows = await this.read<{ agent_type: string }>({
      name: "skein_served_types",
      text: SQL.servedTypes,
      values: [this.clock ? now : null, freshMs],
    });
    return rows.map((r) => r.agent_type);
  }

  /**
   * Marks the engine stopped. Never fails for a lost connection (closing must end): the row is
   * then left as it is, its heartbeat goes stale, and another engine takes it as a dead one's.
   */
  async stopEngine(engineId: string, now: number): Promise<void> {
    try {
      await this.read(
        { name: "skein_stop_engine", text: SQL.stopEngine, values: [engineId, this.clock ? now : null] },
        STOP_ATTEMPTS,
      );
    } catch (e) {
      if (!(e instanceof DatabaseError && e.transient)) throw e;
      this.logger.warn(
        { err: { message: e.message } },
        "skein: could not mark the engine stopped; other engines take over its row once its heartbeat expires",
      );
    }
  }

  async putWorkflow(id: string, hash: string, definition: string, now: number) {
    const [known] = await this.read<{ version: number }>({
      name: "skein_workflow_by_hash",
      text: "SELECT version FROM workflows WHERE id = $1 AND hash = $2",
      values: [id, hash],
    });
    if (known) return { version: known.version, created: false };
    // Two processes registering at once: the lock orders them, and the second finds the first's version.
    return this.inTransaction(async (session) => {
      await session.query({
        text: "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        values: [WORKFLOW_LOCK, `${this.settings.schemaSql}.${id}`],
      });
      const { rows } = await session.query<{ same: number | null; latest: number | null }>({
        text: `SELECT (SELECT version FROM workflows WHERE id = $1 AND hash = $2) AS same,
                      (SELECT max(version) FROM workflows WHERE id = $1) AS latest`,
        values: [id, hash],
      });
      const same = rows[0]?.same ?? null;
      if (same !== null) return { version: same, created: false };
      const version = (rows[0]?.latest ?? 0) + 1;
      const stored = JSON.stringify({ ...JSON.parse(definition), version });
      const inserted = await session.query({
        text: `INSERT INTO workflows (id, version, hash, definition, created_at) VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT DO NOTHING`,
        values: [id, version, hash, stored, now],
      });
      if (inserted.rowCount === 1) return { version, created: true };
      const again = await session.query<{ version: number }>({
        text: "SELECT version FROM workflows WHERE id = $1 AND hash = $2",
        values: [id, hash],
      });
      const found = again.rows[0];
      if (!found) throw new Error(`skein: workflow ${id} version ${version} was taken by another definition`);
      return { version: found.version, created: false };
    });
  }

  async getWorkflow(id: string, version?: number): Promise<StoredWorkflow | null> {
    const [row] =
      version === undefined
        ? await this.read<StoredWorkflow>({
            name: "skein_latest_workflow",
            text: `SELECT ${WORKFLOWS} FROM workflows WHERE id = $1 ORDER BY version DESC LIMIT 1`,
            values: [id],
          })
        : await this.read<StoredWorkflow>({
            name: "skein_workflow",
            text: `SELECT ${WORKFLOWS} FROM workflows WHERE id = $1 AND version = $2`,
            values: [id, version],
          });
    return row ?? null;
  }

  async latestWorkflowVersion(id: string): Promise<number | null> {
    const [row] = await this.read<{ version: number | null }>({
      name: "skein_latest_workflow_version",
      text: "SELECT max(version) AS version FROM workflows WHERE id = $1",
      values: [id],
    });
    return row?.version ?? null;
  }

  async putWorkflowVersion(id: string, version: number, hash: string, definition: string, now: number) {
    await this.inTransaction(async (session) => {
      await session.query({
        text: `INSERT INTO workflows (id, version, hash, definition, created_at) VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT DO NOTHING`,
        values: [id, version, hash, definition, now],
      });
    });
  }

  async listWorkflows(): Promise<{ id: string; version: number; created_at: number }[]> {
    return this.read({
      text: "SELECT id, max(version) AS version, max(created_at) AS created_at FROM workflows WHERE strpos(id, '/') = 0 GROUP BY id ORDER BY id",
    });
  }

  async getRun(runId: string): Promise<Run | null> {
    const [row] = await this.read<DbRun>({
      name: "skein_get_run",
      text: `SELECT ${RUNS} FROM runs WHERE run_id = $1`,
      values: [runId],
    });
    return row ? runFromDb(row) : null;
  }

  async readRun(runId: string): Promise<LoadedRun | null> {
    const [row] = await this.read<LoadedRunRow>({
      name: "skein_read_run",
      text: loadRunsSql("ARRAY[$1::text]", "ARRAY[NULL::bigint]"),
      values: [runId],
    });
    const read = row ? runRead(row) : null;
    return read && "run" in read ? read : null;
  }

  async listChildren(runId: string): Promise<ChildRun[]> {
    return this.read<ChildRun>({
      name: "skein_list_children",
      text: `SELECT parent->>'node_id' AS node_id, (parent->>'visit')::int AS visit, (parent->>'attempt')::int AS attempt,
          run_id, workflow_id, status
        FROM runs WHERE parent->>'run_id' = $1 AND parent IS NOT NULL AND parent->>'item' IS NULL
        ORDER BY 1, 2, 3`,
      values: [runId],
    });
  }

  async listMapItems(key: VisitKey, options: { after: number; limit: number }): Promise<MapItem[]> {
    const rows = await this.read<DbMapItem>({
      ...LIST_MAP_ITEMS,
      values: [key.run_id, key.node_id, key.visit, options.after, options.limit],
    });
    return rows.map(mapItemFromDb);
  }

  async findRunsByIdPart(part: string, limit: number): Promise<{ prefix: Run[]; suffix: Run[] }> {
    const [prefix, suffix] = await Promise.all([
      this.read<DbRun>({ ...RUN_ID_STATEMENTS.prefix, values: [part, limit] }),
      this.read<DbRun>({ ...RUN_ID_STATEMENTS.suffix, values: [part, limit] }),
    ]);
    return { prefix: prefix.map(runFromDb), suffix: suffix.map(runFromDb) };
  }

  async listRuns(filter: RunFilter): Promise<Run[]> {
    const where: string[] = [];
    const values: unknown[] = [];
    const param = (value: unknown) => {
      values.push(value);
      return `$${values.length}`;
    };
    if (filter.status) where.push(`status = ${param(filter.status)}`);
    if (filter.workflow_id) where.push(`workflow_id = ${param(filter.workflow_id)}`);
    else where.push("strpos(workflow_id, '/') = 0"); // not a map's item runs, unless asked for by id
    if (filter.workflow_ids) where.push(`workflow_id = ANY(${param(filter.workflow_ids)}::text[])`);
    if (filter.schedule_id !== undefined) where.push(`schedule_id = ${param(filter.schedule_id)}`);
    if (filter.id_prefix !== undefined) {
      const prefix = param(filter.id_prefix);
      where.push(`run_id >= ${prefix} AND run_id < ${prefix} || chr(65535)`);
    }
    if (filter.id_contains !== undefined) where.push(`run_id ILIKE ${param(`%${likeLiteral(filter.id_contains)}%`)}`);
    if (filter.created_after !== undefined) where.push(`created_at >= ${param(filter.created_after)}`);
    if (filter.created_before !== undefined) where.push(`created_at < ${param(filter.created_before)}`);
    if (filter.q !== undefined) {
      // ILIKE with the trigram indexes of migration 012; \, % and _ are taken literally.
      const pattern = param(`%${likeLiteral(searchTextOf(filter.q))}%`);
      // Map item runs are not searched (nor indexed), as on SQLite.
      where.push(`strpos(workflow_id, '/') = 0 AND (input::text ILIKE ${pattern} OR output::text ILIKE ${pattern})`);
    }
    if (filter.before) {
      where.push(`(created_at, run_id) < (SELECT created_at, run_id FROM runs WHERE run_id = ${param(filter.before)})`);
    }
    const text = `SELECT ${RUNS} FROM runs ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
      ORDER BY created_at DESC, run_id DESC LIMIT ${param(filter.limit ?? 100)}`;
    return (await this.read<DbRun>({ text, values })).map(runFromDb);
  }

  async listVisits(runId: string, options: { currentOnly?: boolean } = {}): Promise<Visit[]> {
    const rows = await this.read<DbVisit>(
      options.currentOnly
        ? {
            name: "skein_current_visits",
            text: `SELECT ${VISITS} FROM visits WHERE run_id = $1 AND is_current ORDER BY created_at, node_id`,
            values: [runId],
          }
        : {
            name: "skein_visits",
            text: `SELECT ${VISITS} FROM visits WHERE run_id = $1 ORDER BY created_at, node_id, visit`,
            values: [runId],
          },
    );
    return rows.map(visitFromDb);
  }

  async latestTerminalVisits(runId: string): Promise<Visit[]> {
    const rows = await this.read<DbVisit>({
      name: "skein_latest_terminal_visits",
      text: `SELECT DISTINCT ON (node_id) ${VISITS} FROM visits
              WHERE run_id = $1 AND state IN ('SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED')
              ORDER BY node_id, visit DESC`,
      values: [runId],
    });
    return rows.map(visitFromDb);
  }

  async listEvents(runId: string, options: { afterSeq?: number; limit?: number } = {}): Promise<RunEvent[]> {
    const rows = await this.read<DbEvent>({
      name: "skein_events",
      text: `SELECT ${selectList(STORED_EVENT_COLUMNS)} FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      values: [runId, options.afterSeq ?? 0, options.limit ?? 10_000],
    });
    return rows.map(eventFromDb);
  }

  async runsWaitingOnKey(name: string, key: string, limit: number): Promise<string[]> {
    const rows = await this.read<{ run_id: string }>({ text: RUNS_WAITING_ON_KEY, values: [name, key, limit] });
    return rows.map((r) => r.run_id);
  }

  async listReviews(runIds?: readonly string[]): Promise<(Visit & { trace_id: string; workflow_id: string })[]> {
    const rows = await this.read<DbVisit & { run_trace_id: string; run_workflow_id: string }>({
      name: "skein_reviews",
      // NULLS FIRST: SQLite's order. A null array is every run's reviews.
      text: `SELECT ${selectList(VISIT_COLUMNS, "v")}, r.trace_id AS run_trace_id, r.workflow_id AS run_workflow_id
               FROM visits v JOIN runs r ON r.run_id = v.run_id
              WHERE v.state = 'IN_REVIEW' AND ($1::text[] IS NULL OR v.run_id = ANY ($1::text[]))
              ORDER BY v.started_at NULLS FIRST, v.run_id`,
      values: [runIds ?? null],
    });
    return rows.map(({ run_trace_id, run_workflow_id, ...row }) => ({
      ...visitFromDb(row),
      trace_id: run_trace_id,
      workflow_id: run_workflow_id,
    }));
  }

  async readGauges(engineId: string, now: number): Promise<StoreGauges> {
    const at = this.clock ? now : null;
    const [ready, [rest]] = await Promise.all([
      this.read<StoreGauges["ready"][number]>({ ...GAUGES.ready, values: [at] }),
      this.read<Omit<StoreGauges, "ready">>({ ...GAUGES.pending, values: [at, engineId] }),
    ]);
    return { ready, ...(rest as Omit<StoreGauges, "ready">) };
  }

  async listCompensations(runId: string): Promise<Compensation[]> {
    const rows = await this.read<DbCompensation>({
      name: "skein_compensations",
      text: `SELECT ${selectList(COMPENSATION_COLUMNS)} FROM compensations WHERE run_id = $1 ORDER BY seq`,
      values: [runId],
    });
    return rows.map(compensationFromDb);
  }

  async getSchedule(scheduleId: string): Promise<Schedule | null> {
    const [row] = await this.read<Parameters<typeof scheduleFromDb>[0]>({ ...SCHEDULE_BY_ID, values: [scheduleId] });
    return row ? scheduleFromDb(row) : null;
  }

  async listSchedules(filter: ScheduleFilter): Promise<Schedule[]> {
    const rows = await this.read<Parameters<typeof scheduleFromDb>[0]>(listSchedulesSql(filter));
    return rows.map(scheduleFromDb);
  }

  async checkpoint(): Promise<void> {
    // PostgreSQL checkpoints and vacuums on its own.
  }

  onReady(listener: (notice: ReadyNotice) => void): void {
    this.listener.add(listener);
  }

  transaction<T>(fn: (tx: StoreTx) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    const clock = this.clock;
    // One round trip (pipelined): BEGIN, the database's time, the runs' locks (in run_id order:
    // two transactions never deadlock; then those to try, skipping any another transaction
    // holds), then the runs read by a statement of its own, whose snapshot is taken after the
    // locks (it sees what the transactions it waited for committed).
    const statements = this.begin();
    const nowAt = statements.length;
    if (!clock) statements.push(BEGIN_STATEMENTS.now);
    const locking = new Set(options.lock ?? []);
    const lock = [...locking].sort();
    const tryLock = [...new Set(options.tryLock ?? [])].filter((id) => !locking.has(id));
    if (lock.length > 0) statements.push({ ...BEGIN_STATEMENTS.lock, values: [lock] });
    if (tryLock.length > 0) statements.push({ ...BEGIN_STATEMENTS.tryLock, values: [tryLock] });
    // A run tried and not locked is read too (it cannot be told apart in SQL), then left out.
    const reading = lock.length + tryLock.length > 0;
    if (reading)
      statements.push({ ...BEGIN_STATEMENTS.load, values: loadRunsValues([...lock, ...tryLock], options.known) });
    return this.serial.run(() =>
      this.inTransaction(async (session, begun) => {
        let time: () => number;
        if (clock) time = () => clock.now();
        else {
          const now = begun[nowAt]?.rows[0]?.now as number | undefined;
          if (typeof now !== "number") throw new Error("skein: PostgreSQL did not return its time at BEGIN");
          time = () => now;
        }
        const read = new Map<string, RunRead>();
        for (const row of (reading ? (begun[begun.length - 1]?.rows ?? []) : []) as LoadedRunRow[]) {
          read.set(row.run_id, runRead(row));
        }
        const tried = new Set(
          tryLock.length > 0 ? (begun[begun.length - 2]?.rows ?? []).map((r) => r.run_id as string) : [],
        );
        const locked = new Map([...read].filter(([id]) => locking.has(id) || tried.has(id)));
        const tx = new PostgresTx(
          session,
          time,
          this.settings.channel,
          this.settings.schema,
          // Without its own listener up, an engine judges no other by its lock.
          this.listener.listening ? this.lockFree : null,
          locked,
          [...tried].flatMap((id) => locked.get(id) ?? []),
        );
        try {
          return await fn(tx);
        } finally {
          tx.end();
        }
      }, statements),
    );
  }

  async close(): Promise<void> {
    this.closing ??= (async () => {
      await this.serial.idle(); // transactions asked for before close() still run
      this.closed = true;
      await this.listener.close();
      await this.pool.end();
    })();
    return this.closing;
  }

  /**
   * Runs `fn` in a transaction on a pooled connection of its own and commits; rolls back if it
   * throws. `begin` opens the transaction and may read something in the same round trip; `fn`
   * gets its results.
   */
  private async inTransaction<T>(
    fn: (session: Session, begun: pg.QueryResult[]) => Promise<T>,
    begin: pg.QueryConfig[] = this.begin(),
  ): Promise<T> {
    const session = await this.session();
    let open = false;
    let destroy = false;
    try {
      // Open before BEGIN's round trip returns: a statement after BEGIN in it may fail (a
      // deadlock while locking), leaving a transaction to roll back.
      open = true;
      const begun = await session.pipeline(begin);
      const result = await fn(session, begun);
      open = false;
      // Committed already when the transaction's last write carried its COMMIT (StoreTx.write).
      if (!session.committed) await session.query("COMMIT", "commit");
      return result;
    } catch (e) {
      // After a failed COMMIT the transaction is over; a broken connection took it with it.
      if (open && !session.isBroken) {
        await session.query("ROLLBACK").catch(() => {
          destroy = true;
        });
      }
      throw e;
    } finally {
      session.release(destroy);
    }
  }

  /** What opens a transaction: BEGIN, and behind a pooler the settings for it. */
  private begin(): pg.QueryConfig[] {
    const { perTransaction } = this.settings;
    return perTransaction ? [{ text: BEGIN }, perTransaction] : [{ text: BEGIN }];
  }

  /**
   * One statement outside any transaction, on any free pooled connection. A read is safe to
   * repeat: one that lost its connection (a pooled connection the server closed while idle) is
   * tried again on another. Behind a pooler it is a transaction of its own, in one round trip:
   * the settings, the statement, COMMIT.
   */
  private async read<R extends object>(config: pg.QueryConfig, attempts = READ_ATTEMPTS): Promise<R[]> {
    for (let attempt = 1; ; attempt++) {
      let session: Session | null = null;
      try {
        // Connecting is retried too: a new connection may be terminated while it starts.
        session = await this.session();
        if (!this.settings.perTransaction) return (await session.query<R & pg.QueryResultRow>(config, "read")).rows;
        const results = await session.pipeline([...this.begin(), config, { text: "COMMIT" }], "read");
        return (results[results.length - 2]?.rows ?? []) as R[];
      } catch (e) {
        if (!(e instanceof DatabaseError && e.transient) || attempt >= attempts) throw e;
      } finally {
        session?.release();
      }
    }
  }

  private async session(): Promise<Session> {
    if (this.closed) throw new DatabaseError(`the store of ${this.settings.target} is closed`);
    return Session.open(this.pool, this.settings.target, this.settings.perTransaction !== null);
  }
}
