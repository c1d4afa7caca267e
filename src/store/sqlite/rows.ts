/** Conversion between SQLite rows (snake_case, JSON as text, booleans as 0/1) and domain types. */

import type { EndCause, RunStatus, VisitState } from "../../core/states.js";
import type {
  Budget,
  Compensation,
  Json,
  MapCounts,
  Reservations,
  Run,
  RunEvent,
  RunFork,
  RunParent,
  RunPause,
  RunQueued,
  RunTags,
  RunTrigger,
  RunUsage,
  Visit,
  VisitError,
} from "../../core/types.js";
import { frozenJsonText } from "../frozen-json.js";

export interface DbRun {
  run_id: string;
  workflow_id: string;
  workflow_version: number;
  status: string;
  input: string;
  output: string | null;
  error: string | null;
  end_cause: string | null;
  trace_id: string;
  traceparent: string;
  idempotency_key: string | null;
  input_hash: string;
  needs_attention: number;
  created_at: number;
  updated_at: number;
  deadline_at: number;
  ended_at: number | null;
  parent: string | null;
  schedule_id: string | null;
  usage: string;
  budget: string | null;
  scope: string | null;
  reserved: string | null;
  tags: string;
  paused: string | null;
  forked_from: string | null;
  key: string | null;
  queued: string | null;
  triggered_by: string | null;
  priority: number;
  /** Not part of a Run: how many times the run's rows were written (LoadedRun). */
  revision?: number;
}

export interface DbVisit {
  run_id: string;
  node_id: string;
  visit: number;
  execution_id: string;
  agent_type: string;
  state: string;
  is_current: number;
  loop_activated: number;
  trigger: string | null;
  payload: string | null;
  output: string | null;
  error: string | null;
  reason: string | null;
  handled: number;
  fired: string | null;
  failures: number;
  attempt: number;
  interruptions: number;
  prior_starts: number;
  ready_at: number | null;
  deadline_at: number | null;
  lease_expires_at: number | null;
  holder: string | null;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
  items: string | null;
  concurrency_key: string | null;
  priority: number;
}

export interface DbCompensation {
  run_id: string;
  seq: number;
  node_id: string;
  visit: number;
  execution_id: string;
  agent_type: string;
  state: string;
  output: string | null;
  error: string | null;
  reason: string | null;
  failures: number;
  attempt: number;
  interruptions: number;
  ready_at: number | null;
  deadline_at: number | null;
  lease_expires_at: number | null;
  holder: string | null;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
}

const parse = <T>(text: string | null): T | null => (text === null ? null : (JSON.parse(text) as T));
const text = (value: unknown): string | null => (value === null || value === undefined ? null : JSON.stringify(value));

export function runFromDb({ revision: _, ...r }: DbRun): Run {
  return {
    ...r,
    status: r.status as RunStatus,
    input: JSON.parse(r.input) as Json,
    output: parse<Json>(r.output),
    error: parse<VisitError>(r.error),
    end_cause: r.end_cause as EndCause | null,
    needs_attention: r.needs_attention === 1,
    parent: parse<RunParent>(r.parent),
    usage: JSON.parse(r.usage) as RunUsage,
    budget: parse<Budget>(r.budget),
    scope: parse<string[]>(r.scope),
    reserved: parse<Reservations>(r.reserved),
    tags: JSON.parse(r.tags) as RunTags,
    paused: parse<RunPause>(r.paused),
    forked_from: parse<RunFork>(r.forked_from),
    queued: parse<RunQueued>(r.queued),
    triggered_by: parse<RunTrigger>(r.triggered_by),
  };
}

export function runToDb(r: Run): DbRun {
  return {
    ...r,
    input: frozenJsonText(r.input),
    output: text(r.output),
    error: text(r.error),
    needs_attention: r.needs_attention ? 1 : 0,
    parent: text(r.parent),
    usage: JSON.stringify(r.usage),
    budget: text(r.budget),
    scope: text(r.scope),
    reserved: text(r.reserved),
    tags: JSON.stringify(r.tags),
    paused: text(r.paused),
    forked_from: text(r.forked_from),
    queued: text(r.queued),
    triggered_by: text(r.triggered_by),
  };
}

