/**
 * Runs, visits, compensation rows and events on SQLite (RunsTx): the dispatcher's every flush.
 * Statements are prepared once, on the write connection; a write of a run's row raises its
 * revision in the same statement, and so does a write of its visits or compensation rows but in
 * the own transactions of the dispatcher of the engine holding the file (see `write`).
 */
import type Database from "better-sqlite3";
import type { RunStatus } from "../../core/states.js";
import type { Budget, NewEvent, Run, RunEvent, RunUsage, Visit } from "../../core/types.js";
import type { KeyedRun, RunRead, RunsTx, WriteBatch } from "../runs.js";
import {
  compensationFromDb,
  compensationToDb,
  type DbCompensation,
  type DbRun,
  type DbVisit,
  RUN_KEPT_UNLESS_GIVEN,
  RUN_UPDATE_COLUMNS,
  runFromDb,
  runToDb,
  runUpdateParams,
  visitFromDb,
  visitToDb,
} from "./rows.js";

/**
 * The runs whose copies the dispatcher keeps that are what the file holds: read or written by the
 * store's transactions since any other transaction wrote (SqliteStore.transaction clears them).
 * Trusted only in the dispatcher's own transactions (`trusted`): another caller's `known` may be older.
 */
export interface KeptRuns {
  readonly runs: Set<string>;
  trusted: boolean;
  /**
   * This store holds the file's engine lock: its dispatcher's own writes of visits leave the
   * revision alone (see `write`), and every other writer raises it. A client's store (false)
   * raises it always, and cannot tell the engine's visit writes by the revision: it reads them.
   */
  engine: boolean;
}

