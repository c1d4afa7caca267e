/**
 * The SQLite store: one file, one engine process (DESIGN §8). better-sqlite3 is synchronous;
 * the async interface serialises transactions with a promise chain so nothing else uses the
 * write connection while one is open. Reads go through a second connection and see committed
 * data only (WAL lets them run beside the writer). The engine is the one holding the file's
 * engine lock (engine-lock.ts); clients open the file beside it.
 */

import type Database from "better-sqlite3";
import type { Logger } from "pino";
import type {
  Budget,
  Compensation,
  MapItem,
  NewEvent,
  Run,
  RunEvent,
  RunUsage,
  Schedule,
  Visit,
} from "../../core/types.js";
import { DatabaseError, ValidationError } from "../../errors.js";
import { Serial } from "../serial.js";
import type {
  ChildRun,
  EngineRow,
  RateBucket,
  RunFilter,
  RunRead,
  ScheduleFilter,
  Store,
  StoredWorkflow,
  StoreGauges,
  StoreTx,
  VisitKey,
} from "../store.js";
import { likeLiteral, searchTextOf } from "../store.js";
import { Checkpointer } from "./checkpointer.js";
import {
  assertDirectory,
  configure,
  openConnection,
  type SqliteOptions,
  WAL_CHECKPOINT_BYTES,
  walBytes,
} from "./connection.js";

export type { SqliteOptions } from "./connection.js";

import { EngineLock, engineLockPath } from "./engine-lock.js";
import { PENDING_AND_HEARTBEAT, READY_BY_AGENT_TYPE } from "./gauges.js";
import { RUNS_WAITING_ON_KEY, sqliteInbox } from "./inbox.js";
import { type DbMapItem, LIST_MAP_ITEMS, mapItemFromDb, sqliteMapItems } from "./map-items.js";
import { assertSkeinDatabase, migrate } from "./migrate.js";
import { sqlitePrune } from "./prune.js";
import {
  compensationFromDb,
  compensationToDb,
  type DbCompensation,
  type DbEvent,
  type DbRun,
  type DbVisit,
  eventFromDb,
  runFromDb,
  runToDb,
  visitFromDb,
  visitToDb,
} from "./rows.js";
import { RUNS_BY_ID_PREFIX, RUNS_BY_ID_SUFFIX } from "./run-ids.js";
import { type DbSchedule, listSchedulesSql, SCHEDULE_BY_ID, scheduleFromDb, sqliteSchedules } from "./schedules.js";
import { databaseError } from "./sqlite-errors.js";

type Holder = Pick<EngineRow, "engine_id" | "pid" | "host">;

type Db = Database.Database;

/** Events per multi-row INSERT. */
const EVENT_BATCH = 32;
/** How often, at most, the runs' text queue is indexed (in a transaction; migration 013). */
const INDEX_TEXT_EVERY_MS = 100;
/** The most queued rows one indexing transaction takes: a few milliseconds of tokenizing. */
const INDEX_TEXT_BATCH = 2000;
/** The most runs `current` holds before it starts over (the dispatcher keeps 2,000). */
const MAX_CURRENT_RUNS = 10_000;
/** Visits waiting for a person, oldest first, with their run's trace and workflow; of the runs in a JSON list, unless it is null. */
const REVIEWS = `SELECT v.*, r.trace_id AS run_trace_id, r.workflow_id AS run_workflow_id
  FROM visits v JOIN runs r ON r.run_id = v.run_id
 WHERE v.state = 'IN_REVIEW' AND (@ids IS NULL OR v.run_id IN (SELECT value FROM json_each(@ids)))
 ORDER BY v.started_at, v.run_id`;

function eventParams(e: NewEvent): unknown[] {
  return [e.run_id, e.type, e.node_id, e.visit, e.trace_id, e.at, JSON.stringify(e.data)];
}

export class SqliteStore implements Store {
  readonly exclusive = true;
  private readonly writer: Db;
  private readonly reader: Db;
  private readonly sql: ReturnType<typeof prepare>;
  private readonly tx: StoreTx;
  private readonly serial = new Serial();
  private readonly readStatements = new Map<string, Database.Statement>();
  /** The write connection's `data_version` at its last transaction: it moves when another connection commits. */
  private dataVersion: number | null = null;
  /** Held from registerEngine to close: this store is the file's engine. */
  private engineLock: EngineLock | null = null;
  /** The engine this store serves, while it serves; its row is checked when another connection wrote. */
  private engineId: string | null = null;
  /**
   * Runs whose copies the dispatcher keeps are what the file holds: read or written by its
   * transactions since any other transaction wrote (see `transaction`). Trusted only in the
   * dispatcher's own transactions (`keptRuns`): another caller's `known` may be older.
   */
  private readonly current = new Set<string>();
  private keptRuns = false;
  /** When the text queue was last indexed (real time: a batching interval, not a due time). */
  private textIndexedAt = 0;
  /** Set when another engine took the file over: nothing is written any more. */
  private supersededBy: Holder | null = null;

  private readonly checkpointer: Checkpointer | null;

  private constructor(
    readonly path: string,
    writer: Db,
    reader: Db,
    private readonly logger?: Pick<Logger, "warn">,
  ) {
    this.writer = writer;
    this.reader = reader;
    this.checkpointer = path === ":memory:" ? null : new Checkpointer(path, logger);
    this.sql = prepare(writer);
    this.tx = this.makeTx();
  }

  /**
   * Opens (and creates) the database file and migrates it. The file is checked before anything
   * is set in it: someone else's database is refused unchanged.
   * @throws DatabaseError for a missing directory, a file that is foreign, corrupt or read-only
   */
  static async open(options: SqliteOptions): Promise<SqliteStore> {
    const { path } = options;
    const memory = path === ":memory:";
    const busy = options.busyTimeoutMs;
    if (busy !== undefined && !(Number.isInteger(busy) && busy >= 0 && busy <= 0x7fffffff)) {
      throw new ValidationError(`busyTimeoutMs must be a whole number of milliseconds, 0 or more, got ${String(busy)}`);
    }
    if (!memory) assertDirectory(path);
    const writer = openConnection(path, options);
    try {
      assertSkeinDatabase(writer, path);
      configure(writer, options);
      migrate(writer, path);
    } catch (e) {
      writer.close();
      throw e;
    }
    let reader = writer;
    if (!memory) {
      try {
        reader = openConnection(path, { ...options, readonly: true });
      } catch (e) {
        writer.close();
        throw e;
      }
    }
    return new SqliteStore(path, writer, reader, options.logger);
  }

