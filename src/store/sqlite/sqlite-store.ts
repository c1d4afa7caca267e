/**
 * The SQLite store: one file, one engine process (DESIGN §8). better-sqlite3 is synchronous;
 * the async interface serialises transactions with a promise chain so nothing else uses the
 * write connection while one is open. Reads go through a second connection and see committed
 * data only (WAL lets them run beside the writer). The engine is the one holding the file's
 * engine lock (engine-lock.ts); clients open the file beside it. The tables' statements live in
 * their facets (runs.ts, claims.ts, due.ts, ...); this file owns the connections, the
 * transaction and the file's ownership.
 */

import type Database from "better-sqlite3";
import type { Logger } from "pino";
import { DatabaseError, ValidationError } from "../../errors.js";
import type { EngineRow } from "../engines.js";
import type { StoreReads } from "../reads.js";
import { Serial } from "../serial.js";
import type { StepReads } from "../steps.js";
import type { Store, StoreTx, TransactionOptions } from "../store.js";
import type { WorkflowStore } from "../workflows.js";
import { Checkpointer } from "./checkpointer.js";
import { sqliteClaims } from "./claims.js";
import {
  assertDirectory,
  configure,
  openConnection,
  type SqliteOptions,
  WAL_CHECKPOINT_BYTES,
  walBytes,
} from "./connection.js";
import { sqliteDue } from "./due.js";
import { EngineLock, engineLockPath } from "./engine-lock.js";
import { CURRENT_ENGINE, type EngineRowStatements, engineRows, type Holder, sqliteEngines } from "./engines.js";
import { sqliteInbox } from "./inbox.js";
import { sqliteMapItems } from "./map-items.js";
import { assertSkeinDatabase, migrate } from "./migrate.js";
import { sqlitePrune } from "./prune.js";
import { type Read, readStatements, sqliteReads } from "./reads.js";
import { type KeptRuns, sqliteRuns } from "./runs.js";
import { sqliteSchedules } from "./schedules.js";
import { databaseError } from "./sqlite-errors.js";
import { sqliteStepReads, sqliteSteps } from "./steps.js";
import { sqliteWorkflows } from "./workflows.js";

export type { SqliteOptions } from "./connection.js";

type Db = Database.Database;

/** How often, at most, the runs' text queue is indexed (in a transaction; migration 013). */
const INDEX_TEXT_EVERY_MS = 100;
/** The most queued rows one indexing transaction takes: a few milliseconds of tokenizing. */
const INDEX_TEXT_BATCH = 2000;
/** The most runs `kept` holds before it starts over (the dispatcher keeps 2,000). */
const MAX_CURRENT_RUNS = 10_000;

export class SqliteStore implements Store {
  readonly exclusive = true;
  private readonly sql: ReturnType<typeof prepare>;
  private readonly engines: EngineRowStatements;
  private readonly tx: StoreTx;
  private readonly serial = new Serial();
  private readonly read: Read;
  private readonly reads: StoreReads;
  private readonly steps: StepReads;
  private readonly workflows: WorkflowStore;
  /** The write connection's `data_version` at its last transaction: it moves when another connection commits. */
  private dataVersion: number | null = null;
  /** Held from registerEngine to close: this store is the file's engine. */
  private engineLock: EngineLock | null = null;
  /** The engine this store serves, while it serves; its row is checked when another connection wrote. */
  private engineId: string | null = null;
  /** Runs whose kept copies are what the file holds (runs.ts); cleared whenever that may no longer be so. */
  private readonly kept: KeptRuns = { runs: new Set(), trusted: false, engine: false };
  /** When the text queue was last indexed (real time: a batching interval, not a due time). */
  private textIndexedAt = 0;
  /** Set when another engine took the file over: nothing is written any more. */
  private supersededBy: Holder | null = null;

  private readonly checkpointer: Checkpointer | null;

