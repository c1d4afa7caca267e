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
import { DatabaseError, ValidationError } from "../../errors.js";
import type { EngineRow } from "../engines.js";
import type { StoreReads } from "../reads.js";
import { type KnownRevisions, type ReadyNotice, type RunRead, StaleRunsError } from "../runs.js";
import { Serial } from "../serial.js";
import type { StepReads } from "../steps.js";
import type { Store, StoreTx, TransactionOptions } from "../store.js";
import type { WorkflowStore } from "../workflows.js";
import {
  type ConnectionSettings,
  connectionSettings,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_SCHEMA,
} from "./connection.js";
import { DatabaseTime, TOLERANCE_MS } from "./db-time.js";
import { ENGINE_LOCK_HELD_BY, engineLockName } from "./engine-lock.js";
import { ENGINE_SQL } from "./engines.js";
import { migrate } from "./migrate.js";
import { connectError } from "./pg-errors.js";
import { PostgresTx } from "./postgres-tx.js";
import { postgresReads } from "./reads.js";
import { ReadyListener } from "./ready-listener.js";
import { type LoadedRunRow, loadRunsSql, loadRunsValues, runRead } from "./runs.js";
import { Session, watchConnection } from "./session.js";
import { postgresStepReads } from "./steps.js";
import { DB_NOW } from "./tx-query.js";
import { postgresWorkflows } from "./workflows.js";

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
  trusted: {
    name: "skein_lock_trusted",
    text: "SELECT skein_lock_trusted($1::text[], $2::bigint[], $3::bigint, $4::bigint) AS now",
  },
} as const satisfies Record<string, { name: string; text: string }>;