  /**
   * Takes the file's engine lock (refused at once while another engine process, running or
   * stopped, holds it), then records this engine. Whoever held the file before is gone: every
   * other engine row is stopped, and those still holding attempts are returned for recovery.
   * `staleBefore` is PostgreSQL's: on SQLite the lock, not a heartbeat, says who is alive.
   */
  async registerEngine(engine: EngineRow, _staleBefore: number): Promise<string[]> {
    if (this.path !== ":memory:" && !this.engineLock) {
      const lock = EngineLock.take(this.path);
      if (!lock) throw this.inUse();
      this.engineLock = lock;
    }
    return this.transaction(async () => {
      this.writer.prepare("UPDATE engines SET stopped_at = ? WHERE stopped_at IS NULL").run(engine.started_at);
      this.writer
        .prepare(
          "INSERT INTO engines (engine_id, host, pid, started_at, heartbeat_at, served_types) VALUES (@engine_id, @host, @pid, @started_at, @heartbeat_at, @served_types)",
        )
        .run({ ...engine, served_types: engine.served_types ? JSON.stringify(engine.served_types) : null });
      // Every other engine is gone now; those still holding attempts (killed, or closed before
      // their attempts returned) are the ones to recover. External workers are not engines.
      const holders = this.writer
        .prepare(
          `SELECT engine_id FROM engines WHERE engine_id <> ?
             AND engine_id IN (SELECT holder FROM visits WHERE state = 'RUNNING'
                               UNION SELECT holder FROM compensations WHERE state = 'RUNNING'
                               UNION SELECT v.holder FROM runs r JOIN visits v ON v.run_id = r.run_id
                                 WHERE r.status = 'COMPENSATING' AND v.state = 'CANCELLED' AND v.holder IS NOT NULL)`,
        )
        .all(engine.engine_id) as { engine_id: string }[];
      this.engineId = engine.engine_id;
      return holders.map((h) => h.engine_id);
    });
  }

  /** Why a second engine is refused: the holder as its engine row names it. */
  private inUse(): DatabaseError {
    let holder: Holder | undefined;
    try {
      holder = this.reader
        .prepare(
          "SELECT engine_id, pid, host FROM engines WHERE stopped_at IS NULL ORDER BY started_at DESC, rowid DESC LIMIT 1",
        )
        .get() as Holder | undefined;
    } catch {
      // The refusal matters more than the name.
    }
    const who = holder
      ? `engine ${holder.engine_id} (pid ${holder.pid} on ${holder.host})`
      : "another engine process that is starting";
    return new DatabaseError(
      `database ${this.path} is in use by ${who}, which holds ${engineLockPath(this.path)}; ` +
        "SQLite allows one engine per file, even while that process is stopped or paused: stop it first " +
        "(its lock goes when its process ends), or add runs for it to pick up with createClient (skein start)",
    );
  }

  /**
   * Run inside a write transaction when another connection committed since this one's last:
   * an engine whose row another engine stopped (it took the file over: the lock was deleted,
   * or the file is shared where locks do not work) must never write again.
   */
  private assertOwner(): void {
    if (this.engineId === null) return;
    const row = this.sql.engineStopped.get(this.engineId) as { stopped_at: number | null } | undefined;
    if (row && row.stopped_at === null) return;
    const holder = this.sql.currentEngine.get() as Holder | undefined;
    this.supersededBy = holder ?? { engine_id: "unknown", pid: 0, host: "unknown" };
  }

  private superseded(): DatabaseError {
    const by = this.supersededBy as Holder;
    return new DatabaseError(
      `engine ${this.engineId} no longer owns ${this.path}: engine ${by.engine_id} (pid ${by.pid} on ${by.host}) ` +
        "took it over while this one was stopped or cut off; this engine writes nothing more: close it",
    );
  }

  async heartbeat(engineId: string, now: number, servedTypes?: string[]): Promise<void> {
    await this.transaction(async () => {
      this.writer
        .prepare("UPDATE engines SET heartbeat_at = ?, served_types = coalesce(?, served_types) WHERE engine_id = ?")
        .run(now, servedTypes ? JSON.stringify(servedTypes) : null, engineId);
    });
  }

  async servedTypes(now: number, freshMs: number): Promise<string[]> {
    const rows = this.read(
      "SELECT served_types FROM engines WHERE stopped_at IS NULL AND heartbeat_at >= ? AND served_types IS NOT NULL",
    ).all(now - freshMs) as { served_types: string }[];
    return [...new Set(rows.flatMap((r) => JSON.parse(r.served_types) as string[]))];
  }

  /**
   * Marks the engine stopped. Never fails (closing must end, and release the lock): a row left
   * unstopped (a full disk, a read-only file) is stopped by the next engine, which holds the lock.
   */
  async stopEngine(engineId: string, now: number): Promise<void> {
    // Taken over: the row is the new engine's business.
    if (this.supersededBy) return;
    try {
      await this.transaction(async () => {
        this.writer.prepare("UPDATE engines SET stopped_at = ? WHERE engine_id = ?").run(now, engineId);
      });
    } catch (err) {
      this.logger?.warn({ err }, "skein: could not mark the engine stopped; the next engine on the file will");
    }
    this.engineId = null;
  }

