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
import type { RunStatus } from "../core/states.js";
import type {
  Compensation,
  InboxEvent,
  Json,
  MapItem,
  MapItemState,
  NewEvent,
  Run,
  RunEvent,
  Schedule,
  Visit,
  VisitError,
} from "../core/types.js";

export interface StoredWorkflow {
  id: string;
  version: number;
  hash: string;
  /** The definition as registered (JSON text), with its version. */
  definition: string;
  created_at: number;
}

export interface EngineRow {
  engine_id: string;
  host: string;
  pid: number;
  started_at: number;
  heartbeat_at: number;
  /** The agent types it serves (engine/served-types.ts): written at registration and with every heartbeat. Default: none known. */
  served_types?: string[];
}

/** Which runs `listRuns` gives; a map's item runs only when `workflow_id` names their item workflow. */
export interface RunFilter {
  status?: RunStatus;
  workflow_id?: string;
  /** Only runs of these workflows (none when empty): a token's workflow scope, resolved to ids. */
  workflow_ids?: readonly string[];
  limit?: number;
  /** Return runs created before this run (the `run_id` of the last run of the previous page). */
  before?: string;
  /** Only runs this schedule started (DESIGN §11.5). */
  schedule_id?: string;
  /** Only runs whose id starts with this (a range of the primary key). */
  id_prefix?: string;
  /**
   * Only runs whose id contains this, in any case (`%` and `_` are taken literally). Ids are UUIDv7,
   * whose start is a timestamp that every recent run shares: what a person copies is the tail.
   * No index: without a status, workflow or schedule, listRuns already reads every run (no index
   * orders runs by creation alone: a scan and a top-N sort on both stores), so this adds a test of
   * 36 characters per row read and shrinks the sort; a trigram index would cost every run's insert.
   */
  id_contains?: string;
  /** Only runs created at or after this time (ms since the epoch). */
  created_after?: number;
  /** Only runs created before this time (ms since the epoch). */
  created_before?: number;
  /**
   * Only runs whose input or output contains this text, case-insensitively: a JSON string's
   * characters as the user reads them (a `"` finds a `"` in a value). At least 3 characters
   * ({@link MIN_SEARCH_CHARS}: the index is of trigrams). Migration 012's index. Never a map's item
   * runs (not indexed: thousands per map), even when `workflow_id` names their item workflow.
   */
  q?: string;
}

/** `text` inside a LIKE pattern (escape character `\`): its `\`, `%` and `_` match themselves. */
export function likeLiteral(text: string): string {
  return text.replace(/[\\%_]/g, "\\$&");
}

/** The shortest `RunFilter.q` the trigram indexes can answer. */
export const MIN_SEARCH_CHARS = 3;

/**
 * `q` as it appears inside the JSON text of a run's input or output: the escapes JSON.stringify
 * writes (quotes, backslashes, control characters), without the surrounding quotes.
 */
export function searchTextOf(q: string): string {
  return JSON.stringify(q).slice(1, -1);
}

/** Which schedules `listSchedules` gives. */
export interface ScheduleFilter {
  workflow_id?: string;
  /** Only schedules of these workflows (none when empty): a token's workflow scope. */
  workflow_ids?: readonly string[];
}

/** A child run as its parent lists it. */
export interface ChildRun {
  node_id: string;
  visit: number;
  attempt: number;
  run_id: string;
  workflow_id: string;
  status: RunStatus;
}

/**
 * The database's side of the metrics (DESIGN §9): queue depths and what waits, across every
 * engine. Ages are in ms at the database's time (PostgreSQL's clock unless the store was given
 * one; SQLite: the `now` passed), the time its due times are written in.
 */
export interface StoreGauges {
  /** Per agent type with any: visits ready (payload resolved) that nobody claimed, and the oldest one's age. */
  ready: { agent_type: string; visits: number; oldest_age_ms: number }[];
  /** Visits IN_REVIEW (waiting for a person). */
  pending_reviews: number;
  /** Visits WAITING (a sleep, an event). */
  pending_waits: number;
  /** Since the engine's last heartbeat as its row holds it; null when it has no row. */
  heartbeat_age_ms: number | null;
}

/** The identity of a visit row. */
export interface VisitKey {
  run_id: string;
  node_id: string;
  visit: number;
}

export interface Store {
  /**
   * True when this engine is the database's only writer (SQLite: one engine per file), so run
   * state read in one transaction is still true in the next and may be kept in memory.
   */
  readonly exclusive: boolean;

