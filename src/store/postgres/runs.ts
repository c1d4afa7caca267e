/**
 * Runs, visits, compensation rows and events on PostgreSQL (RunsTx), but the write batch
 * (write.ts). Every read is one statement (loadRun two, unless the run is still at the revision
 * its caller knows: its lock must come before the snapshot that reads the visits), each prepared
 * once per connection (`name`).
 */
import type { RunStatus } from "../../core/states.js";
import type { Run, RunQueued, Visit } from "../../core/types.js";
import type { KeyedRun, KnownRevisions, RunRead, VisitKey } from "../runs.js";
import { lockLimits } from "./claims.js";
import {
  COMPENSATION_COLUMNS,
  compensationFromDb,
  type DbCompensation,
  type DbRun,
  type DbVisit,
  jsonObject,
  RUN_COLUMNS,
  runFromDb,
  selectList,
  VISIT_COLUMNS,
  visitFromDb,
} from "./rows.js";
import type { TxQuery } from "./tx-query.js";

const RUNS = selectList(RUN_COLUMNS);
const VISITS = selectList(VISIT_COLUMNS);

/**
 * Runs ($1, ids) with their revision, current visits and compensation rows, as JSON, in one
 * statement; $2 (aligned with $1, null for none) the revision the caller holds of each: a run
 * still at it comes back with null visits and compensations (they were not read).
 */
export function loadRunsSql(runIds: string, known: string): string {
  const same = "r.revision = k.known";
  return `SELECT ${selectList(RUN_COLUMNS, "r")}, r.revision,
      CASE WHEN ${same} THEN NULL ELSE (SELECT coalesce(json_agg(${jsonObject(VISIT_COLUMNS, "v")}), '[]') FROM visits v
        WHERE v.run_id = r.run_id AND v.is_current) END AS visits,
      CASE WHEN ${same} THEN NULL ELSE (SELECT coalesce(json_agg(${jsonObject(COMPENSATION_COLUMNS, "c")} ORDER BY c.seq), '[]')
         FROM compensations c WHERE c.run_id = r.run_id) END AS compensations
      FROM unnest(${runIds}, ${known}) AS k(run_id, known) JOIN runs r ON r.run_id = k.run_id`;
}

/** `loadRunsSql`'s parameters: the ids, and the revision known of each (null: none). */
export function loadRunsValues(runIds: string[], known: KnownRevisions = new Map()): [string[], (number | null)[]] {
  return [runIds, runIds.map((id) => known.get(id) ?? null)];
}

export type LoadedRunRow = DbRun & {
  revision: number;
  visits: DbVisit[] | null;
  compensations: DbCompensation[] | null;
};

export function runRead({ visits, compensations, revision, ...run }: LoadedRunRow): RunRead {
  if (visits === null || compensations === null) return { run_id: run.run_id, unchanged: true };
  return {
    run: runFromDb(run),
    revision,
    visits: visits.map(visitFromDb),
    compensations: compensations.map(compensationFromDb),
  };
}

const SQL = {
  runByKey: { name: "skein_run_by_key", text: `SELECT ${RUNS} FROM runs WHERE idempotency_key = $1` },
  runsByKeys: {
    name: "skein_runs_by_keys",
    text: `SELECT ${RUNS} FROM runs WHERE idempotency_key = ANY($1::text[])`,
  },
  // The root counts as one: a tree's first row starts at 1 + $2 (migration 015). The row stays
  // locked until commit, even when the limit refuses: another engine's raise waits for this one.
  raiseTreeRuns: {
    name: "skein_raise_tree_runs",
    text: `INSERT INTO run_trees (root_run_id, runs) SELECT $1, 1 + $2::int WHERE 1 + $2::int <= $3::int
           ON CONFLICT (root_run_id) DO UPDATE SET runs = run_trees.runs + $2::int WHERE run_trees.runs + $2::int <= $3::int
           RETURNING runs`,
  },
  runBudgets: {
    name: "skein_run_budgets",
    text: "SELECT run_id, usage, budget FROM runs WHERE run_id = ANY($1::text[])",
  },
  loadRuns: { name: "skein_load_runs", text: loadRunsSql("$1::text[]", "$2::bigint[]") },
  lockRun: { name: "skein_lock_run", text: `SELECT ${RUNS}, revision FROM runs WHERE run_id = $1 FOR UPDATE` },
  lockRunSkip: {
    name: "skein_lock_run_skip",
    text: `SELECT ${RUNS}, revision FROM runs WHERE run_id = $1 FOR UPDATE SKIP LOCKED`,
  },
  // A second statement, so its snapshot is taken after the lock: it sees what the transaction
  // that held the run last committed.
  runRows: {
    name: "skein_run_rows",
    text: `SELECT
      (SELECT coalesce(json_agg(${jsonObject(VISIT_COLUMNS, "v")}), '[]') FROM visits v WHERE v.run_id = $1 AND v.is_current) AS visits,
      (SELECT coalesce(json_agg(${jsonObject(COMPENSATION_COLUMNS, "c")} ORDER BY c.seq), '[]')
         FROM compensations c WHERE c.run_id = $1) AS compensations`,
  },
  runHistory: {
    name: "skein_run_history",
    text: `SELECT ${selectList(VISIT_COLUMNS, "v")}, (SELECT max(e.seq) FROM events e WHERE e.run_id = v.run_id AND e.type = 'node.succeeded'
                        AND e.node_id = v.node_id AND e.visit = v.visit) AS success_seq
             FROM visits v WHERE v.run_id = $1`,
  },
  keyedRuns: {
    name: "skein_keyed_runs",
    text: `SELECT run_id, status, queued, created_at FROM runs
            WHERE workflow_id = $1 AND key = $2 AND key IS NOT NULL AND ended_at IS NULL
            ORDER BY created_at, run_id LIMIT $3`,
  },
  anyQueued: {
    name: "skein_any_queued",
    text: "SELECT EXISTS (SELECT 1 FROM runs WHERE status = 'QUEUED') AS queued",
  },
  compensatingRuns: {
    name: "skein_compensating_runs",
    text: "SELECT run_id FROM runs WHERE status = 'COMPENSATING' ORDER BY created_at LIMIT $1",
  },
  getVisit: {
    name: "skein_get_visit",
    text: `SELECT ${VISITS} FROM visits WHERE run_id = $1 AND node_id = $2 AND visit = $3`,
  },
} as const;