  async putWorkflow(id: string, hash: string, definition: string, now: number) {
    return this.transaction(async () => {
      const same = this.writer.prepare("SELECT version FROM workflows WHERE id = ? AND hash = ?").get(id, hash) as
        | { version: number }
        | undefined;
      if (same) return { version: same.version, created: false };
      const { latest } = this.writer.prepare("SELECT max(version) AS latest FROM workflows WHERE id = ?").get(id) as {
        latest: number | null;
      };
      const version = (latest ?? 0) + 1;
      const stored = JSON.stringify({ ...JSON.parse(definition), version });
      this.writer
        .prepare("INSERT INTO workflows (id, version, hash, definition, created_at) VALUES (?, ?, ?, ?, ?)")
        .run(id, version, hash, stored, now);
      return { version, created: true };
    });
  }

  async getWorkflow(id: string, version?: number): Promise<StoredWorkflow | null> {
    const row =
      version === undefined
        ? this.read("SELECT * FROM workflows WHERE id = ? ORDER BY version DESC LIMIT 1").get(id)
        : this.read("SELECT * FROM workflows WHERE id = ? AND version = ?").get(id, version);
    return (row as StoredWorkflow | undefined) ?? null;
  }

  async latestWorkflowVersion(id: string): Promise<number | null> {
    const row = this.read("SELECT max(version) AS version FROM workflows WHERE id = ?").get(id) as {
      version: number | null;
    };
    return row.version;
  }

  async putWorkflowVersion(id: string, version: number, hash: string, definition: string, now: number) {
    await this.transaction(async () => {
      this.writer
        .prepare("INSERT OR IGNORE INTO workflows (id, version, hash, definition, created_at) VALUES (?, ?, ?, ?, ?)")
        .run(id, version, hash, definition, now);
    });
  }

  async listWorkflows() {
    return this.read(
      "SELECT id, max(version) AS version, max(created_at) AS created_at FROM workflows WHERE instr(id, '/') = 0 GROUP BY id ORDER BY id",
    ).all() as { id: string; version: number; created_at: number }[];
  }

  async getRun(runId: string): Promise<Run | null> {
    const row = this.read("SELECT * FROM runs WHERE run_id = ?").get(runId) as DbRun | undefined;
    return row ? runFromDb(row) : null;
  }

  async readRun(runId: string): Promise<{ run: Run; visits: Visit[]; compensations: Compensation[] } | null> {
    const run = await this.getRun(runId);
    if (!run) return null;
    const visits = await this.listVisits(runId, { currentOnly: true });
    return { run, visits, compensations: await this.listCompensations(runId) };
  }

  async findRunsByIdPart(part: string, limit: number): Promise<{ prefix: Run[]; suffix: Run[] }> {
    const find = (sql: string) => (this.read(sql).all({ part, limit }) as DbRun[]).map(runFromDb);
    return { prefix: find(RUNS_BY_ID_PREFIX), suffix: find(RUNS_BY_ID_SUFFIX) };
  }

