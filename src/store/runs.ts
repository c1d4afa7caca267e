/**
 * The run rows a transaction reads and writes: runs, their visits, compensation rows and events,
 * each write raising its run's revision. The facet the dispatcher's every flush goes through.
 */
import type { Compensation, NewEvent, Run, RunEvent, Visit } from "../core/types.js";
import { DatabaseError } from "../errors.js";

/** The identity of a visit row. */
export interface VisitKey {
  run_id: string;
  node_id: string;
  visit: number;
}

/** Revisions of runs held in memory, by run id: a load of one still at its revision reads nothing more. */
export type KnownRevisions = ReadonlyMap<string, number>;

/**
 * A transaction that trusted the caller's `known` revisions (PostgreSQL, to send its BEGIN with
 * its writes) found one of those runs changed or gone, or its estimate of the database's clock
 * off: nothing was written. Tried again at once, it reads the runs and the clock first.
 */
export class StaleRunsError extends DatabaseError {
  constructor(message: string, cause: unknown) {
    super(message, { cause, transient: true });
  }
}

/** What one transaction writes; every list may be empty. */
export interface WriteBatch {
  /** New runs, in their state at the end of the transaction. */
  insertRuns: Run[];
  updateRuns: Run[];
  insertVisits: Visit[];
  updateVisits: Visit[];
  /** Compensation rows, new or changed. */
  compensations: Compensation[];
  events: NewEvent[];
  /** What other engines are told is ready, once the transaction commits (NOTIFY). */
  notify: ReadyNotice[];
}

/**
 * Visits of `agentType` are ready to claim in the runs `runIds` (the listener may lock and read
 * just those), or, when `runIds` is empty, somewhere: look in the database. `*`: anything.
 */
export interface ReadyNotice {
  agentType: string;
  runIds: string[];
}

export const EMPTY_BATCH: Readonly<WriteBatch> = Object.freeze({
  insertRuns: [],
  updateRuns: [],
  insertVisits: [],
  updateVisits: [],
  compensations: [],
  events: [],
  notify: [],
});

/**
 * A run as a transaction reads it: the run, its current visits, its compensation rows, and its
 * revision, which every write of any of them raises (so that a copy held in memory can be
 * checked in one comparison). On SQLite, where one engine holds the file, its dispatcher's own
 * writes of visits and compensation rows do not: the copies it keeps are the ones it wrote (a
 * client's store, beside it, reads a run's visits whatever its revision says).
 */
export interface LoadedRun {
  run: Run;
  revision: number;
  visits: Visit[];
  compensations: Compensation[];
}

/** A load's answer for a run: read, or still at the revision the caller knows (nothing was read). */
export type RunRead = LoadedRun | { run_id: string; unchanged: true };

/** What a write batch did: the events with their seqs, in the batch's order; each changed run's new revision. */
export interface Written {
  events: RunEvent[];
  revisions: Map<string, number>;
}

/** A keyed run that has not ended, as keyedRuns reads it. */
export type KeyedRun = Pick<Run, "run_id" | "status" | "queued" | "created_at">;

/**
 * Runs, visits, compensation rows and events inside a write transaction. Locks are PostgreSQL's
 * (SQLite has one writer); a failure of the database throws DatabaseError and rolls back.
 */
export interface RunsTx {
  /** The transaction's time when the database is the clock (PostgreSQL's, read at BEGIN), else null: use the engine's clock. */
  now(): Promise<number | null>;
  /** Writes the batch at once (PostgreSQL: one statement; `last` sends COMMIT with it), raising each changed run's revision but not new runs'. */
  write(batch: WriteBatch, options?: { last?: boolean }): Promise<Written>;
  /** The run under this idempotency key, or null. No lock. */
  runByIdempotencyKey(key: string): Promise<Run | null>;
  /**
   * The runs of a workflow and key (DESIGN §17) that have not ended, oldest first, at most
   * `limit`; on PostgreSQL under the limits lock, which no other engine's keyed start or end
   * passes until this transaction commits (two engines never both begin a run of one key).
   */
  keyedRuns(workflowId: string, key: string, limit: number): Promise<KeyedRun[]>;
  /** Whether any run is QUEUED (of any key); on PostgreSQL under the limits lock, as keyedRuns. */
  anyQueued(): Promise<boolean>;
  /** The runs under any of these idempotency keys (a map's item keys, a window at a time). No lock. */
  runsByIdempotencyKeys(keys: string[]): Promise<Run[]>;
  /** Adds `runs` to the tree's count unless it would pass `limit` (then null, nothing changes); locks the counter row until commit. */
  raiseTreeRuns(rootRunId: string, runs: number, limit: number): Promise<number | null>;
  /** The usage and budget of these runs, without a lock (another engine's report is seen by the next check); missing runs left out. */
  runBudgets(runIds: string[]): Promise<Pick<Run, "run_id" | "usage" | "budget">[]>;
  /** The run with its current visits and compensation rows, locking its row (waits; `skipLocked`: null if held); `unchanged` at `known`. */
  loadRun(runId: string, options?: { skipLocked?: boolean; known?: number }): Promise<RunRead | null>;
  /** Runs the transaction locked as it began (its `lock`), read in one statement; missing left out, those at `known` `unchanged`. */
  loadRuns(runIds: string[], known?: KnownRevisions): Promise<RunRead[]>;
  /** The runs of the transaction's `tryLock` it locked (no other transaction held them), read as it began. SQLite: none. */
  tryLocked(): Promise<RunRead[]>;
  /** Every visit of the run with the seq of its `node.succeeded` event (the commit order of successes), for compensation. */
  runHistory(runId: string): Promise<{ visit: Visit; successSeq: number | null }[]>;
  /** Runs whose compensation is in progress, oldest first, at most `limit`. No lock. */
  compensatingRuns(limit: number): Promise<string[]>;
  /** The visit row, or null. No lock (its run's lock guards it). */
  getVisit(key: VisitKey): Promise<Visit | null>;
}