/**
 * The columns a run's progress changes, each with its value: its UPDATE (runs.ts updateRun) sets
 * these only, so its input, parent, budget and scope are not serialised again.
 */
const RUN_UPDATES: Readonly<Record<string, (r: Run) => unknown>> = {
  // Changed only by migrateRuns (DESIGN §16): a run moved to another version of its workflow.
  workflow_version: (r) => r.workflow_version,
  status: (r) => r.status,
  output: (r) => text(r.output),
  error: (r) => text(r.error),
  end_cause: (r) => r.end_cause,
  needs_attention: (r) => (r.needs_attention ? 1 : 0),
  updated_at: (r) => r.updated_at,
  deadline_at: (r) => r.deadline_at,
  ended_at: (r) => r.ended_at,
  usage: (r) => JSON.stringify(r.usage),
  reserved: (r) => text(r.reserved),
  paused: (r) => text(r.paused),
  queued: (r) => text(r.queued),
  // A debounced run's input is replaced by each start of its window (DESIGN §17); every other
  // update passes NULL and keeps the stored input (the UPDATE reads COALESCE(?, input)).
  input: (r) => (r.queued?.reason === "debounce" ? frozenJsonText(r.input) : null),
  input_hash: (r) => (r.queued?.reason === "debounce" ? r.input_hash : null),
};
/** Columns whose NULL update keeps what is stored. */
export const RUN_KEPT_UNLESS_GIVEN: ReadonlySet<string> = new Set(["input", "input_hash"]);
export const RUN_UPDATE_COLUMNS = Object.keys(RUN_UPDATES);
const runUpdateValues = Object.values(RUN_UPDATES);

/** A run's UPDATE parameters: RUN_UPDATE_COLUMNS' values, then its run_id. */
export function runUpdateParams(r: Run): unknown[] {
  const params = runUpdateValues.map((value) => value(r));
  params.push(r.run_id);
  return params;
}

export function visitFromDb(r: DbVisit): Visit {
  return {
    ...r,
    state: r.state as VisitState,
    is_current: r.is_current === 1,
    loop_activated: r.loop_activated === 1,
    trigger: parse(r.trigger),
    payload: parse<Json>(r.payload),
    output: parse<Json>(r.output),
    error: parse<VisitError>(r.error),
    handled: r.handled === 1,
    fired: parse<string[]>(r.fired),
    items: parse<MapCounts>(r.items),
    concurrency_key: r.concurrency_key,
  };
}

export function visitToDb(v: Visit): DbVisit {
  return {
    ...v,
    is_current: v.is_current ? 1 : 0,
    loop_activated: v.loop_activated ? 1 : 0,
    trigger: text(v.trigger),
    payload: v.payload === null || v.payload === undefined ? null : frozenJsonText(v.payload),
    output: text(v.output),
    error: text(v.error),
    handled: v.handled ? 1 : 0,
    fired: text(v.fired),
    items: text(v.items),
    concurrency_key: v.concurrency_key,
  };
}

/** A row of event_batches (migration 020): a run's events of one transaction. */
export interface DbEventBatch {
  last_seq: number;
  count: number;
  trace_id: string;
  /** JSON: [type, node_id, visit, at, data] per event, in seq order. */
  events: string;
}

/** The events of `rows` (one run's, by last_seq) after seq `after`, at most `limit`. */
export function eventsOf(run_id: string, rows: DbEventBatch[], after: number, limit: number): RunEvent[] {
  const out: RunEvent[] = [];
  for (const row of rows) {
    const events = JSON.parse(row.events) as [
      RunEvent["type"],
      string | null,
      number | null,
      number,
      RunEvent["data"],
    ][];
    let seq = row.last_seq - row.count;
    for (const [type, node_id, visit, at, data] of events) {
      seq += 1;
      if (seq <= after) continue;
      if (out.length >= limit) return out;
      out.push({ seq, run_id, type, node_id, visit, trace_id: row.trace_id, at, data });
    }
  }
  return out;
}

export function compensationFromDb(r: DbCompensation): Compensation {
  return {
    ...r,
    state: r.state as VisitState,
    output: parse<Json>(r.output),
    error: parse<VisitError>(r.error),
  };
}

export function compensationToDb(c: Compensation): DbCompensation {
  return { ...c, output: text(c.output), error: text(c.error) };
}