export function sqliteRuns(db: Database.Database, kept: KeptRuns): RunsTx {
  const s = prepare(db);
  const load = (runId: string, known?: number): RunRead | null => {
    // Kept by the caller, and read or written here since anything else last wrote: not even
    // its row is read.
    if (known !== undefined && kept.trusted && kept.runs.has(runId)) return { run_id: runId, unchanged: true };
    const row = s.getRun.get(runId) as DbRun | undefined;
    if (!row) return null;
    kept.runs.add(runId);
    const revision = row.revision ?? 0;
    if (revision === known && kept.engine) return { run_id: runId, unchanged: true };
    return {
      run: runFromDb(row),
      revision,
      visits: (s.currentVisits.all(runId) as DbVisit[]).map(visitFromDb),
      compensations: (s.compensations.all(runId) as DbCompensation[]).map(compensationFromDb),
    };
  };
  // A write of a run's row raises its revision (LoadedRun) in its statement; a write of only its
  // visits or compensation rows raises it after them, once per batch, unless `write` says not.
  const revised = new Map<string, number>();
  const touch = (runIds: Iterable<string>) => {
    for (const runId of runIds) {
      if (revised.has(runId)) continue;
      const revision = s.touchRun.get(runId) as number | undefined;
      if (revision !== undefined) revised.set(runId, revision);
    }
  };
  const insertRuns = (runs: Run[]) => {
    for (const run of runs) {
      // Positional parameters, as for visits.
      const row = runToDb(run);
      s.insertRun.run(runColumns.map((c) => row[c]));
      for (const [name, value] of Object.entries(run.tags)) s.insertTag.run(name, value, run.run_id);
      kept.runs.add(run.run_id);
    }
  };
  const updateRuns = (runs: Run[]) => {
    for (const run of runs) {
      const revision = s.updateRun.get(runUpdateParams(run)) as number | undefined;
      if (revision !== undefined) revised.set(run.run_id, revision);
    }
  };
  const writeCompensations = (rows: WriteBatch["compensations"], touched: Set<string>) => {
    for (const c of rows) {
      s.upsertCompensation.run(compensationToDb(c));
      touched.add(c.run_id);
    }
  };
  const insertVisits = (visits: Visit[], touched: Set<string>) => {
    for (const v of visits) {
      // Positional parameters: binding 20 named ones costs more than the rest of the call.
      const row = visitToDb(v);
      s.insertVisit.run(VISIT_COLUMNS.map((c) => row[c]));
      touched.add(v.run_id);
    }
  };
  const updateVisits = (visits: Visit[], touched: Set<string>) => {
    for (const v of visits) {
      // Positional parameters: binding 20 named ones costs more than the rest of the call.
      const row = visitToDb(v);
      const params: unknown[] = MUTABLE_VISIT_COLUMNS.map((c) => row[c]);
      params.push(row.run_id, row.node_id, row.visit);
      s.updateVisit.run(params);
      touched.add(v.run_id);
    }
  };
  /**
   * A row per run (and trace) of the batch's events, in order (migration 020): a row of n events
   * takes the n seqs after the largest written, its last one its key.
   */
  const insertEvents = (events: NewEvent[]) => {
    const out: RunEvent[] = [];
    if (events.length === 0) return out;
    let last = (s.lastSeq.get() as number | null) ?? 0;
    for (let i = 0; i < events.length; ) {
      const first = events[i] as NewEvent;
      let end = i + 1;
      while (end < events.length) {
        const e = events[end] as NewEvent;
        if (e.run_id !== first.run_id || e.trace_id !== first.trace_id) break;
        end++;
      }
      const body: unknown[] = [];
      for (let k = i; k < end; k++) {
        const e = events[k] as NewEvent;
        body.push([e.type, e.node_id, e.visit, e.at, e.data]);
        out.push({ ...e, seq: last + 1 + k - i });
      }
      last += end - i;
      s.insertEvents.run(last, first.run_id, end - i, first.trace_id, JSON.stringify(body));
      i = end;
    }
    return out;
  };
  return {
    runByIdempotencyKey: async (key) => {
      const row = s.runByKey.get(key) as DbRun | undefined;
      return row ? runFromDb(row) : null;
    },
    keyedRuns: async (workflowId, key, limit) =>
      (s.keyedRuns.all(workflowId, key, limit) as (Omit<KeyedRun, "queued"> & { queued: string | null })[]).map(
        (r) => ({ ...r, status: r.status as RunStatus, queued: r.queued === null ? null : JSON.parse(r.queued) }),
      ),
    anyQueued: async () => s.anyQueued.get() !== undefined,
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
    now: async () => null,
    // One engine per file: nobody to notify.
    write: async (batch) => {
      revised.clear();
      const touched = new Set<string>();
      insertRuns(batch.insertRuns);
      updateRuns(batch.updateRuns);
      updateVisits(batch.updateVisits, touched);
      insertVisits(batch.insertVisits, touched);
      writeCompensations(batch.compensations, touched);
      // One engine holds the file (EngineLock), and the copies of runs it keeps are its
      // dispatcher's, which its own transactions (trusted) leave as they wrote them: their writes
      // of visits alone need not raise the revision, which saves rewriting the run's row (another
      // page of the commit when work is claimed out of the order it was written, by priority say).
      // Any other transaction raises it, a client's too, so that the engine reads the run again;
      // a client does not trust the revision for visits (`load`).
      if (!(kept.trusted && kept.engine)) touch(touched);
      const events = insertEvents(batch.events);
      return { events, revisions: new Map(revised) };
    },
    loadRun: async (runId, options) => load(runId, options?.known),
    loadRuns: async (runIds, known) => runIds.map((id) => load(id, known?.get(id))).filter((r) => r !== null),
    tryLocked: async () => [],
    runHistory: async (runId) => {
      const rows = s.runHistory.all({ run_id: runId }) as (DbVisit & { success_seq: number | null })[];
      return rows.map(({ success_seq, ...row }) => ({ visit: visitFromDb(row), successSeq: success_seq }));
    },
    compensatingRuns: async (limit) => (s.compensatingRuns.all(limit) as { run_id: string }[]).map((r) => r.run_id),
    getVisit: async (key) => {
      const row = s.getVisit.get(key) as DbVisit | undefined;
      return row ? visitFromDb(row) : null;
    },
  };
}