  async listRuns(filter: RunFilter): Promise<Run[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.status) {
      where.push("status = ?");
      params.push(filter.status);
    }
    if (filter.workflow_id) {
      where.push("workflow_id = ?");
      params.push(filter.workflow_id);
    } else where.push("instr(workflow_id, '/') = 0"); // not a map's item runs, unless asked for by id
    if (filter.workflow_ids) {
      where.push(
        filter.workflow_ids.length === 0 ? "0" : `workflow_id IN (${filter.workflow_ids.map(() => "?").join(", ")})`,
      );
      params.push(...filter.workflow_ids);
    }
    if (filter.schedule_id !== undefined) {
      where.push("schedule_id = ?");
      params.push(filter.schedule_id);
    }
    if (filter.id_prefix !== undefined) {
      where.push("run_id >= ? AND run_id < ? || char(65535)");
      params.push(filter.id_prefix, filter.id_prefix);
    }
    if (filter.id_contains !== undefined) {
      // LIKE is case-insensitive for ASCII (ids are ASCII); \, % and _ are taken literally.
      where.push("run_id LIKE ? ESCAPE '\\'");
      params.push(`%${likeLiteral(filter.id_contains)}%`);
    }
    if (filter.created_after !== undefined) {
      where.push("created_at >= ?");
      params.push(filter.created_after);
    }
    if (filter.created_before !== undefined) {
      where.push("created_at < ?");
      params.push(filter.created_before);
    }
    if (filter.q !== undefined) {
      // A phrase of the trigram index (migration 012): a double quote in it is written twice.
      // Rows 2 × id (input) and 2 × id + 1 (output) both belong to run_text_ids.id.
      // What is still queued for the index (migration 013: at most INDEX_TEXT_EVERY_MS of commits,
      // or a backlog) is read from the runs themselves, folded to lower case as the index is.
      where.push(`run_id IN (SELECT m.run_id FROM run_text t JOIN run_text_ids m ON m.id = t.rowid / 2
          WHERE run_text MATCH ?
        UNION SELECT m.run_id FROM run_text_queue q JOIN run_text_ids m ON m.id = q.k / 2
          JOIN runs r ON r.run_id = m.run_id
          WHERE skein_contains(CASE q.k % 2 WHEN 0 THEN r.input ELSE r.output END, ?))`);
      const text = searchTextOf(filter.q);
      params.push(`"${text.replaceAll('"', '""')}"`, text.toLowerCase());
    }
    if (filter.before) {
      where.push("(created_at, run_id) < (SELECT created_at, run_id FROM runs WHERE run_id = ?)");
      params.push(filter.before);
    }
    const sql = `SELECT * FROM runs ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
      ORDER BY created_at DESC, run_id DESC LIMIT ?`;
    const rows = this.read(sql).all(...params, filter.limit ?? 100) as DbRun[];
    return rows.map(runFromDb);
  }

  async listChildren(runId: string): Promise<ChildRun[]> {
    const sql = `SELECT json_extract(parent, '$.node_id') AS node_id, json_extract(parent, '$.visit') AS visit,
        json_extract(parent, '$.attempt') AS attempt, run_id, workflow_id, status
      FROM runs WHERE json_extract(parent, '$.run_id') = ? AND parent IS NOT NULL
        AND json_extract(parent, '$.item') IS NULL
      ORDER BY node_id, visit, attempt`;
    return this.read(sql).all(runId) as ChildRun[];
  }

  async listMapItems(key: VisitKey, options: { after: number; limit: number }): Promise<MapItem[]> {
    const rows = this.read(LIST_MAP_ITEMS).all(key.run_id, key.node_id, key.visit, options.after, options.limit);
    return (rows as DbMapItem[]).map(mapItemFromDb);
  }

  async listVisits(runId: string, options: { currentOnly?: boolean } = {}): Promise<Visit[]> {
    const sql = options.currentOnly
      ? "SELECT * FROM visits WHERE run_id = ? AND is_current = 1 ORDER BY created_at, node_id"
      : "SELECT * FROM visits WHERE run_id = ? ORDER BY created_at, node_id, visit";
    return (this.read(sql).all(runId) as DbVisit[]).map(visitFromDb);
  }

  async latestTerminalVisits(runId: string): Promise<Visit[]> {
    const rows = this.read(
      `SELECT * FROM visits v WHERE run_id = ? AND state IN ('SUCCEEDED','FAILED','SKIPPED','CANCELLED')
         AND visit = (SELECT max(visit) FROM visits w WHERE w.run_id = v.run_id AND w.node_id = v.node_id
                      AND w.state IN ('SUCCEEDED','FAILED','SKIPPED','CANCELLED'))`,
    ).all(runId) as DbVisit[];
    return rows.map(visitFromDb);
  }

  async listEvents(runId: string, options: { afterSeq?: number; limit?: number } = {}): Promise<RunEvent[]> {
    const rows = this.read("SELECT * FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?").all(
      runId,
      options.afterSeq ?? 0,
      options.limit ?? 10_000,
    ) as DbEvent[];
    return rows.map(eventFromDb);
  }

  async runsWaitingOnKey(name: string, key: string, limit: number): Promise<string[]> {
    return (this.read(RUNS_WAITING_ON_KEY).all(name, key, limit) as { run_id: string }[]).map((r) => r.run_id);
  }

  async listReviews(runIds?: readonly string[]): Promise<(Visit & { trace_id: string; workflow_id: string })[]> {
    // A null list is every run's reviews (as on PostgreSQL).
    const rows = this.read(REVIEWS).all({ ids: runIds === undefined ? null : JSON.stringify(runIds) }) as (DbVisit & {
      run_trace_id: string;
      run_workflow_id: string;
    })[];
    return rows.map(({ run_trace_id, run_workflow_id, ...row }) => ({
      ...visitFromDb(row),
      trace_id: run_trace_id,
      workflow_id: run_workflow_id,
    }));
  }

  async readGauges(engineId: string, now: number): Promise<StoreGauges> {
    const ready = this.read(READY_BY_AGENT_TYPE).all({ now }) as StoreGauges["ready"];
    const rest = this.read(PENDING_AND_HEARTBEAT).get({ now, engineId }) as Omit<StoreGauges, "ready">;
    return { ready, ...rest };
  }

  onReady(): void {
    // One engine per file: nothing else makes visits ready (clients' runs are found by the sweep).
  }

  async listCompensations(runId: string): Promise<Compensation[]> {
    const rows = this.read("SELECT * FROM compensations WHERE run_id = ? ORDER BY seq").all(runId) as DbCompensation[];
    return rows.map(compensationFromDb);
  }

  async getSchedule(scheduleId: string): Promise<Schedule | null> {
    const row = this.read(SCHEDULE_BY_ID).get(scheduleId) as DbSchedule | undefined;
    return row ? scheduleFromDb(row) : null;
  }

  async listSchedules(filter: ScheduleFilter): Promise<Schedule[]> {
    const { sql, params } = listSchedulesSql(filter);
    return (this.read(sql).all(...params) as DbSchedule[]).map(scheduleFromDb);
  }

  // `lock` and `tryLock` are PostgreSQL's: a SQLite file has one writer.
  transaction<T>(
    fn: (tx: StoreTx) => Promise<T>,
    options?: { lock?: string[]; tryLock?: string[]; known?: ReadonlyMap<string, number> },
  ): Promise<T> {
    return this.serial.run(async () => {
      if (this.supersededBy) throw this.superseded();
      try {
        this.sql.begin.run();
      } catch (e) {
        throw databaseError(e, this.path);
      }
      try {
        const version = this.sql.dataVersion.get() as number;
        if (this.dataVersion !== null && version !== this.dataVersion) {
          // Another connection committed: perhaps an engine that took the file over. (The runs it
          // wrote have a new revision: kept copies of them are not used.)
          this.assertOwner();
          if (this.supersededBy) throw this.superseded();
        }
        // Another connection committed (data_version moved): what it changed is not known, so
        // every run is read again.
        if (this.dataVersion !== version || this.current.size > MAX_CURRENT_RUNS) this.current.clear();
        this.dataVersion = version;
        this.keptRuns = options?.known !== undefined;
        this.indexQueuedText();
        const result = await fn(this.tx);
        this.sql.commit.run();
        // A transaction that is not the dispatcher's (no `known`: a prune, a client's write through
        // this store) may have changed runs the dispatcher keeps: they are read again.
        if (!this.keptRuns) this.current.clear();
        return result;
      } catch (e) {
        if (this.writer.inTransaction) this.sql.rollback.run();
        this.current.clear(); // what this transaction read or wrote is undone
        // The file's own failures (corrupt, read-only) with its path, a full disk as transient (the
        // dispatcher keeps what it was writing and tries again); others as they are.
        throw databaseError(e, this.path);
      }
    });
  }

  /**
   * Indexes the text the triggers queued (migration 013), in the transaction that begins, at
   * most every INDEX_TEXT_EVERY_MS: one FTS5 segment for many runs instead of one per engine
   * transaction, and no commit of its own. Its failure is the transaction's (a corrupt file, a
   * full disk); a rolled-back batch stays queued, and searches read what is queued meanwhile.
   */
  private indexQueuedText(): void {
    const now = Date.now();
    if (now - this.textIndexedAt < INDEX_TEXT_EVERY_MS) return;
    this.textIndexedAt = now;
    this.sql.indexQueuedText.run(INDEX_TEXT_BATCH);
    this.sql.dequeueText.run(INDEX_TEXT_BATCH);
  }

  async close(): Promise<void> {
    await this.serial.idle();
    await this.checkpointer?.close();
    // PASSIVE: never waits for (or blocks) an engine that still has the file open.
    try {
      if (this.path !== ":memory:") this.writer.pragma("wal_checkpoint(PASSIVE)");
    } catch {
      // A full disk: the WAL is checkpointed by the next open instead; the file must still close.
    }
    if (this.reader !== this.writer) this.reader.close();
    this.writer.close();
    // Last: no other engine may write while this one's last transactions were still to come.
    this.engineLock?.release();
    this.engineLock = null;
  }

  /**
   * A statement on the read connection, prepared once per SQL text. A failure of the file
   * itself (corruption found by this read) becomes a DatabaseError naming the path.
   */
  private read(sql: string): { get(...params: unknown[]): unknown; all(...params: unknown[]): unknown[] } {
    const reading = <T>(fn: () => T): T => {
      try {
        return fn();
      } catch (e) {
        throw databaseError(e, this.path);
      }
    };
    const statement = reading(() => {
      let found = this.readStatements.get(sql);
      if (!found) {
        found = this.reader.prepare(sql);
        this.readStatements.set(sql, found);
      }
      return found;
    });
    return {
      get: (...params) => reading(() => statement.get(...params)),
      all: (...params) => reading(() => statement.all(...params)),
    };
  }

  /**
   * Copies the WAL back into the database file, on the checkpoint thread, once enough has been
   * written. Automatic checkpoints are off so that no commit on the hot path pays for one; the
   * engine calls this from its periodic sweep.
   */
  async checkpoint(): Promise<void> {
    if (walBytes(this.path) >= WAL_CHECKPOINT_BYTES) this.checkpointer?.request();
  }

  private makeTx(): StoreTx {
    const s = this.sql;
    const load = (runId: string, known?: number): RunRead | null => {
      // Kept by the caller, and read or written here since anything else last wrote: not even
      // its row is read.
      if (known !== undefined && this.keptRuns && this.current.has(runId)) return { run_id: runId, unchanged: true };
      const row = s.getRun.get(runId) as DbRun | undefined;
      if (!row) return null;
      this.current.add(runId);
      const revision = row.revision ?? 0;
      if (revision === known) return { run_id: runId, unchanged: true };
      return {
        run: runFromDb(row),
        revision,
        visits: (s.currentVisits.all(runId) as DbVisit[]).map(visitFromDb),
        compensations: (s.compensations.all(runId) as DbCompensation[]).map(compensationFromDb),
      };
    };
    // Every write of a run's row, visits or compensation rows raises its revision (LoadedRun);
    // those `write` raised, for it to return.
    const revised = new Map<string, number>();
    const touch = (runIds: Iterable<string>) => {
      for (const runId of new Set(runIds)) {
        const revision = s.touchRun.get(runId) as number | undefined;
        if (revision !== undefined) revised.set(runId, revision);
      }
    };
    const keys = (rows: unknown[]) => rows as VisitKey[];
    const tx: StoreTx = {
      ...sqliteInbox(this.writer),
      ...sqliteMapItems(this.writer),
      ...sqlitePrune(this.writer),
      ...sqliteSchedules(this.writer),
      runByIdempotencyKey: async (key) => {
        const row = s.runByKey.get(key) as DbRun | undefined;
        return row ? runFromDb(row) : null;
      },
      runsByIdempotencyKeys: async (keys) => (s.runsByKeys.all(JSON.stringify(keys)) as DbRun[]).map(runFromDb),
      raiseTreeRuns: async (root, runs, limit) =>
        (s.raiseTreeRuns.get({ root, runs, limit }) as number | undefined) ?? null,
      runBudgets: async (runIds) =>
        (s.runBudgets.all(JSON.stringify(runIds)) as { run_id: string; usage: string; budget: string | null }[]).map(
          (r) => ({
            run_id: r.run_id,
            usage: JSON.parse(r.usage) as RunUsage,
            budget: r.budget === null ? null : (JSON.parse(r.budget) as Budget),
          }),
        ),
      insertRuns: async (runs) => {
        for (const run of runs) {
          s.insertRun.run(runToDb(run));
          this.current.add(run.run_id);
        }
      },
      updateRuns: async (runs) => {
        for (const run of runs) s.updateRun.run(runToDb(run));
        touch(runs.map((r) => r.run_id));
      },
      now: async () => null,
      // One engine per file: nobody to notify.
      write: async (batch) => {
        revised.clear();
        await tx.insertRuns(batch.insertRuns);
        await tx.updateRuns(batch.updateRuns);
        await tx.updateVisits(batch.updateVisits);
        await tx.insertVisits(batch.insertVisits);
        await tx.writeCompensations(batch.compensations);
        const events = await tx.insertEvents(batch.events);
        return { events, revisions: new Map(revised) };
      },
      takeDeadEngines: async () => [],
      lastHeartbeats: async (engineIds) => {
        const rows = this.writer
          .prepare(
            `SELECT engine_id, heartbeat_at FROM engines WHERE engine_id IN (${engineIds.map(() => "?").join(",")})`,
          )
          .all(...engineIds) as { engine_id: string; heartbeat_at: number }[];
        return new Map(rows.map((r) => [r.engine_id, r.heartbeat_at]));
      },
      loadRun: async (runId, options) => load(runId, options?.known),
      loadRuns: async (runIds, known) => runIds.map((id) => load(id, known?.get(id))).filter((r) => r !== null),
      tryLocked: async () => [],
      runHistory: async (runId) => {
        const rows = this.writer
          .prepare(
            `SELECT v.*, (SELECT max(e.seq) FROM events e WHERE e.run_id = v.run_id AND e.type = 'node.succeeded'
                            AND e.node_id = v.node_id AND e.visit = v.visit) AS success_seq
               FROM visits v WHERE v.run_id = ?`,
          )
          .all(runId) as (DbVisit & { success_seq: number | null })[];
        return rows.map(({ success_seq, ...row }) => ({ visit: visitFromDb(row), successSeq: success_seq }));
      },
      writeCompensations: async (rows) => {
        const written = [...rows];
        for (const c of written) s.upsertCompensation.run(compensationToDb(c));
        touch(written.map((c) => c.run_id));
      },
      compensatingRuns: async (limit) => (s.compensatingRuns.all(limit) as { run_id: string }[]).map((r) => r.run_id),
      getVisit: async (key) => {
        const row = s.getVisit.get(key) as DbVisit | undefined;
        return row ? visitFromDb(row) : null;
      },
      insertVisits: async (visits) => {
        const written = [...visits];
        for (const v of written) s.insertVisit.run(visitToDb(v));
        touch(written.map((v) => v.run_id));
      },
      updateVisits: async (visits) => {
        const written = [...visits];
        touch(written.map((v) => v.run_id));
        for (const v of written) {
          // Positional parameters: binding 20 named ones costs more than the rest of the call.
          const row = visitToDb(v);
          const params: unknown[] = MUTABLE_VISIT_COLUMNS.map((c) => row[c]);
          params.push(row.run_id, row.node_id, row.visit);
          s.updateVisit.run(params);
        }
      },
      insertEvents: async (events: NewEvent[]) => {
        // Full batches go in one multi-row INSERT: rowids are assigned in order, so the batch's
        // seqs are the last one and the ones just before it.
        const out: RunEvent[] = [];
        let i = 0;
        for (; i + EVENT_BATCH <= events.length; i += EVENT_BATCH) {
          const batch = events.slice(i, i + EVENT_BATCH);
          const { lastInsertRowid } = s.insertEventBatch.run(batch.flatMap(eventParams));
          const first = Number(lastInsertRowid) - EVENT_BATCH + 1;
          out.push(...batch.map((e, k) => ({ ...e, seq: first + k })));
        }
        for (const e of events.slice(i)) {
          out.push({ ...e, seq: Number(s.insertEvent.run(eventParams(e)).lastInsertRowid) });
        }
        return out;
      },
      claimable: async (agentType, now, limit, skip = []) =>
        keys(
          skip.length === 0
            ? s.claimable.all(agentType, now, limit)
            : s.claimableSkipping.all({ agentType, now, limit, skip: JSON.stringify(skip) }),
        ),
      claimableCompensations: async (agentType, now, limit) =>
        (s.claimableCompensations.all(agentType, now, limit) as { run_id: string }[]).map((r) => r.run_id),
      // One writer: the count alone is exact, there is no lock to take.
      countRunningForLimits: async (agentTypes, except) => {
        const rows = s.runningByType.all({ types: JSON.stringify(agentTypes), except: JSON.stringify(except) }) as {
          agent_type: string;
          n: number;
        }[];
        return new Map(rows.map((r) => [r.agent_type, r.n]));
      },
      countRunningByKey: async (workflowId, nodeId, key, except) => {
        const row = s.runningByKey.get({ workflowId, nodeId, key, except: JSON.stringify(except) }) as { n: number };
        return row.n;
      },
      rateBuckets: async (agentTypes) => {
        const rows = s.rateBuckets.all(JSON.stringify(agentTypes)) as ({ agent_type: string } & RateBucket)[];
        return new Map(rows.map((r) => [r.agent_type, { tokens: r.tokens, updated_at: r.updated_at }]));
      },
      writeRateBuckets: async (buckets) => {
        for (const [type, b] of buckets) s.writeRateBucket.run(type, b.tokens, b.updated_at);
      },
      unresolved: async (now, limit) => keys(s.unresolved.all(now, limit)),
      expiredAttempts: async (now, limit) => keys(s.expiredAttempts.all(now, limit)),
      attemptsHeldBy: async (holders, limit) =>
        holders.length === 0
          ? []
          : keys(
              this.writer
                .prepare(
                  `SELECT run_id, node_id, visit FROM visits WHERE state = 'RUNNING'
                     AND holder IN (${holders.map(() => "?").join(",")}) LIMIT ?`,
                )
                .all(...holders, limit),
            ),
      expiredHolds: async (now, limit) => keys(s.expiredHolds.all({ now, limit })),
      childrenToSettle: async (limit) => (s.childrenToSettle.all(limit) as { run_id: string }[]).map((r) => r.run_id),
      orphanedChildren: async (limit) => (s.orphanedChildren.all(limit) as { run_id: string }[]).map((r) => r.run_id),
      expiredRuns: async (now, limit) => (s.expiredRuns.all(now, limit) as { run_id: string }[]).map((r) => r.run_id),
      nextDue: async (now) => {
        const { t } = s.nextDue.get({ now }) as { t: number | null };
        return t;
      },
    };
    return tx;
  }
}