  /**
   * Records this engine and makes it the database's engine. SQLite: throws DatabaseError when
   * another engine process holds the file's engine lock (even stopped), naming it. Returns the ids of engines known to be dead (their
   * in-process attempts are to be recovered).
   */
  registerEngine(engine: EngineRow, staleBefore: number): Promise<string[]>;
  /** Renews the engine's heartbeat and, when given, what it serves now (`EngineRow.served_types`). */
  heartbeat(engineId: string, now: number, servedTypes?: string[]): Promise<void>;
  /**
   * Every agent type a live engine serves: the union of `served_types` of the engines not stopped
   * whose heartbeat is at most `freshMs` old at `now` (PostgreSQL: the database's time, unless the
   * store was given a clock). Outside a transaction; reads only.
   */
  servedTypes(now: number, freshMs: number): Promise<string[]>;
  /**
   * Marks the engine stopped as it closes. Does not throw for a failure of the database
   * (closing must end): a row left as it was is taken as a dead engine's by the next one.
   */
  stopEngine(engineId: string, now: number): Promise<void>;

  /** Stores a definition under the next version unless one with the same hash exists. Idempotent. */
  putWorkflow(
    id: string,
    hash: string,
    definition: string,
    now: number,
  ): Promise<{ version: number; created: boolean }>;
  /**
   * Stores a definition under a version the caller gives, unless that version exists (a map
   * node's item workflow, at its parent's version: runs refer to their workflow row).
   */
  putWorkflowVersion(id: string, version: number, hash: string, definition: string, now: number): Promise<void>;
  /** The given version, or the latest. */
  getWorkflow(id: string, version?: number): Promise<StoredWorkflow | null>;
  /** The latest version's number, without its definition (a run's start, whose definition is cached by version). */
  latestWorkflowVersion(id: string): Promise<number | null>;
  /** Workflows by id with their latest version; not map nodes' item workflows (their ids hold a `/`). */
  listWorkflows(): Promise<{ id: string; version: number; created_at: number }[]>;

  getRun(runId: string): Promise<Run | null>;
  /** The run with its current visits and its compensation rows (PostgreSQL: one statement). */
  readRun(runId: string): Promise<Omit<LoadedRun, "revision"> | null>;
  listRuns(filter: RunFilter): Promise<Run[]>;
  /**
   * Runs whose id starts with `part` (a range of the primary key) or ends with it (a scan of the
   * primary key: ids are UUIDv7, their random part is the tail), each at most `limit`, by id;
   * item runs of maps included. Outside a transaction; reads only.
   */
  findRunsByIdPart(part: string, limit: number): Promise<{ prefix: Run[]; suffix: Run[] }>;
  /**
   * The child runs of a run's `workflow` nodes (DESIGN §11.1), by node, visit and attempt; not
   * its map items' runs (`parent.item` set), which listMapItems reads a page at a time.
   */
  listChildren(runId: string): Promise<ChildRun[]>;
  /** A `map` visit's items by index, from `after` (exclusive; -1: from the start), at most `limit`. */
  listMapItems(key: VisitKey, options: { after: number; limit: number }): Promise<MapItem[]>;
  /** The run's visits in document-independent order (node_id, visit); current ones only when asked. */
  listVisits(runId: string, options?: { currentOnly?: boolean }): Promise<Visit[]>;
  /** The run's latest terminal visit of each node: what templates read as `nodes.<id>`. */
  latestTerminalVisits(runId: string): Promise<Visit[]>;
  listEvents(runId: string, options?: { afterSeq?: number; limit?: number }): Promise<RunEvent[]>;
  /** Runs with a WAITING `wait_event` visit on (event name, key), at most `limit` (DESIGN §11.3). */
  runsWaitingOnKey(name: string, key: string, limit: number): Promise<string[]>;
  /** Visits waiting for a person (IN_REVIEW), oldest first; only those of `runIds` when given. */
  listReviews(runIds?: readonly string[]): Promise<(Visit & { trace_id: string; workflow_id: string })[]>;
  /**
   * What the metrics gauges show (DESIGN §9), read outside a transaction: two statements, each
   * answered by an index (ready visits, reviews, waits, the engine's row). Idempotent; throws
   * DatabaseError when the database does not answer.
   */
  readGauges(engineId: string, now: number): Promise<StoreGauges>;
  /** The run's compensation rows, by seq. */
  listCompensations(runId: string): Promise<Compensation[]>;
  /** A schedule as committed, or null. Outside a transaction; reads only. */
  getSchedule(scheduleId: string): Promise<Schedule | null>;
  /** Schedules by schedule_id, as committed. Outside a transaction; reads only. */
  listSchedules(filter: ScheduleFilter): Promise<Schedule[]>;

