/**
 * Conversion between PostgreSQL rows and domain types. pg already gives booleans, numbers
 * (bigint through the pool's parser) and parsed JSON, so rows are the domain types but for the
 * string enums. Writes go by column: one array per column, expanded by `unnest`, so a batch of
 * any size is one statement with a fixed text (preparable once).
 */
import type { EndCause, RunStatus, VisitState } from "../../core/states.js";
import type { Compensation, NewEvent, Run, RunEvent, Visit } from "../../core/types.js";
import { frozenJsonText } from "../frozen-json.js";
import type { StoredWorkflow } from "../workflows.js";

type Row<T, K extends keyof T> = Omit<T, K> & { [P in K]: string | null };

export type DbRun = Row<Run, "status" | "end_cause">;
export type DbVisit = Row<Visit, "state">;
export type DbCompensation = Row<Compensation, "state">;
export type DbEvent = Row<RunEvent, "type">;

export const runFromDb = (r: DbRun): Run => ({
  ...r,
  status: r.status as RunStatus,
  end_cause: r.end_cause as EndCause | null,
});
export const visitFromDb = (r: DbVisit): Visit => ({ ...r, state: r.state as VisitState });
export const compensationFromDb = (r: DbCompensation): Compensation => ({ ...r, state: r.state as VisitState });
export const eventFromDb = (r: DbEvent): RunEvent => ({ ...r, type: r.type as RunEvent["type"] });

/**
 * How a column is sent: its SQL type; JSON as text (pg would turn a JS array into a SQL array),
 * null as SQL NULL (as SQLite's store does) except in `json!` columns, which are NOT NULL and
 * keep a JSON null.
 */
type Kind = "text" | "integer" | "bigint" | "boolean" | "json" | "json!" | "json=" | "json!=";

const sqlType = (kind: Kind): string => (kind.startsWith("json") ? "json" : kind);

function param(kind: Kind, value: unknown): unknown {
  if (kind === "json!") return JSON.stringify(value ?? null);
  if (kind === "json!=") return frozenJsonText(value ?? null);
  if (value === undefined || value === null) return null;
  // `json=` (`json!=`: NOT NULL): a value that never changes once set (a run's input, a visit's
  // payload): its text is kept (frozen-json.ts).
  if (kind === "json=") return frozenJsonText(value);
  return kind === "json" ? JSON.stringify(value) : value;
}

/** A table's columns in order; a record, so that a column missing from the domain type is a compile error. */
export type Columns<T> = { [K in keyof T]-?: Kind };

export const RUN_COLUMNS: Columns<Run> = {
  run_id: "text",
  workflow_id: "text",
  workflow_version: "integer",
  status: "text",
  input: "json!=",
  output: "json",
  error: "json",
  end_cause: "text",
  trace_id: "text",
  traceparent: "text",
  idempotency_key: "text",
  input_hash: "text",
  needs_attention: "boolean",
  created_at: "bigint",
  updated_at: "bigint",
  deadline_at: "bigint",
  ended_at: "bigint",
  parent: "json",
  schedule_id: "text",
  usage: "json!",
  budget: "json",
  scope: "json",
  reserved: "json",
  tags: "json!",
  paused: "json",
  forked_from: "json",
  key: "text",
  queued: "json",
  triggered_by: "json",
  priority: "integer",
};

export const VISIT_COLUMNS: Columns<Visit> = {
  run_id: "text",
  node_id: "text",
  visit: "integer",
  execution_id: "text",
  agent_type: "text",
  state: "text",
  is_current: "boolean",
  loop_activated: "boolean",
  trigger: "json",
  payload: "json=",
  output: "json",
  error: "json",
  reason: "text",
  handled: "boolean",
  fired: "json",
  failures: "integer",
  attempt: "integer",
  interruptions: "integer",
  prior_starts: "integer",
  ready_at: "bigint",
  deadline_at: "bigint",
  lease_expires_at: "bigint",
  holder: "text",
  created_at: "bigint",
  started_at: "bigint",
  ended_at: "bigint",
  items: "json",
  concurrency_key: "text",
  priority: "integer",
};

export const COMPENSATION_COLUMNS: Columns<Compensation> = {
  run_id: "text",
  seq: "integer",
  node_id: "text",
  visit: "integer",
  execution_id: "text",
  agent_type: "text",
  state: "text",
  output: "json",
  error: "json",
  reason: "text",
  failures: "integer",
  attempt: "integer",
  interruptions: "integer",
  ready_at: "bigint",
  deadline_at: "bigint",
  lease_expires_at: "bigint",
  holder: "text",
  created_at: "bigint",
  started_at: "bigint",
  ended_at: "bigint",
};

/** What an UPDATE of a run writes (the SQLite store's same columns); run_id first, the key. */
export const RUN_UPDATE_COLUMNS: Columns<
  Pick<
    Run,
    | "run_id"
    | "workflow_version"
    | "status"
    | "output"
    | "error"
    | "end_cause"
    | "needs_attention"
    | "updated_at"
    | "deadline_at"
    | "ended_at"
    | "usage"
    | "reserved"
    | "paused"
    | "queued"
    | "input"
    | "input_hash"
  >