/** How many times a read that lost its connection is tried. */
const READ_ATTEMPTS = 3;
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
  private readonly reads: StoreReads;
  private readonly steps: StepReads;
  private readonly workflows: WorkflowStore;
  /** The database's clock as last read (without an injected clock). */
  private readonly time = new DatabaseTime();

  private constructor(
    private readonly pool: pg.Pool,
    private readonly settings: ConnectionSettings,
    private readonly clock: { now(): number } | undefined,
    private readonly logger: Pick<Logger, "warn" | "error">,
    ownBackends: ReadonlySet<number>,
  ) {
    // When this engine's own listener was cut, others' likely were too (a failover, a
    // terminate-all): what it saw free before it was back proves nothing, so the grace starts over.
    this.listener = new ReadyListener(
      settings.listen.config,
      settings.channel,
      settings.channelSql,
      logger,
      () => this.lockFree.clear(),
      (pid) => ownBackends.has(pid),
    );
    const read = this.read.bind(this) as <R extends object>(config: pg.QueryConfig, attempts?: number) => Promise<R[]>;
    this.reads = postgresReads(read, clock);
    this.steps = postgresStepReads(read);
    this.workflows = postgresWorkflows(read, (fn) => this.inTransaction(fn), settings.schemaSql);
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
    // The server processes of this store's own connections: the notices they send are this
    // engine's own (notifyOthers), which its listener leaves out.
    const backends = new Set<number>();
    pool.on("connect", (client) => {
      const pid = (client as { processID?: number | null }).processID;
      if (typeof pid === "number") backends.add(pid);
    });
    pool.on("remove", (client) => {
      const pid = (client as { processID?: number | null }).processID;
      if (typeof pid === "number") backends.delete(pid);
    });
    pool.on("error", (err) =>
      logger.warn(
        { err: { message: err.message, code: (err as { code?: string }).code } },
        "skein: an idle PostgreSQL connection failed; the pool replaces it",
      ),
    );
    try {
      // Through the pooler too: the migrations are one transaction, under a transaction-level lock.
      await migrate(pool, { schema, schemaSql: settings.schemaSql, target: settings.target });
    } catch (e) {
      await pool.end().catch(() => undefined);
      throw connectError(e, settings.target);
    }
    return new PostgresStore(pool, settings, options.clock, logger, backends);
  }

  // The facets outside transactions.
  readonly getRun: Store["getRun"] = (runId) => this.reads.getRun(runId);
  readonly readRun: Store["readRun"] = (runId) => this.reads.readRun(runId);
  readonly listRuns: Store["listRuns"] = (filter) => this.reads.listRuns(filter);
  readonly findRunsByIdPart: Store["findRunsByIdPart"] = (part, limit) => this.reads.findRunsByIdPart(part, limit);
  readonly listChildren: Store["listChildren"] = (runId) => this.reads.listChildren(runId);
  readonly listMapItems: Store["listMapItems"] = (key, options) => this.reads.listMapItems(key, options);
  readonly stepsOf: Store["stepsOf"] = (ids) => this.steps.stepsOf(ids);
  readonly runSteps: Store["runSteps"] = (runId, nodeId) => this.steps.runSteps(runId, nodeId);
  readonly threadSteps: Store["threadSteps"] = (name) => this.steps.threadSteps(name);
  readonly listVisits: Store["listVisits"] = (runId, options) => this.reads.listVisits(runId, options);
  readonly latestTerminalVisits: Store["latestTerminalVisits"] = (runId) => this.reads.latestTerminalVisits(runId);
  readonly listEvents: Store["listEvents"] = (runId, options) => this.reads.listEvents(runId, options);
  readonly runsWaitingOnKey: Store["runsWaitingOnKey"] = (name, key, limit) =>
    this.reads.runsWaitingOnKey(name, key, limit);
  readonly listReviews: Store["listReviews"] = (runIds) => this.reads.listReviews(runIds);
  readonly readGauges: Store["readGauges"] = (engineId, now) => this.reads.readGauges(engineId, now);
  readonly readRateBuckets: Store["readRateBuckets"] = () => this.reads.readRateBuckets();
  readonly readyAhead: Store["readyAhead"] = (agentType, priority, now) =>
    this.reads.readyAhead(agentType, priority, now);
  readonly getSchedule: Store["getSchedule"] = (scheduleId) => this.reads.getSchedule(scheduleId);
  readonly listSchedules: Store["listSchedules"] = (filter) => this.reads.listSchedules(filter);
  readonly putWorkflow: Store["putWorkflow"] = (id, hash, definition, now, events) =>
    this.workflows.putWorkflow(id, hash, definition, now, events);
  readonly putWorkflowVersion: Store["putWorkflowVersion"] = (id, version, hash, definition, now) =>
    this.workflows.putWorkflowVersion(id, version, hash, definition, now);
  readonly getWorkflow: Store["getWorkflow"] = (id, version) => this.workflows.getWorkflow(id, version);
  readonly latestWorkflowVersion: Store["latestWorkflowVersion"] = (id) => this.workflows.latestWorkflowVersion(id);
  readonly listWorkflows: Store["listWorkflows"] = () => this.workflows.listWorkflows();
  readonly workflowsTriggeredBy: Store["workflowsTriggeredBy"] = (event) => this.workflows.workflowsTriggeredBy(event);

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
      text: ENGINE_SQL.registerEngine,
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
      text: ENGINE_SQL.heartbeat,
      values: [engineId, this.clock ? now : null, servedTypes ? JSON.stringify(servedTypes) : null],
    });
  }

  async servedTypes(now: number, freshMs: number): Promise<string[]> {
    const rows = await this.read<{ agent_type: string }>({
      name: "skein_served_types",
      text: ENGINE_SQL.servedTypes,
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
        { name: "skein_stop_engine", text: ENGINE_SQL.stopEngine, values: [engineId, this.clock ? now : null] },
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

  async checkpoint(): Promise<void> {
    // PostgreSQL checkpoints and vacuums on its own.
  }

  onReady(listener: (notice: ReadyNotice) => void): void {
    this.listener.add(listener);
  }

  transaction<T>(fn: (tx: StoreTx) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    const locking = new Set(options.lock ?? []);
    const lock = [...locking].sort();
    const tryLock = [...new Set(options.tryLock ?? [])].filter((id) => !locking.has(id));
    const known = options.known ?? new Map<string, number>();
    return this.serial.run(() => {
      // The runs to lock are all held in memory, and the time is known without asking: nothing
      // needs an answer before `fn` runs, so BEGIN and the lock go with its first statement.
      const estimate = this.clock ? null : this.time.estimate();
      if (tryLock.length === 0 && lock.every((id) => known.has(id)) && (this.clock || estimate !== null)) {
        return this.trusting(fn, lock, known, estimate);
      }
      return this.reading(fn, lock, tryLock, known);
    });
  }

  /**
   * A transaction that reads before `fn` runs: one round trip (pipelined) of BEGIN, the
   * database's time, the runs' locks (in run_id order: two transactions never deadlock; then
   * those to try, skipping any another transaction holds), then the runs read by a statement of
   * their own, whose snapshot is taken after the locks (it sees what the transactions it waited
   * for committed); a run still at its `known` revision comes back unchanged.
   */
  private reading<T>(
    fn: (tx: StoreTx) => Promise<T>,
    lock: string[],
    tryLock: string[],
    known: KnownRevisions,
  ): Promise<T> {
    const clock = this.clock;
    const statements = this.begin();
    const nowAt = statements.length;
    if (!clock) statements.push(BEGIN_STATEMENTS.now);
    if (lock.length > 0) statements.push({ ...BEGIN_STATEMENTS.lock, values: [lock] });
    if (tryLock.length > 0) statements.push({ ...BEGIN_STATEMENTS.tryLock, values: [tryLock] });
    // A run tried and not locked is read too (it cannot be told apart in SQL), then left out.
    const reading = lock.length + tryLock.length > 0;
    if (reading) statements.push({ ...BEGIN_STATEMENTS.load, values: loadRunsValues([...lock, ...tryLock], known) });
    return this.inTransaction(async (session, begun) => {
      let time: () => number;
      if (clock) time = () => clock.now();
      else {
        const now = begun[nowAt]?.rows[0]?.now as number | undefined;
        if (typeof now !== "number") throw new Error("skein: PostgreSQL did not return its time at BEGIN");
        this.time.saw(now);
        time = () => now;
      }
      const read = new Map<string, RunRead>();
      for (const row of (reading ? (begun[begun.length - 1]?.rows ?? []) : []) as LoadedRunRow[]) {
        read.set(row.run_id, runRead(row));
      }
      const tried = new Set(
        tryLock.length > 0 ? (begun[begun.length - 2]?.rows ?? []).map((r) => r.run_id as string) : [],
      );
      const locking = new Set(lock);
      const locked = new Map([...read].filter(([id]) => locking.has(id) || tried.has(id)));
      const lockedTried = [...tried].flatMap((id) => locked.get(id) ?? []);
      return this.run(fn, session, time, locked, lockedTried);
    }, statements);
  }

  /**
   * A transaction that trusts the runs held in memory (every run it locks is at a `known`
   * revision) and the estimate of the database's time: `fn` runs at once, and BEGIN, the runs'
   * locks and the check of their revisions and of the estimate are sent with its first statement,
   * for a step its write and COMMIT: one round trip. When the check fails nothing is written
   * (StaleRunsError) and the caller tries again, reading.
   */
  private trusting<T>(
    fn: (tx: StoreTx) => Promise<T>,
    lock: string[],
    known: KnownRevisions,
    estimate: number | null,
  ): Promise<T> {
    const clock = this.clock;
    const check = {
      ...BEGIN_STATEMENTS.trusted,
      values: [lock, lock.map((id) => known.get(id)), estimate, TOLERANCE_MS],
    };
    const unchanged = new Map<string, RunRead>(lock.map((id) => [id, { run_id: id, unchanged: true }]));
    const time = clock ? () => clock.now() : () => estimate as number;
    return this.inTransaction(
      (session) => {
        session.defer([...this.begin(), check], (results) => {
          const now = results[results.length - 1]?.rows[0]?.now;
          if (typeof now === "number") this.time.saw(now);
        });
        return this.run(fn, session, time, unchanged, []);
      },
      [],
      () => this.time.forget(),
    );
  }

  /** Runs `fn` with the transaction's operations. */
  private async run<T>(
    fn: (tx: StoreTx) => Promise<T>,
    session: Session,
    time: () => number,
    locked: ReadonlyMap<string, RunRead>,
    tried: readonly RunRead[],
  ): Promise<T> {
    const tx = new PostgresTx(
      session,
      time,
      this.settings.channel,
      this.settings.schema,
      // Without its own listener up, an engine judges no other by its lock.
      this.listener.listening ? this.lockFree : null,
      locked,
      tried,
    );
    try {
      return await fn(tx);
    } finally {
      tx.end();
    }
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
   * gets its results. Given no `begin`, `fn` defers it to its first statement (Session.defer).
   * `stale`: called when the transaction failed its trust check (StaleRunsError).
   */
  private async inTransaction<T>(
    fn: (session: Session, begun: pg.QueryResult[]) => Promise<T>,
    begin: pg.QueryConfig[] = this.begin(),
    stale?: () => void,
  ): Promise<T> {
    const session = await this.session();
    let open = false;
    let destroy = false;
    try {
      // Open before BEGIN's round trip returns: a statement after BEGIN in it may fail (a
      // deadlock while locking), leaving a transaction to roll back.
      open = true;
      const begun = begin.length > 0 ? await session.pipeline(begin) : [];
      const result = await fn(session, begun);
      open = false;
      // Committed already when the transaction's last write carried its COMMIT (StoreTx.write).
      if (!session.committed) await session.query("COMMIT", "commit");
      return result;
    } catch (e) {
      if (e instanceof StaleRunsError) stale?.();
      // After a failed COMMIT the transaction is over; a broken connection took it with it; a
      // deferred BEGIN never sent opened none.
      if (open && !session.isBroken && !session.unsent) {
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