  /** Housekeeping the engine calls from its periodic sweep (SQLite: a WAL checkpoint). */
  checkpoint(): Promise<void>;

  /**
   * Calls `listener` when another engine or client made visits of an agent type ready (in the
   * runs `runIds`, or, when empty, anywhere: look in the database), or started runs (agent type
   * `*`): PostgreSQL's LISTEN/NOTIFY. SQLite: never (one engine).
   */
  onReady(listener: (notice: ReadyNotice) => void): void;

  /**
   * Runs `fn` in one write transaction (SQLite: BEGIN IMMEDIATE); rolls back if it throws.
   * `lock`: runs whose rows are locked as the transaction begins, in run_id order (PostgreSQL,
   * which also reads them in the same round trip for `loadRuns`; SQLite has one writer).
   * `tryLock`: runs locked then too, but only if no other transaction holds them (never waits);
   * `tx.tryLocked()` reads those it locked.
   * `known`: the revisions of runs the caller holds in memory; a locked run still at that
   * revision is not read again (`RunRead`).
   */
  transaction<T>(fn: (tx: StoreTx) => Promise<T>, options?: TransactionOptions): Promise<T>;
  close(): Promise<void>;
}

/** What a transaction locks and reads as it begins (`Store.transaction`). */
export interface TransactionOptions {
  lock?: string[];
  tryLock?: string[];
  known?: KnownRevisions;
}

/** Revisions of runs held in memory, by run id: a load of one still at its revision reads nothing more. */
export type KnownRevisions = ReadonlyMap<string, number>;

/** The visits a node's `concurrency` limits together: a node of a workflow (any version), one key value. */
export interface ConcurrencyGroup {
  workflow_id: string;
  node_id: string;
  key: string;
}

/** A rate limit's token bucket: tokens left at `updated_at` (epoch ms), refilled with time from there. */
export interface RateBucket {
  tokens: number;
  updated_at: number;
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
 * checked in one comparison).
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

/** Events sent to runs and published by key (DESIGN §11.2–11.3), inside a write transaction. */
export interface InboxTx {
  /**
   * The run's oldest events of this name no wait_event took yet, oldest first, at most `limit`
   * (by the index on (run_id, name): the inbox is never loaded whole, DESIGN §13.1).
   */
  waitingEvents(runId: string, name: string, limit: number): Promise<InboxEvent[]>;
  /** How many events the run's inbox holds (no wait_event took them yet) and their payloads' bytes. */
  inboxSize(runId: string): Promise<{ events: number; bytes: number }>;
  /** Events published by key (name, key) at `since` or later, oldest first. */
  keyedEvents(name: string, key: string, since: number): Promise<InboxEvent[]>;
  /**
   * The event stored under this idempotency key: sent to the run `scope.run_id`, or (run_id
   * null) published by key (`scope.name`, `scope.key`).
   */
  inboxByIdempotencyKey(
    scope: { run_id: string } | { run_id: null; name: string; key: string },
    idempotencyKey: string,
  ): Promise<InboxEvent | null>;
  /** Inserts new rows and records deliveries (by event_id). */
  writeInbox(rows: InboxEvent[]): Promise<void>;
  /** Deletes events by key published before `before` (no buffer keeps them longer). */
  pruneKeyed(before: number): Promise<void>;
}

/** A change to one item row of a `map` visit, written at once (later reads in the transaction see it). */
export interface MapItemUpdate {
  key: VisitKey;
  index: number;
  state: MapItemState;
  child_run_id?: string | null;
  output?: Json | null;
  error?: VisitError | null;
  started_at?: number | null;
  ended_at?: number | null;
}

/** An item of a map visit that did not succeed, as `failedMapItems` reads it. */
export interface FailedMapItem {
  index: number;
  child_run_id: string | null;
  error: VisitError | null;
}

/** Thrown by `updateMapItems` for an item row that does not exist: the engine's mistake, never the user's. */
export function missingMapItem(u: Pick<MapItemUpdate, "key" | "index">): Error {
  return new Error(
    `skein: map visit ${u.key.run_id}/${u.key.node_id}#${u.key.visit} has no item ${u.index} to update; ` +
      "items are inserted (insertMapItems) before they change",
  );
}