> = {
  run_id: "text",
  // Changed only by migrateRuns (DESIGN §16): a run moved to another version of its workflow.
  workflow_version: "integer",
  status: "text",
  output: "json",
  error: "json",
  end_cause: "text",
  needs_attention: "boolean",
  updated_at: "bigint",
  deadline_at: "bigint",
  ended_at: "bigint",
  usage: "json!",
  reserved: "json",
  paused: "json",
  queued: "json",
  // A debounced run's input is replaced by each start of its window (DESIGN §17): sent for it
  // only (runUpdateArrays); NULL keeps what is stored (write.ts assigns COALESCE).
  input: "json",
  input_hash: "text",
};
/** Columns of RUN_UPDATE_COLUMNS whose NULL keeps what is stored. */
export const RUN_KEPT_UNLESS_GIVEN: ReadonlySet<string> = new Set(["input", "input_hash"]);

/** RUN_UPDATE_COLUMNS' arrays for `runs`: the input only of a debounced run, NULL for the others. */
export function runUpdateArrays(runs: readonly Run[]): unknown[][] {
  const arrays = columnArrays(RUN_UPDATE_COLUMNS, runs);
  const names = Object.keys(RUN_UPDATE_COLUMNS);
  const input = arrays[names.indexOf("input")] as unknown[];
  const hash = arrays[names.indexOf("input_hash")] as unknown[];
  runs.forEach((r, i) => {
    if (r.queued?.reason === "debounce") return;
    input[i] = null;
    hash[i] = null;
  });
  return arrays;
}

export const EVENT_COLUMNS: Columns<NewEvent> = {
  run_id: "text",
  type: "text",
  node_id: "text",
  visit: "integer",
  trace_id: "text",
  at: "bigint",
  data: "json!",
};

/** An event as stored: with its seq. */
export const STORED_EVENT_COLUMNS: Columns<RunEvent> = { seq: "bigint", ...EVENT_COLUMNS };

export const WORKFLOW_COLUMNS: Columns<StoredWorkflow> = {
  id: "text",
  version: "integer",
  hash: "text",
  definition: "text",
  created_at: "bigint",
};

/** What an UPDATE of a visit or a compensation writes: every column but its identity, creation and priority (its run's, fixed). */
export const IMMUTABLE_COLUMNS = new Set([
  "run_id",
  "node_id",
  "visit",
  "seq",
  "execution_id",
  "agent_type",
  "created_at",
  "priority",
]);

/** Column names, quoted (some, like `trigger` and `at`, are SQL keywords). */
export const names = <T>(columns: Columns<T>): string[] => Object.keys(columns).map((c) => `"${c}"`);

/**
 * The columns a read selects, by name (`v."run_id", ...`), never `*`: a prepared `SELECT *`
 * fails on every open connection ("cached plan must not change result type") once a newer
 * Skein adds a column, and engines of both versions share the database during an upgrade.
 */
export function selectList<T>(columns: Columns<T>, alias?: string): string {
  return names(columns)
    .map((c) => (alias ? `${alias}.${c}` : c))
    .join(", ");
}

/** `json_build_object('run_id', v."run_id", ...)`: a row as one JSON value, of these columns only. */
export function jsonObject<T>(columns: Columns<T>, alias: string): string {
  return `json_build_object(${Object.keys(columns)
    .map((c) => `'${c}', ${alias}."${c}"`)
    .join(", ")})`;
}

/**
 * `unnest($1::text[], $2::integer[], ...) AS u("run_id", ...)`: the rows of a column-wise batch,
 * numbered in `u.ordinality` when asked; its parameters start at `$firstParam` (default 1).
 */
export function unnestSql<T>(columns: Columns<T>, options: { ordinality?: boolean; firstParam?: number } = {}): string {
  const first = options.firstParam ?? 1;
  const arrays = Object.values<Kind>(columns).map((kind, i) => `$${i + first}::${sqlType(kind)}[]`);
  const aliases = [...names(columns), ...(options.ordinality ? ["ordinality"] : [])];
  return `unnest(${arrays.join(", ")})${options.ordinality ? " WITH ORDINALITY" : ""} AS u(${aliases.join(", ")})`;
}

/** One array per column, in column order: the parameters of `unnestSql`. */
export function columnArrays<T>(columns: Columns<T>, rows: readonly T[]): unknown[][] {
  return Object.entries<Kind>(columns).map(([name, kind]) => rows.map((row) => param(kind, row[name as keyof T])));
}

/** The values of one row, in column order (JSON as text): the parameters of a one-row statement. */
export function rowValues<T>(columns: Columns<T>, row: T): unknown[] {
  return Object.entries<Kind>(columns).map(([name, kind]) => param(kind, row[name as keyof T]));
}

/** Placeholders of a one-row statement with casts: `$1::text, $2::json, ...`. */
export function placeholders<T>(columns: Columns<T>): string {
  return Object.values<Kind>(columns)
    .map((kind, i) => `$${i + 1}::${sqlType(kind)}`)
    .join(", ");
}