function prepare(db: Db) {
  const visitColumns = Object.keys(visitRowShape);
  return {
    begin: db.prepare("BEGIN IMMEDIATE"),
    engineStopped: db.prepare("SELECT stopped_at FROM engines WHERE engine_id = ?"),
    currentEngine: db.prepare(
      "SELECT engine_id, pid, host FROM engines WHERE stopped_at IS NULL ORDER BY started_at DESC, rowid DESC LIMIT 1",
    ),
    dataVersion: db.prepare("PRAGMA data_version").pluck(),
    // Two statements of one transaction, so the same LIMIT takes the same keys in both.
    indexQueuedText: db.prepare(
      `INSERT OR REPLACE INTO run_text (rowid, text)
         SELECT q.k, CASE q.k % 2 WHEN 0 THEN r.input ELSE r.output END
         FROM (SELECT k FROM run_text_queue ORDER BY k LIMIT ?) q
         JOIN run_text_ids m ON m.id = q.k / 2 JOIN runs r ON r.run_id = m.run_id`,
    ),
    dequeueText: db.prepare("DELETE FROM run_text_queue WHERE k IN (SELECT k FROM run_text_queue ORDER BY k LIMIT ?)"),
    commit: db.prepare("COMMIT"),
    rollback: db.prepare("ROLLBACK"),
    runByKey: db.prepare("SELECT * FROM runs WHERE idempotency_key = ?"),
    runsByKeys: db.prepare("SELECT * FROM runs WHERE idempotency_key IN (SELECT value FROM json_each(?))"),
    getRun: db.prepare("SELECT * FROM runs WHERE run_id = ?"),
    runBudgets: db.prepare("SELECT run_id, usage, budget FROM runs WHERE run_id IN (SELECT value FROM json_each(?))"),
    touchRun: db.prepare("UPDATE runs SET revision = revision + 1 WHERE run_id = ? RETURNING revision").pluck(),
    insertRun: db.prepare(
      `INSERT INTO runs (${runColumns.join(", ")}) VALUES (${runColumns.map((c) => `@${c}`).join(", ")})`,
    ),
    updateRun: db.prepare(
      `UPDATE runs SET status = @status, output = @output, error = @error, end_cause = @end_cause,
         needs_attention = @needs_attention, updated_at = @updated_at, deadline_at = @deadline_at,
         ended_at = @ended_at, usage = @usage, reserved = @reserved WHERE run_id = @run_id`,
    ),
    currentVisits: db.prepare("SELECT * FROM visits WHERE run_id = ? AND is_current = 1"),
    compensations: db.prepare("SELECT * FROM compensations WHERE run_id = ? ORDER BY seq"),
    upsertCompensation: db.prepare(
      `INSERT INTO compensations (${compensationColumns.join(", ")})
         VALUES (${compensationColumns.map((c) => `@${c}`).join(", ")})
         ON CONFLICT (run_id, seq) DO UPDATE SET ${compensationColumns
           .filter(
             (c) => !["run_id", "seq", "node_id", "visit", "execution_id", "agent_type", "created_at"].includes(c),
           )
           .map((c) => `${c} = excluded.${c}`)
           .join(", ")}`,
    ),
    compensatingRuns: db.prepare("SELECT run_id FROM runs WHERE status = 'COMPENSATING' ORDER BY created_at LIMIT ?"),
    getVisit: db.prepare("SELECT * FROM visits WHERE run_id = @run_id AND node_id = @node_id AND visit = @visit"),
    insertVisit: db.prepare(
      `INSERT INTO visits (${visitColumns.join(", ")}) VALUES (${visitColumns.map((c) => `@${c}`).join(", ")})`,
    ),
    updateVisit: db.prepare(
      `UPDATE visits SET ${MUTABLE_VISIT_COLUMNS.map((c) => `${c} = ?`).join(", ")}
         WHERE run_id = ? AND node_id = ? AND visit = ?`,
    ),
    insertEvent: db.prepare(
      "INSERT INTO events (run_id, type, node_id, visit, trace_id, at, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    insertEventBatch: db.prepare(
      `INSERT INTO events (run_id, type, node_id, visit, trace_id, at, data) VALUES ${Array.from(
        { length: EVENT_BATCH },
        () => "(?, ?, ?, ?, ?, ?, ?)",
      ).join(", ")}`,
    ),
    claimable: db.prepare(
      `SELECT run_id, node_id, visit FROM visits INDEXED BY visits_ready
         WHERE agent_type = ? AND ready_at IS NOT NULL AND ready_at <= ? AND payload IS NOT NULL
         ORDER BY ready_at LIMIT ?`,
    ),
    // The same, leaving out the visits of node concurrency keys found full (@skip: a JSON list of groups).
    claimableSkipping: db.prepare(
      `SELECT run_id, node_id, visit FROM visits v INDEXED BY visits_ready
         WHERE agent_type = @agentType AND ready_at IS NOT NULL AND ready_at <= @now AND payload IS NOT NULL
           AND NOT (v.concurrency_key IS NOT NULL AND EXISTS (
             SELECT 1 FROM json_each(@skip) AS g
              WHERE g.value ->> 'node_id' = v.node_id AND g.value ->> 'key' = v.concurrency_key
                AND g.value ->> 'workflow_id' = (SELECT workflow_id FROM runs WHERE run_id = v.run_id)))
         ORDER BY ready_at LIMIT @limit`,
    ),
    claimableCompensations: db.prepare(
      `SELECT c.run_id FROM compensations c JOIN runs r ON r.run_id = c.run_id
         WHERE c.agent_type = ? AND c.ready_at IS NOT NULL AND c.ready_at <= ? AND r.status = 'COMPENSATING'
         ORDER BY c.ready_at LIMIT ?`,
    ),
    runningByType: db.prepare(
      `SELECT agent_type, count(*) AS n FROM (
         SELECT agent_type FROM visits INDEXED BY visits_running_by_type
          WHERE state = 'RUNNING' AND agent_type IN (SELECT value FROM json_each(@types))
            AND run_id NOT IN (SELECT value FROM json_each(@except))
         UNION ALL
         SELECT agent_type FROM compensations INDEXED BY compensations_running_by_type
          WHERE state = 'RUNNING' AND agent_type IN (SELECT value FROM json_each(@types))
            AND run_id NOT IN (SELECT value FROM json_each(@except))
       ) GROUP BY agent_type`,
    ),
    runningByKey: db.prepare(
      `SELECT count(*) AS n FROM visits v INDEXED BY visits_running_by_key JOIN runs r ON r.run_id = v.run_id
        WHERE v.state = 'RUNNING' AND v.concurrency_key IS NOT NULL AND v.node_id = @nodeId
          AND v.concurrency_key = @key AND r.workflow_id = @workflowId
          AND v.run_id NOT IN (SELECT value FROM json_each(@except))`,
    ),
    rateBuckets: db.prepare(
      "SELECT agent_type, tokens, updated_at FROM rate_buckets WHERE agent_type IN (SELECT value FROM json_each(?))",
    ),
    writeRateBucket: db.prepare(
      `INSERT INTO rate_buckets (agent_type, tokens, updated_at) VALUES (?, ?, ?)
         ON CONFLICT (agent_type) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at`,
    ),
    unresolved: db.prepare(
      `SELECT run_id, node_id, visit FROM visits
         WHERE ready_at IS NOT NULL AND payload IS NULL AND ready_at <= ? ORDER BY ready_at LIMIT ?`,
    ),
    expiredAttempts: db.prepare(
      `SELECT run_id, node_id, visit FROM visits
         WHERE state = 'RUNNING' AND lease_expires_at <= ? ORDER BY lease_expires_at LIMIT ?`,
    ),
    expiredHolds: db.prepare(
      `SELECT run_id, node_id, visit FROM (
         SELECT run_id, node_id, visit, lease_expires_at FROM visits WHERE state = 'IN_REVIEW' AND lease_expires_at <= @now
         UNION ALL
         SELECT run_id, node_id, visit, lease_expires_at FROM visits WHERE state = 'WAITING' AND lease_expires_at <= @now)
       ORDER BY lease_expires_at LIMIT @limit`,
    ),
    childrenToSettle: db.prepare(
      `SELECT c.run_id FROM visits v JOIN runs c ON c.run_id = substr(v.holder, 5)
       WHERE v.holder LIKE 'run:%' AND v.is_current = 1 AND c.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED') LIMIT ?`,
    ),
    // A workflow node's child is run by the attempt holding it (holder run:<child>); a map item's
    // by its map visit while that runs, held by `map`, at the attempt that started the item.
    // The root counts as one: a tree's first row starts at 1 + runs (migration 015).
    raiseTreeRuns: db
      .prepare(
        `INSERT INTO run_trees (root_run_id, runs) SELECT @root, 1 + @runs WHERE 1 + @runs <= @limit
         ON CONFLICT (root_run_id) DO UPDATE SET runs = run_trees.runs + @runs WHERE run_trees.runs + @runs <= @limit
         RETURNING runs`,
      )
      .pluck(),
    orphanedChildren: db.prepare(
      `SELECT c.run_id FROM runs c WHERE c.parent IS NOT NULL AND c.ended_at IS NULL AND NOT EXISTS (
         SELECT 1 FROM visits v WHERE v.run_id = json_extract(c.parent, '$.run_id')
           AND v.node_id = json_extract(c.parent, '$.node_id') AND v.visit = json_extract(c.parent, '$.visit')
           AND v.state = 'RUNNING'
           AND CASE WHEN json_extract(c.parent, '$.item') IS NULL THEN v.holder = 'run:' || c.run_id
                    ELSE v.holder = 'map' AND v.attempt = json_extract(c.parent, '$.attempt') END)
       ORDER BY c.created_at LIMIT ?`,
    ),
    expiredRuns: db.prepare(
      "SELECT run_id FROM runs WHERE ended_at IS NULL AND deadline_at <= ? ORDER BY deadline_at LIMIT ?",
    ),
    nextDue: db.prepare(
      `SELECT min(t) AS t FROM (
         SELECT min(ready_at) AS t FROM visits WHERE ready_at IS NOT NULL AND ready_at > @now
         UNION ALL SELECT min(lease_expires_at) FROM visits WHERE state = 'RUNNING'
         UNION ALL SELECT min(lease_expires_at) FROM visits WHERE state = 'IN_REVIEW'
         UNION ALL SELECT min(lease_expires_at) FROM visits WHERE state = 'WAITING'
         UNION ALL SELECT min(deadline_at) FROM runs WHERE ended_at IS NULL
         UNION ALL SELECT min(ready_at) FROM compensations WHERE ready_at IS NOT NULL AND ready_at > @now
         UNION ALL SELECT min(lease_expires_at) FROM compensations WHERE state = 'RUNNING'
         UNION ALL SELECT min(next_fire_at) FROM schedules INDEXED BY schedules_due
           WHERE paused = 0 AND next_fire_at IS NOT NULL)`,
    ),
  };
}