/** The item rows of `map` visits (DESIGN §11.1), inside a write transaction. */
export interface MapTx {
  /**
   * Inserts the visit's items, PENDING, index = position. When an earlier visit of the node
   * (`visit - 1`) did not succeed (a redrive), its SUCCEEDED items whose index and value are the
   * same are carried over as SUCCEEDED with their child run, output and times. Returns how many
   * rows it inserted and how many were carried over. `offset`: the index of `items[0]` (a long
   * list is written a chunk per transaction, engine/writer/kinds/maps.ts).
   */
  insertMapItems(
    key: VisitKey,
    items: Json[],
    now: number,
    offset?: number,
  ): Promise<{ total: number; carried: number }>;
  /** PENDING items with index >= `from`, by index, at most `limit`. */
  pendingMapItems(key: VisitKey, from: number, limit: number): Promise<{ index: number; item: Json }[]>;
  /**
   * Writes these changes (fields left out keep their values; several of one item apply in order).
   * @throws Error (missingMapItem) when an item has no row; the others may be written, so let the transaction roll back.
   */
  updateMapItems(updates: MapItemUpdate[]): Promise<void>;
  /** The child run of the visit's SUCCEEDED item that ended last (the next to undo), or null. */
  newestSucceededMapItem(key: VisitKey): Promise<string | null>;
  /**
   * The visit's FAILED and CANCELLED items by index, at most `limit`, each with its run (null when
   * it failed before one started) and error: what a map that succeeded within its tolerated
   * failures records (`failed_items`).
   */
  failedMapItems(key: VisitKey, limit: number): Promise<FailedMapItem[]>;
  /** The child runs of RUNNING items of the visit, at most `limit`. */
  runningMapItems(key: VisitKey, limit: number): Promise<string[]>;
  /**
   * Map visits still held (RUNNING, or CANCELLED with items running), at most `limit`: their
   * continuation was in the memory of the engine that filled them a chunk at a time.
   */
  heldMaps(limit: number): Promise<string[]>;
  /**
   * The outputs of the visit's items in index order as one JSON array text (null for an item that
   * did not succeed), assembled by the database; or, when the text would pass `maxBytes`, its size.
   */
  mapOutput(key: VisitKey, maxBytes: number): Promise<{ text: string } | { tooLarge: number }>;
  /** Item child runs that ended while their item is still RUNNING: their end is owed to the map. */
  mapItemsToSettle(limit: number): Promise<string[]>;
}

/** Schedules (DESIGN §11.5), inside a write transaction. */
export interface ScheduleTx {
  /**
   * The schedule, its row locked until the transaction ends (PostgreSQL: waits for another
   * transaction that holds it, such as a sweep firing it), or null when there is none.
   */
  lockSchedule(scheduleId: string): Promise<Schedule | null>;
  /**
   * Inserts the schedule or replaces every column of its row (created_at included: the caller
   * keeps it). Idempotent. Returns true when it inserted a new row.
   */
  writeSchedule(schedule: Schedule): Promise<boolean>;
  /** Deletes the schedule; its runs keep their schedule_id. Returns false when there was none. */
  deleteSchedule(scheduleId: string): Promise<boolean>;
  /**
   * Unpaused schedules whose next_fire_at is `now` or earlier, earliest first, at most `limit`;
   * locked until the transaction ends (PostgreSQL: SKIP LOCKED, so a schedule another engine is
   * firing is left to it). Read through the `schedules_due` index: the cost is the due ones.
   */
  dueSchedules(now: number, limit: number): Promise<Schedule[]>;
  /** The runs this schedule started that have not ended (ended_at NULL), oldest first, at most `limit`. */
  unfinishedScheduleRuns(scheduleId: string, limit: number): Promise<string[]>;
  /** Records what a sweep did with a due schedule: its next slot, the latest slot handled and run started. */
  advanceSchedule(
    scheduleId: string,
    to: Pick<Schedule, "next_fire_at" | "last_slot_at" | "last_run_id" | "updated_at">,
  ): Promise<void>;
}

/** The finished statuses a run is pruned in (DESIGN §8), each with its own cut. */
export type PrunedStatus = "SUCCEEDED" | "FAILED" | "CANCELLED";

/**
 * Which runs `pruneRuns` deletes: top-level runs of a listed status that ended before its time
 * (epoch ms); a status left out is kept. Their child runs (of `workflow` nodes and map items,
 * recursively) go with them whatever their own age, never alone.
 */