  private constructor(
    readonly path: string,
    private readonly writer: Db,
    private readonly reader: Db,
    private readonly logger?: Pick<Logger, "warn">,
  ) {
    this.checkpointer = path === ":memory:" ? null : new Checkpointer(path, logger);
    this.sql = prepare(writer);
    this.engines = engineRows(writer);
    this.read = readStatements(this.reader, path);
    this.reads = sqliteReads(this.read);
    this.workflows = sqliteWorkflows(writer, this.read, (fn) => this.transaction(async () => fn()));
    this.tx = {
      ...sqliteRuns(writer, this.kept),
      ...sqliteClaims(writer),
      ...sqliteDue(writer),
      ...sqliteEngines(writer),
      ...sqliteInbox(writer),
      ...sqliteMapItems(writer),
      ...sqlitePrune(writer),
      ...sqliteSchedules(writer),
      ...sqliteSteps(writer),
    };
    this.steps = sqliteStepReads(this.read);
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
    this.kept.engine = true;
    return this.transaction(async () => {
      this.engines.stopAll.run(engine.started_at);
      this.engines.insert.run({
        ...engine,
        served_types: engine.served_types ? JSON.stringify(engine.served_types) : null,
      });
      const holders = this.engines.holdingAttempts.all(engine.engine_id) as { engine_id: string }[];
      this.engineId = engine.engine_id;
      return holders.map((h) => h.engine_id);
    });
  }

  /** Why a second engine is refused: the holder as its engine row names it. */
  private inUse(): DatabaseError {
    let holder: Holder | undefined;
    try {
      holder = this.reader.prepare(CURRENT_ENGINE).get() as Holder | undefined;
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
    const row = this.engines.stopped.get(this.engineId) as { stopped_at: number | null } | undefined;
    if (row && row.stopped_at === null) return;
    const holder = this.engines.current.get() as Holder | undefined;
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
      this.engines.heartbeat.run(now, servedTypes ? JSON.stringify(servedTypes) : null, engineId);
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
        this.engines.stop.run(now, engineId);
      });
    } catch (err) {
      this.logger?.warn({ err }, "skein: could not mark the engine stopped; the next engine on the file will");
    }
    this.engineId = null;
  }

  onReady(): void {
    // One engine per file: nothing else makes visits ready (clients' runs are found by the sweep).
  }

  // `lock` and `tryLock` are PostgreSQL's: a SQLite file has one writer.
  transaction<T>(fn: (tx: StoreTx) => Promise<T>, options?: TransactionOptions): Promise<T> {
    return this.serial.run(async () => {
      if (this.supersededBy) throw this.superseded();
      try {
        this.sql.begin.run();
      } catch (e) {
        throw databaseError(e, this.path);
      }
      const kept = this.kept;
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
        if (this.dataVersion !== version || kept.runs.size > MAX_CURRENT_RUNS) kept.runs.clear();
        this.dataVersion = version;
        kept.trusted = options?.known !== undefined;
        this.indexQueuedText();
        const result = await fn(this.tx);
        this.sql.commit.run();
        // A transaction that is not the dispatcher's (no `known`: a prune, a client's write through
        // this store) may have changed runs the dispatcher keeps: they are read again.
        if (!kept.trusted) kept.runs.clear();
        return result;
      } catch (e) {
        if (this.writer.inTransaction) this.sql.rollback.run();
        kept.runs.clear(); // what this transaction read or wrote is undone
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
   * Copies the WAL back into the database file, on the checkpoint thread, once enough has been
   * written. Automatic checkpoints are off so that no commit on the hot path pays for one; the
   * engine calls this from its periodic sweep.
   */
  async checkpoint(): Promise<void> {
    if (walBytes(this.path) >= WAL_CHECKPOINT_BYTES) this.checkpointer?.request();
  }
}

/** The transaction's own statements (the tables' are their facets'). */
function prepare(db: Db) {
  return {
    begin: db.prepare("BEGIN IMMEDIATE"),
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
  };
}