const runColumns = [
  "run_id",
  "workflow_id",
  "workflow_version",
  "status",
  "input",
  "output",
  "error",
  "end_cause",
  "trace_id",
  "traceparent",
  "idempotency_key",
  "input_hash",
  "needs_attention",
  "created_at",
  "updated_at",
  "deadline_at",
  "ended_at",
  "parent",
  "schedule_id",
  "usage",
  "budget",
  "scope",
  "reserved",
];

const compensationColumns: (keyof DbCompensation)[] = [
  "run_id",
  "seq",
  "node_id",
  "visit",
  "execution_id",
  "agent_type",
  "state",
  "output",
  "error",
  "reason",
  "failures",
  "attempt",
  "interruptions",
  "ready_at",
  "deadline_at",
  "lease_expires_at",
  "holder",
  "created_at",
  "started_at",
  "ended_at",
];

/** The visit columns, in table order (a typed record so a missing column is a compile error). */
const visitRowShape: Record<keyof DbVisit, true> = {
  run_id: true,
  node_id: true,
  visit: true,
  execution_id: true,
  agent_type: true,
  state: true,
  is_current: true,
  loop_activated: true,
  trigger: true,
  payload: true,
  output: true,
  error: true,
  reason: true,
  handled: true,
  fired: true,
  failures: true,
  attempt: true,
  interruptions: true,
  prior_starts: true,
  ready_at: true,
  deadline_at: true,
  lease_expires_at: true,
  holder: true,
  created_at: true,
  started_at: true,
  ended_at: true,
  items: true,
  concurrency_key: true,
};

/** What a visit's UPDATE writes: every column but its identity and creation time. */
const MUTABLE_VISIT_COLUMNS = (Object.keys(visitRowShape) as (keyof DbVisit)[]).filter(
  (c) => !["run_id", "node_id", "visit", "execution_id", "agent_type", "created_at"].includes(c),
);