export type PruneCut = Partial<Record<PrunedStatus, number>>;

/** Deleting finished runs (retention, `skein prune`), inside a write transaction. */
export interface PruneTx {
  /**
   * Deletes at most about `limit` runs: whole trees (a run and its descendants), oldest ended
   * first, at least one tree; with each run its visits, events, compensation rows, inbox rows
   * and map items. A tree with a descendant not finished (or, on PostgreSQL, a run another
   * transaction holds) is left for a later batch. Frees the runs' idempotency keys. Returns how
   * many runs it deleted (0: nothing more to prune now).
   */
  pruneRuns(cut: PruneCut, limit: number): Promise<number>;
  /** How many runs `pruneRuns` would delete in all, batch after batch (it deletes nothing). */
  countPrunable(cut: PruneCut): Promise<number>;
}

/** Operations valid inside a write transaction. */
export interface StoreTx extends InboxTx, MapTx, PruneTx, ScheduleTx {
  /**
   * The transaction's time in epoch ms when the database is the clock (PostgreSQL's `now()`,
   * DESIGN §7), or null: use the engine's clock (SQLite, and tests with a manual clock).
   */
  now(): Promise<number | null>;
  /**
   * Everything a flush writes, at once (PostgreSQL: one statement, one round trip). Raises the
   * revision of every run whose row, visits or compensation rows it changes (not of runs it
   * inserts: they start at 0). `last`: nothing follows in this transaction, so PostgreSQL sends
   * the COMMIT with it (a round trip less); the transaction can run no other statement.
   */
  write(batch: WriteBatch, options?: { last?: boolean }): Promise<Written>;
  /**
   * Engines (other than `self`) that are dead, marked stopped by this call: exactly one engine
   * takes each dead engine and recovers its attempts. Dead: the heartbeat is older than
   * `staleBefore`; on PostgreSQL also an engine whose liveness lock stayed free for a grace
   * (seen free by an earlier call; `nextDue` then asks for the call that confirms it).
   * Returns those still holding attempts.
   */
  takeDeadEngines(self: string, staleBefore: number): Promise<string[]>;
  /**
   * The last heartbeat (ms) of each of these engines' rows, for the takeover's log line; an
   * engine without a row is left out. 0: it stopped with attempts still running (PostgreSQL).
   */
  lastHeartbeats(engineIds: string[]): Promise<Map<string, number>>;
  runByIdempotencyKey(key: string): Promise<Run | null>;
  /** The runs under any of these idempotency keys (a map's item keys, looked up a window at a time). */
  runsByIdempotencyKeys(keys: string[]): Promise<Run[]>;
  /**
   * Adds `runs` to the count of runs in the tree of `rootRunId` (the root counts as one; a tree
   * without a row holds the root alone), unless the count would pass `limit` (DESIGN §13.1,
   * maxRunsPerTree): then nothing changes. Returns the new count, or null when refused. The
   * counter row stays locked until commit (PostgreSQL), so two engines never both pass it.
   */
  raiseTreeRuns(rootRunId: string, runs: number, limit: number): Promise<number | null>;
  /**
   * The usage and budget of these runs (the budgeted runs above a run whose attempt is about to
   * start, DESIGN §12), read without a lock: a report committed by another engine meanwhile
   * is seen by the next check. Runs that no longer exist are left out.
   */
  runBudgets(runIds: string[]): Promise<Pick<Run, "run_id" | "usage" | "budget">[]>;
  /** Each of these writes one kind of row: `write` with that kind alone. */
  insertRuns(runs: Run[]): Promise<void>;
  updateRuns(runs: Run[]): Promise<void>;
  /**
   * The run, its current visits and its compensation rows, or null when it does not exist, or
   * (with `skipLocked`) when another transaction holds it; `unchanged` when it is still at the
   * revision `known`. Locks the run's row until the end of the transaction (PostgreSQL).
   */
  loadRun(runId: string, options?: { skipLocked?: boolean; known?: number }): Promise<RunRead | null>;
  /**
   * Runs this transaction locked as it began (its `lock`), with their current visits and
   * compensation rows, read in one statement; missing runs are left out, those still at their
   * `known` revision answered `unchanged` (PostgreSQL: the transaction's `known`, read as it began).
   */
  loadRuns(runIds: string[], known?: KnownRevisions): Promise<RunRead[]>;
  /**
   * The runs of the transaction's `tryLock` that it locked (no other transaction held them),
   * read as it began. SQLite: none (nothing tells it of runs to try).
   */
  tryLocked(): Promise<RunRead[]>;
  /**
   * Every visit of the run with the commit order of its success (the seq of its
   * `node.succeeded` event), for planning compensation.
   */
  runHistory(runId: string): Promise<{ visit: Visit; successSeq: number | null }[]>;
  /** Inserts new compensation rows and updates changed ones. */
  writeCompensations(rows: Iterable<Compensation>): Promise<void>;
  /** Runs whose compensation is in progress. */
  compensatingRuns(limit: number): Promise<string[]>;
  getVisit(key: VisitKey): Promise<Visit | null>;
  insertVisits(visits: Iterable<Visit>): Promise<void>;
  updateVisits(visits: Iterable<Visit>): Promise<void>;
  /** Inserts events and returns them with their sequence numbers. */
  insertEvents(events: NewEvent[]): Promise<RunEvent[]>;

