/** What the API and the CLI read, outside any transaction: committed data only. */
import type { RunStatus } from "../core/states.js";
import type { MapItem, Run, RunEvent, Schedule, Visit } from "../core/types.js";
import type { RateBucket } from "./claims.js";
import type { LoadedRun, VisitKey } from "./runs.js";
import type { ScheduleFilter } from "./schedules.js";

/** Which runs `listRuns` gives; a map's item runs only when `workflow_id` names their item workflow. */
export interface RunFilter {
  status?: RunStatus;
  /** Only runs in one of these statuses (none when empty): bulk actions' eligible runs (DESIGN §16). */
  statuses?: readonly RunStatus[];
  workflow_id?: string;
  /** Only runs of this version (of `workflow_id`'s workflow, when given). */
  workflow_version?: number;
  /** Only runs that are no other run's child (nor a map's item): what bulk actions act on. */
  top_level?: boolean;
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
  /** Only paused runs (true) or only runs that are not (false) (DESIGN §16; migration 025's index). */
  paused?: boolean;
  /** Only runs that carry every one of these tags (DESIGN §16; migration 024's index). */
  tags?: Readonly<Record<string, string>>;
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
  /** Per agent type and priority with any: visits ready (payload resolved) that nobody claimed, and the oldest one's age. */
  ready: { agent_type: string; priority: number; visits: number; oldest_age_ms: number }[];
  /** Runs QUEUED (DESIGN §17) by why: `key` (behind an active run of their key) or `debounce`. */
  queued: { reason: string; runs: number }[];
  /** Visits IN_REVIEW (waiting for a person). */
  pending_reviews: number;
  /** Visits WAITING (a sleep, an event). */
  pending_waits: number;
  /** Runs paused (DESIGN §16): their ready visits are not counted in `ready`. */
  paused_runs: number;
  /** Since the engine's last heartbeat as its row holds it; null when it has no row. */
  heartbeat_age_ms: number | null;
}

/**
 * Reads outside a transaction: committed data, no lock taken, each idempotent; each throws
 * DatabaseError when the database fails (PostgreSQL tries a read that lost its connection again).
 */
export interface StoreReads {
  /** The run as committed, or null. */
  getRun(runId: string): Promise<Run | null>;
  /** The run with its current visits and compensation rows (PostgreSQL: one statement), or null. */
  readRun(runId: string): Promise<Omit<LoadedRun, "revision"> | null>;
  /** Runs by `filter`, newest first, at most `filter.limit` (default 100). */
  listRuns(filter: RunFilter): Promise<Run[]>;
  /** Runs, map items' included, whose id starts with `part` (a key range) or ends with it (a key scan), each at most `limit`, by id. */
  findRunsByIdPart(part: string, limit: number): Promise<{ prefix: Run[]; suffix: Run[] }>;
  /** The child runs of the run's `workflow` nodes by node, visit and attempt; not its map items' runs (listMapItems). */
  listChildren(runId: string): Promise<ChildRun[]>;
  /** A `map` visit's items by index, from `after` (exclusive; -1: from the start), at most `limit`. */
  listMapItems(key: VisitKey, options: { after: number; limit: number }): Promise<MapItem[]>;
  /** The run's visits by creation (then node_id, visit); current ones only when asked. */
  listVisits(runId: string, options?: { currentOnly?: boolean }): Promise<Visit[]>;
  /** The run's latest terminal visit of each node: what templates read as `nodes.<id>`. */
  latestTerminalVisits(runId: string): Promise<Visit[]>;
  /** The run's events after `afterSeq` (default 0) by seq, at most `limit` (default 10 000). */
  listEvents(runId: string, options?: { afterSeq?: number; limit?: number }): Promise<RunEvent[]>;
  /** Runs with a WAITING `wait_event` visit on (event name, key), at most `limit` (DESIGN §11.3). */
  runsWaitingOnKey(name: string, key: string, limit: number): Promise<string[]>;
  /** Visits waiting for a person (IN_REVIEW), oldest first, with their run's trace and workflow; only of `runIds` when given. */
  listReviews(runIds?: readonly string[]): Promise<(Visit & { trace_id: string; workflow_id: string })[]>;
  /** The metrics gauges (DESIGN §9) in two statements, each answered by an index. */
  readGauges(engineId: string, now: number): Promise<StoreGauges>;
  /**
   * How much ready work (visits and map items, not of paused runs) of `agentType` is claimed
   * before work of `priority`: that of a more urgent (lower) priority.
   */
  readyAhead(agentType: string, priority: number, now: number): Promise<number>;
  /** Every agent type's rate row (rate limits and holds, DESIGN §17) as last written, by agent type. */
  readRateBuckets(): Promise<Map<string, RateBucket>>;
  /** The schedule as committed, or null. */
  getSchedule(scheduleId: string): Promise<Schedule | null>;
  /** Schedules by schedule_id, as committed. */
  listSchedules(filter: ScheduleFilter): Promise<Schedule[]>;
}
