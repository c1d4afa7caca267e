/**
 * What a flush step may use (flush.ts implements it): the transaction and its time, the
 * engine's options, the runs this transaction read or started, loading and starting runs,
 * answering callers, and the outcome every step adds to. Steps import this, never the flush:
 * what one step needs of another it is given when the flush builds it.
 */
import type { LoadedItem } from "../../core/run-state.js";
import type { RunState } from "../../core/scheduler.js";
import type { MapItem, Run, RunEvent } from "../../core/types.js";
import type { ItemKey, ReadyNotice, RunRead, StepRow, StoreTx, VisitKey } from "../../store/store.js";
import type { WorkBounds } from "./bounded-work.js";
import type { DispatcherOptions, RunRef, SlotOutcome } from "./dispatcher-options.js";
import type { AttemptRef, Callback, ClaimedTask, Input } from "./inputs.js";

export interface FlushOutcome {
  events: RunEvent[];
  claimed: ClaimedTask[];
  unresolved: (VisitKey & { run?: RunRef })[];
  aborted: [string, string][];
  callbacks: (() => void)[];
  /** The next moment something falls due, to arm the wake-up timer. */
  nextDue: number | null;
  /** The transaction's time. */
  now: number;
  /** Dead engines whose attempts could not all be recovered (their runs were busy elsewhere). */
  unrecovered: string[];
  /** Dead engines this flush took over: how many attempts went back to RETRYING, ms since their last heartbeat (null: unknown, or it closed with them running). */
  tookOver: { engine_id: string; attempts: number; silent_ms: number | null }[];
  /** Agent types of visits this flush made ready and left unclaimed (for external workers). */
  waiting: string[];
  /** What became of each schedule slot this flush handled (engine/writer/schedules.ts), for the metrics. */
  slots: SlotOutcome[];
  /** Agent types this flush held after a provider's 429 (rates.ts), and until when, for the metrics. */
  holds: { agent_type: string; until: number }[];
  /**
   * Work this flush left over for the next (bounded-work.ts): inputs to apply then, and whether
   * ready `workflow`/`map` visits wait unstarted. The dispatcher flushes again on the next turn of
   * the event loop, after what else is queued.
   */
  more: { inputs: Input[]; flush: boolean };
}

export interface FlushContext {
  readonly tx: StoreTx;
  /** The transaction's time: every due time of the flush is judged by it. */
  readonly now: number;
  readonly o: DispatcherOptions;
  /** False in a client, or once the engine stops claiming: nothing is claimed or started. */
  readonly claiming: boolean;
  /**
   * After a transaction whose commit may have happened (its outcome was lost): its inputs are
   * applied again, and the attempts it claimed, never started, are given back (`recoverLost`).
   */
  readonly lost: AttemptRef[] | null;
  /** Runs other engines said have ready visits of these agent types (NOTIFY), by run id. */
  readonly hints: ReadonlyMap<string, ReadonlySet<string>>;
  /** Agent types with ready visits waiting in the database; shared across flushes. */
  readonly backlog: Set<string>;
  /** The runs this transaction read or changed, by run id. */
  readonly states: ReadonlyMap<string, RunState>;
  /** Runs started in this transaction, not written yet (`addRun`). */
  readonly newRuns: readonly Run[];
  /** What to tell other engines is ready (claims.ts `notifyOthers`), written with the rest. */
  notify: ReadyNotice[];
  /** What this flush may still start, write and cancel (bounded-work.ts). */
  readonly work: WorkBounds;
  readonly out: FlushOutcome;
  /** The state of a run, loaded if this transaction has not read it; undefined when it does not exist or another engine holds it. */
  load(runId: string): Promise<RunState | undefined>;
  /** The run of an execution_id (a visit's, a compensation's, or a map item's, whose row it reads too). */
  loadExecution(executionId: string): Promise<RunState | undefined>;
  /** Runs this transaction locked that it has not read yet, in one read. */
  preload(runIds: string[]): Promise<void>;
  /**
   * Item rows of loaded runs this flush has not read yet, in one read, each into its run's
   * `items` with its item workflow's node; the loaded ones, in the order asked.
   */
  loadItems(keys: ItemKey[]): Promise<{ rs: RunState; item: LoadedItem }[]>;
  /** Item rows of loaded runs this flush has in hand (read, or made), kept as `loadItems` keeps them. */
  keepItems(rows: MapItem[]): Promise<{ rs: RunState; item: LoadedItem }[]>;
  /** Writes the item rows changed so far (before a statement reads them: a map's output, its items to cancel). */
  writeItems(): Promise<void>;
  /** The state of a run a load answered (or the one kept in memory when the database still has its revision). */
  take(read: RunRead): Promise<RunState | undefined>;
  /**
   * A run started in this transaction, inserted with the rest. `revision` 0: kept in the run
   * cache after the commit (a run a caller or a schedule started); without it, read again.
   */
  addRun(rs: RunState, revision?: number): void;
  /** Steps to copy from visit `from` to visit `to` once the runs are written (a fork's run is inserted with them). */
  copySteps(from: VisitKey, to: VisitKey): void;
  /** A step to record with the rest of the write; `done` hears the row recorded under its name, once committed. */
  recordStep(row: StepRow, done: Callback<StepRow>): void;
  /** Resolves a caller with the run as this transaction leaves it, once committed. */
  answer(rs: RunState, done: Callback<Run>): void;
  /** Writes what every loaded run changed; `last`: the transaction runs nothing after it. */
  persist(last: boolean): Promise<void>;
}
