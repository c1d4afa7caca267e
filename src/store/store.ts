/**
 * The storage interface, implemented by SQLite and PostgreSQL with the same behaviour. Every
 * method is async so that a networked store can implement it. Reads outside a transaction see
 * committed data only. Writes happen only inside `transaction`, which a store runs one at a time
 * per engine.
 *
 * Concurrency (PostgreSQL, several engines): a run is changed only under a lock on its row,
 * taken when the transaction begins (`lock`: waits; always in run_id order, so two transactions never deadlock) or by
 * `loadRun(id, { skipLocked: true })` and `claimable` (never wait: a run another engine holds is
 * skipped and found again later). SQLite has one writer and ignores the locks.
 */
import type { ClaimsTx } from "./claims.js";
import type { DueTx } from "./due.js";
import type { EngineStore, EnginesTx } from "./engines.js";
import type { InboxTx } from "./inbox.js";
import type { MapTx } from "./map-items.js";
import type { PruneTx } from "./prune.js";
import type { StoreReads } from "./reads.js";
import type { KnownRevisions, ReadyNotice, RunsTx } from "./runs.js";
import type { ScheduleTx } from "./schedules.js";
import type { StepReads, StepsTx } from "./steps.js";
import type { WorkflowStore } from "./workflows.js";

export type { ConcurrencyGroup, RateBucket } from "./claims.js";
export type { EngineRow } from "./engines.js";
export type { InboxTx } from "./inbox.js";
export { type FailedMapItem, type ItemKey, type MapItemUpdate, missingMapItem } from "./map-items.js";
export type { PruneCut, PrunedStatus } from "./prune.js";
export {
  type ChildRun,
  likeLiteral,
  MIN_SEARCH_CHARS,
  type RunFilter,
  type StoreGauges,
  searchTextOf,
} from "./reads.js";
export {
  EMPTY_BATCH,
  type KnownRevisions,
  type LoadedRun,
  type ReadyNotice,
  type RunRead,
  StaleRunsError,
  type VisitKey,
  type WriteBatch,
  type Written,
} from "./runs.js";
export type { ScheduleFilter } from "./schedules.js";
export type { StepReads, StepRow, StepsTx } from "./steps.js";
export type { StoredWorkflow } from "./workflows.js";
export type { ClaimsTx, DueTx, EngineStore, EnginesTx, MapTx, PruneTx, RunsTx, ScheduleTx, StoreReads, WorkflowStore };

/** A database as the engine uses it: its facets outside transactions, and `transaction` for every write. */
export interface Store extends EngineStore, WorkflowStore, StoreReads, StepReads {
  /** True when this engine is the database's only writer (SQLite), so run state read in one transaction stays true in the next. */
  readonly exclusive: boolean;
  /** Housekeeping from the engine's periodic sweep (SQLite: a WAL checkpoint once it grew); never throws for a busy file. */
  checkpoint(): Promise<void>;
  /** Calls `listener` when another engine or client made visits ready or started runs (PostgreSQL's LISTEN/NOTIFY; SQLite: never). */
  onReady(listener: (notice: ReadyNotice) => void): void;
  /** Runs `fn` in one write transaction (SQLite: BEGIN IMMEDIATE), taking `options`' locks as it begins; rolls back if it throws. */
  transaction<T>(fn: (tx: StoreTx) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /** Waits for the transactions asked for, then closes every connection. Idempotent. */
  close(): Promise<void>;
}

/** What a transaction locks and reads as it begins (`Store.transaction`); SQLite has one writer and takes no lock. */
export interface TransactionOptions {
  /** Runs locked as it begins, in run_id order (waits; two transactions never deadlock), and read in the same round trip (`loadRuns`). */
  lock?: string[];
  /** Runs locked then too, but only if no other transaction holds them (never waits); `tx.tryLocked()` reads those it locked. */
  tryLock?: string[];
  /** The revisions of runs the caller holds in memory: a locked run still at its revision is not read again (`RunRead`). */
  known?: KnownRevisions;
}

/** Operations valid inside a write transaction: every facet's. */
export interface StoreTx extends RunsTx, ClaimsTx, DueTx, EnginesTx, InboxTx, MapTx, PruneTx, ScheduleTx, StepsTx {}