  /**
   * Ready visits of an agent type whose payload is resolved, due by `now`, oldest first, at most
   * `limit`; their runs are locked for this transaction (PostgreSQL: runs other transactions
   * hold are skipped). `skip`: node concurrency keys found full, whose visits wait: left out,
   * so that the visits behind them (another tenant's) are not held up.
   */
  claimable(agentType: string, now: number, limit: number, skip?: readonly ConcurrencyGroup[]): Promise<VisitKey[]>;
  /**
   * Compensating runs whose next compensation row is of this agent type and due by `now`,
   * oldest first, at most `limit`; locked like `claimable`'s (PostgreSQL skips runs another
   * transaction holds). For external workers: an engine's own handlers get theirs by the sweep.
   */
  claimableCompensations(agentType: string, now: number, limit: number): Promise<string[]>;
  /**
   * Attempts RUNNING (visits and compensation rows) of each of these agent types, leaving out
   * those of the runs `except` (the caller holds them in memory), counted after taking the
   * limits lock: from here until the transaction ends, no other transaction that counts for a
   * limit runs, so the count sees every such claim committed before and none is made on the same
   * free slot (PostgreSQL: a transaction-level advisory lock on the schema; SQLite: one writer,
   * nothing to take). Types with no running attempt are left out of the answer.
   */
  countRunningForLimits(agentTypes: string[], except: string[]): Promise<Map<string, number>>;
  /**
   * RUNNING visits of a workflow's node with this `concurrency_key` (a node's `concurrency`),
   * leaving out those of the runs `except`, after taking the limits lock as `countRunningForLimits` does.
   */
  countRunningByKey(workflowId: string, nodeId: string, key: string, except: string[]): Promise<number>;
  /**
   * The token buckets of these agent types (`rateLimits`) as last written, after taking the
   * limits lock as `countRunningForLimits` does; a type never written is left out.
   */
  rateBuckets(agentTypes: string[]): Promise<Map<string, RateBucket>>;
  /** Writes these buckets (inserted or replaced), under the limits lock this transaction holds. */
  writeRateBuckets(buckets: Map<string, RateBucket>): Promise<void>;
  /** Ready visits whose payload templates are not resolved yet. */
  unresolved(now: number, limit: number): Promise<VisitKey[]>;
  /** Running attempts whose lease or deadline passed. */
  expiredAttempts(now: number, limit: number): Promise<VisitKey[]>;
  /** Running attempts held by any of these holders. */
  attemptsHeldBy(holders: string[], limit: number): Promise<VisitKey[]>;
  /** Visits held without an attempt (IN_REVIEW, WAITING) whose due time (`lease_expires_at`) passed. */
  expiredHolds(now: number, limit: number): Promise<VisitKey[]>;
  /** Child runs that ended while their parent attempt still names them (DESIGN §11.1): their end is owed to it. */
  childrenToSettle(limit: number): Promise<string[]>;
  /**
   * Child runs still running whose parent attempt no longer runs them: to cancel. A map item's
   * run (`parent.item` set) is run by its parent visit while that visit is RUNNING, held by
   * `map` at the run's `parent.attempt`.
   */
  orphanedChildren(limit: number): Promise<string[]>;
  /** Unfinished runs whose TTL passed. */
  expiredRuns(now: number, limit: number): Promise<string[]>;
  /**
   * The earliest future time something falls due (retry, lease, TTL, a compensation, an unpaused
   * schedule's next slot), or null.
   */
  nextDue(now: number): Promise<number | null>;
}