export async function runByIdempotencyKey(tx: TxQuery, key: string): Promise<Run | null> {
  const [row] = await tx.q<DbRun>(SQL.runByKey, [key]);
  return row ? runFromDb(row) : null;
}

/** `channel`: the NOTIFY channel, which names the schema the limits lock is keyed by. */
export async function keyedRuns(
  tx: TxQuery,
  channel: string,
  workflowId: string,
  key: string,
  limit: number,
): Promise<KeyedRun[]> {
  // Sent together (pipeline mode): the read runs once the lock is granted.
  const [, rows] = await Promise.all([
    lockLimits(tx, channel),
    tx.q<{ run_id: string; status: string; queued: RunQueued | null; created_at: string | number }>(SQL.keyedRuns, [
      workflowId,
      key,
      limit,
    ]),
  ]);
  return rows.map((r) => ({ ...r, status: r.status as RunStatus, created_at: Number(r.created_at) }));
}

export async function runsByIdempotencyKeys(tx: TxQuery, keys: string[]): Promise<Run[]> {
  return (await tx.q<DbRun>(SQL.runsByKeys, [keys])).map(runFromDb);
}

export async function raiseTreeRuns(
  tx: TxQuery,
  rootRunId: string,
  runs: number,
  limit: number,
): Promise<number | null> {
  const [row] = await tx.q<{ runs: number }>(SQL.raiseTreeRuns, [rootRunId, runs, limit]);
  return row?.runs ?? null;
}

export function runBudgets(tx: TxQuery, runIds: string[]): Promise<Pick<Run, "run_id" | "usage" | "budget">[]> {
  return tx.q<Pick<Run, "run_id" | "usage" | "budget">>(SQL.runBudgets, [runIds]);
}

/** `locked`: the runs the transaction locked as it began, read in the same round trip (not read again). */
export async function loadRuns(
  tx: TxQuery,
  locked: ReadonlyMap<string, RunRead>,
  runIds: string[],
  known?: KnownRevisions,
): Promise<RunRead[]> {
  const missing = runIds.filter((id) => !locked.has(id));
  const rows = missing.length > 0 ? await tx.q<LoadedRunRow>(SQL.loadRuns, loadRunsValues(missing, known)) : [];
  const loaded = new Map(rows.map((row) => [row.run_id, runRead(row)]));
  return runIds.flatMap((id) => {
    const run = locked.get(id) ?? loaded.get(id);
    return run ? [run] : [];
  });
}

export async function loadRun(
  tx: TxQuery,
  runId: string,
  options: { skipLocked?: boolean; known?: number } = {},
): Promise<RunRead | null> {
  const [row] = await tx.q<DbRun & { revision: number }>(options.skipLocked ? SQL.lockRunSkip : SQL.lockRun, [runId]);
  if (!row) return null;
  const { revision, ...run } = row;
  if (revision === options.known) return { run_id: runId, unchanged: true };
  const [rest] = await tx.q<{ visits: DbVisit[]; compensations: DbCompensation[] }>(SQL.runRows, [runId]);
  return {
    run: runFromDb(run),
    revision,
    visits: (rest?.visits ?? []).map(visitFromDb),
    compensations: (rest?.compensations ?? []).map(compensationFromDb),
  };
}

export async function runHistory(tx: TxQuery, runId: string): Promise<{ visit: Visit; successSeq: number | null }[]> {
  const rows = await tx.q<DbVisit & { success_seq: number | null }>(SQL.runHistory, [runId]);
  return rows.map(({ success_seq, ...row }) => ({ visit: visitFromDb(row), successSeq: success_seq }));
}

export async function compensatingRuns(tx: TxQuery, limit: number): Promise<string[]> {
  const rows = await tx.q<{ run_id: string }>(SQL.compensatingRuns, [limit]);
  return rows.map((r) => r.run_id);
}

export async function getVisit(tx: TxQuery, key: VisitKey): Promise<Visit | null> {
  const [row] = await tx.q<DbVisit>(SQL.getVisit, [key.run_id, key.node_id, key.visit]);
  return row ? visitFromDb(row) : null;
}

/** Whether any run is QUEUED, read once the limits lock is granted (as keyedRuns). */
export async function anyQueued(tx: TxQuery, channel: string): Promise<boolean> {
  const [, rows] = await Promise.all([lockLimits(tx, channel), tx.q<{ queued: boolean }>(SQL.anyQueued, [])]);
  return rows[0]?.queued === true;
}