function prepare(db: Database.Database) {
  return {
    runByKey: db.prepare("SELECT * FROM runs WHERE idempotency_key = ?"),
    runsByKeys: db.prepare("SELECT * FROM runs WHERE idempotency_key IN (SELECT value FROM json_each(?))"),
    getRun: db.prepare("SELECT * FROM runs WHERE run_id = ?"),
    runBudgets: db.prepare("SELECT run_id, usage, budget FROM runs WHERE run_id IN (SELECT value FROM json_each(?))"),
    touchRun: db.prepare("UPDATE runs SET revision = revision + 1 WHERE run_id = ? RETURNING revision").pluck(),
    insertRun: db.prepare(
      `INSERT INTO runs (${runColumns.join(", ")}) VALUES (${runColumns.map(() => "?").join(", ")})`,
    ),
    // A run's tags, one row each: what listRuns' tag filter looks up (migration 024).
    insertTag: db.prepare("INSERT OR IGNORE INTO run_tags (name, value, run_id) VALUES (?, ?, ?)"),
    anyQueued: db.prepare("SELECT 1 FROM runs INDEXED BY runs_by_status WHERE status = 'QUEUED' LIMIT 1"),
    keyedRuns: db.prepare(
      `SELECT run_id, status, queued, created_at FROM runs INDEXED BY runs_by_key
        WHERE workflow_id = ? AND key = ? AND key IS NOT NULL AND ended_at IS NULL ORDER BY created_at, run_id LIMIT ?`,
    ),
    // Positional, in runUpdateParams' order.
    updateRun: db
      .prepare(
        `UPDATE runs SET ${RUN_UPDATE_COLUMNS.map((c) => (RUN_KEPT_UNLESS_GIVEN.has(c) ? `${c} = coalesce(?, ${c})` : `${c} = ?`)).join(", ")}, revision = revision + 1
         WHERE run_id = ? RETURNING revision`,
      )
      .pluck(),
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
      `INSERT INTO visits (${VISIT_COLUMNS.join(", ")}) VALUES (${VISIT_COLUMNS.map(() => "?").join(", ")})`,
    ),
    updateVisit: db.prepare(
      `UPDATE visits SET ${MUTABLE_VISIT_COLUMNS.map((c) => `${c} = ?`).join(", ")}
         WHERE run_id = ? AND node_id = ? AND visit = ?`,
    ),
    lastSeq: db.prepare("SELECT max(last_seq) FROM event_batches").pluck(),
    insertEvents: db.prepare(
      "INSERT INTO event_batches (last_seq, run_id, count, trace_id, events) VALUES (?, ?, ?, ?, ?)",
    ),
    // The root counts as one: a tree's first row starts at 1 + runs (migration 015).
    raiseTreeRuns: db
      .prepare(
        `INSERT INTO run_trees (root_run_id, runs) SELECT @root, 1 + @runs WHERE 1 + @runs <= @limit
         ON CONFLICT (root_run_id) DO UPDATE SET runs = run_trees.runs + @runs WHERE run_trees.runs + @runs <= @limit
         RETURNING runs`,
      )
      .pluck(),
    // The events view (migration 020) read once for the run, not once per visit.
    runHistory: db.prepare(
      `SELECT v.*, s.success_seq FROM visits v LEFT JOIN (
         SELECT node_id, visit, max(seq) AS success_seq FROM events
          WHERE run_id = @run_id AND type = 'node.succeeded' GROUP BY node_id, visit
       ) s ON s.node_id = v.node_id AND s.visit = v.visit
       WHERE v.run_id = @run_id`,
    ),
  };
}
const runColumns: (keyof DbRun)[] = [
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
  "tags",
  "paused",
  "forked_from",
  "key",
  "queued",
  "triggered_by",
  "priority",
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
  priority: true,
};

/** What a visit's INSERT writes, in this order. */
const VISIT_COLUMNS = Object.keys(visitRowShape) as (keyof DbVisit)[];

/** What a visit's UPDATE writes: every column but its identity, creation time and priority (its run's, fixed). */
const MUTABLE_VISIT_COLUMNS = VISIT_COLUMNS.filter(
  (c) => !["run_id", "node_id", "visit", "execution_id", "agent_type", "created_at", "priority"].includes(c),
);
