/**
 * Runs, visits, compensation rows and events on SQLite (RunsTx): the dispatcher's every flush.
 * Statements are prepared once, on the write connection; every write of a run's row, visits or
 * compensation rows raises its revision in the same transaction.
 */
import type Database from "better-sqlite3";
import type { Budget, NewEvent, Run, RunEvent, RunUsage, Visit } from "../../core/types.js";
import type { RunRead, RunsTx, WriteBatch } from "../runs.js";
import {
  compensationFromDb,
  compensationToDb,
  type DbCompensation,
  type DbRun,
  type DbVisit,
  runFromDb,
  runToDb,
  visitFromDb,
  visitToDb,
} from "./rows.js";

/** Events per multi-row INSERT. */
const EVENT_BATCH = 32;

/**
 * The runs whose copies the dispatcher keeps that are what the file holds: read or written by the
 * store's transactions since any other transaction wrote (SqliteStore.transaction clears them).
 * Trusted only in the dispatcher's own transactions (`trusted`): another caller's `known` may be older.
 */
export interface KeptRuns {
  readonly runs: Set<string>;
  trusted: boolean;
}

function eventParams(e: NewEvent): unknown[] {
  return [e.run_id, e.type, e.node_id, e.visit, e.trace_id, e.at, JSON.stringify(e.data)];
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
  const insertRuns = (runs: Run[]) => {
    for (const run of runs) {
      s.insertRun.run(runToDb(run));
      kept.runs.add(run.run_id);
    }
  };
  const updateRuns = (runs: Run[]) => {
    for (const run of runs) s.updateRun.run(runToDb(run));
    touch(runs.map((r) => r.run_id));
  };
  const writeCompensations = (rows: WriteBatch["compensations"]) => {
    const written = [...rows];
    for (const c of written) s.upsertCompensation.run(compensationToDb(c));
    touch(written.map((c) => c.run_id));
  };
  const insertVisits = (visits: Visit[]) => {
    const written = [...visits];
    for (const v of written) s.insertVisit.run(visitToDb(v));
    touch(written.map((v) => v.run_id));
  };
  const updateVisits = (visits: Visit[]) => {
    const written = [...visits];
    touch(written.map((v) => v.run_id));
    for (const v of written) {
      // Positional parameters: binding 20 named ones costs more than the rest of the call.
      const row = visitToDb(v);
      const params: unknown[] = MUTABLE_VISIT_COLUMNS.map((c) => row[c]);
      params.push(row.run_id, row.node_id, row.visit);
      s.updateVisit.run(params);
    }
  };
  const insertEvents = (events: NewEvent[]) => {
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
  };
  return {
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
    now: async () => null,
    // One engine per file: nobody to notify.
    write: async (batch) => {
      revised.clear();
      insertRuns(batch.insertRuns);
      updateRuns(batch.updateRuns);
      updateVisits(batch.updateVisits);
      insertVisits(batch.insertVisits);
      writeCompensations(batch.compensations);
      const events = insertEvents(batch.events);
      return { events, revisions: new Map(revised) };
    },
    loadRun: async (runId, options) => load(runId, options?.known),
    loadRuns: async (runIds, known) => runIds.map((id) => load(id, known?.get(id))).filter((r) => r !== null),
    tryLocked: async () => [],
    runHistory: async (runId) => {
      const rows = s.runHistory.all(runId) as (DbVisit & { success_seq: number | null })[];
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
  const visitColumns = Object.keys(visitRowShape);
  return {
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
    // The root counts as one: a tree's first row starts at 1 + runs (migration 015).
    raiseTreeRuns: db
      .prepare(
        `INSERT INTO run_trees (root_run_id, runs) SELECT @root, 1 + @runs WHERE 1 + @runs <= @limit
         ON CONFLICT (root_run_id) DO UPDATE SET runs = run_trees.runs + @runs WHERE run_trees.runs + @runs <= @limit
         RETURNING runs`,
      )
      .pluck(),
    runHistory: db.prepare(
      `SELECT v.*, (SELECT max(e.seq) FROM events e WHERE e.run_id = v.run_id AND e.type = 'node.succeeded'
                            AND e.node_id = v.node_id AND e.visit = v.visit) AS success_seq
               FROM visits v WHERE v.run_id = ?`,
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
