/**
 * The operations of one PostgreSQL transaction (StoreTx). Round trips are what costs here: the
 * runs a transaction locks are read with its BEGIN (postgres-store.ts), a write batch is one
 * statement whatever its size, every other method is one statement (loadRun two, unless the run
 * is still at the revision its caller knows: its lock must come before the snapshot that reads
 * the visits), and statements are prepared once per connection (`name`).
 */
import type { Compensation, NewEvent, Run, RunEvent, Visit } from "../../core/types.js";
import {
  type ConcurrencyGroup,
  EMPTY_BATCH,
  type InboxTx,
  type KnownRevisions,
  type MapTx,
  type PruneTx,
  type RateBucket,
  type RunRead,
  type ScheduleTx,
  type StoreTx,
  type VisitKey,
  type WriteBatch,
  type Written,
} from "../store.js";
import { engineLockFreeSql, FREE_LOCK_GRACE_MS } from "./engine-lock.js";
import { postgresInbox } from "./inbox.js";
import { postgresMapItems } from "./map-items.js";
import { postgresPrune } from "./prune.js";
import { noticePayload } from "./ready-listener.js";
import {
  COMPENSATION_COLUMNS,
  type Columns,
  columnArrays,
  compensationFromDb,
  type DbCompensation,
  type DbRun,
  type DbVisit,
  EVENT_COLUMNS,
  IMMUTABLE_COLUMNS,
  jsonObject,
  names,
  RUN_COLUMNS,
  RUN_UPDATE_COLUMNS,
  runFromDb,
  selectList,
  unnestSql,
  VISIT_COLUMNS,
  visitFromDb,
} from "./rows.js";
import { postgresSchedules } from "./schedules.js";
import type { Session } from "./session.js";

/** The advisory lock class of claims that concern a concurrency limit ("sklm"), keyed by schema. */
const LIMITS_LOCK = 0x736b6c6d;

/**
 * The dead engine `d` holds an attempt it must give back: a running visit or compensation, or
 * a cancelled visit of a compensating run (compensation waits for it). The SQLite store's three cases.
 */
export const HOLDS_ATTEMPTS = `
  EXISTS (SELECT 1 FROM visits v WHERE v.state = 'RUNNING' AND v.holder = d.engine_id)
  OR EXISTS (SELECT 1 FROM compensations c WHERE c.state = 'RUNNING' AND c.holder = d.engine_id)
  OR EXISTS (SELECT 1 FROM runs r JOIN visits v ON v.run_id = r.run_id
             WHERE r.status = 'COMPENSATING' AND v.state = 'CANCELLED' AND v.holder = d.engine_id)`;

/**
 * Engines other than $1 whose liveness lock (of schema $4) is free, of those that have beaten
 * since the server started: a restart frees every lock at once, and until an engine has
 * beaten since (its listener is back within a second), its free lock says nothing about it.
 */
const LOCK_FREE_ENGINES = `
  SELECT e.engine_id FROM engines e
   WHERE e.stopped_at IS NULL AND e.engine_id <> $1
     AND e.heartbeat_at > (SELECT floor(extract(epoch FROM pg_postmaster_start_time()) * 1000))
     AND ${engineLockFreeSql("$4", "e.engine_id")}`;

/**
 * Takes dead engines other than $1, marking them stopped at $3: those whose heartbeat is older
 * than $2 (hung with their connection open), and those of $5 (seen with a free lock at least
 * FREE_LOCK_GRACE_MS ago) whose lock is still free. A second caller waits for the row lock, then
 * finds stopped_at set and skips the row (one taker each). Rows: the engines taken that still
 * hold attempts (`taken`), and the other engines whose lock is free now (not `taken`).
 */
const TAKE_DEAD_ENGINES = `
  WITH free AS (${LOCK_FREE_ENGINES}),
  d AS (
    UPDATE engines e SET stopped_at = $3
     WHERE e.stopped_at IS NULL AND e.engine_id <> $1
       AND (e.heartbeat_at < $2 OR (e.engine_id = ANY($5::text[]) AND e.engine_id IN (SELECT engine_id FROM free)))
    RETURNING e.engine_id)
  SELECT engine_id, true AS taken FROM d WHERE ${HOLDS_ATTEMPTS}
  UNION ALL
  SELECT engine_id, false AS taken FROM free WHERE engine_id NOT IN (SELECT engine_id FROM d)`;

const RUNS = selectList(RUN_COLUMNS);
const VISITS = selectList(VISIT_COLUMNS);

/** `"a" = excluded."a", ...` / `"a" = u."a", ...` for every mutable column. */
function assignments<T>(columns: Columns<T>, source: string): string {
  return names(columns)
    .filter((c) => !IMMUTABLE_COLUMNS.has(c.slice(1, -1)))
    .map((c) => `${c} = ${source}.${c}`)
    .join(", ");
}

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

/**
 * A whole write batch in one statement, one round trip: each kind of row in a data-modifying
 * CTE of its own, the NOTIFY in the last one (`notified` is read so that it runs). The CTEs
 * touch different rows (a run the batch inserts is not also in its updates, a run it touches
 * only for its revision is in neither), which is what one statement requires: they all see the
 * snapshot from before it.
 */
/** The parts of a write batch, in the statement's (and its parameters') order. */
const WRITE_PARTS = [
  "insertRuns",
  "updateRuns",
  "touchRuns",
  "updateVisits",
  "insertVisits",
  "compensations",
  "events",
  "notify",
] as const satisfies readonly (keyof WriteBatch | "touchRuns")[];

/**
 * The write statement for the parts a batch has (bit i: WRITE_PARTS[i]); the server plans and
 * runs only those. Its parameters: each present part's column arrays, in order.
 */
function writeSql(mask: number): string {
  let next = 1;
  const from = <T>(columns: Columns<T>, options: { ordinality?: boolean } = {}) => {
    const sql = unnestSql(columns, { ...options, firstParam: next });
    next += Object.keys(columns).length;
    return sql;
  };
  const has = (part: (typeof WRITE_PARTS)[number]) => (mask & (1 << WRITE_PARTS.indexOf(part))) !== 0;
  const parts: string[] = [];
  if (has("insertRuns")) {
    parts.push(`new_runs AS (INSERT INTO runs (${names(RUN_COLUMNS).join(", ")}) SELECT * FROM ${from(RUN_COLUMNS)})`);
  }
  const revised: string[] = [];
  if (has("updateRuns")) {
    parts.push(`changed_runs AS (UPDATE runs r SET ${assignments(RUN_UPDATE_COLUMNS, "u")}, revision = r.revision + 1
       FROM ${from(RUN_UPDATE_COLUMNS)} WHERE r.run_id = u.run_id RETURNING r.run_id, r.revision)`);
    revised.push("SELECT * FROM changed_runs");
  }
  if (has("touchRuns")) {
    // Runs whose visits or compensation rows change, not their own row: only their revision.
    parts.push(`touched_runs AS (UPDATE runs r SET revision = r.revision + 1 WHERE r.run_id = ANY($${next++}::text[])
       RETURNING r.run_id, r.revision)`);
    revised.push("SELECT * FROM touched_runs");
  }
  if (has("updateVisits")) {
    parts.push(`changed_visits AS (UPDATE visits v SET ${assignments(VISIT_COLUMNS, "u")} FROM ${from(VISIT_COLUMNS)}
       WHERE v.run_id = u.run_id AND v.node_id = u.node_id AND v.visit = u.visit)`);
  }
  if (has("insertVisits")) {
    parts.push(
      `new_visits AS (INSERT INTO visits (${names(VISIT_COLUMNS).join(", ")}) SELECT * FROM ${from(VISIT_COLUMNS)})`,
    );
  }
  if (has("compensations")) {
    parts.push(`compensations_written AS (INSERT INTO compensations (${names(COMPENSATION_COLUMNS).join(", ")})
       SELECT * FROM ${from(COMPENSATION_COLUMNS)}
       ON CONFLICT (run_id, seq) DO UPDATE SET ${assignments(COMPENSATION_COLUMNS, "excluded")})`);
  }
  const results: string[] = [];
  if (revised.length > 0) {
    results.push(
      `(SELECT json_agg(json_build_array(run_id, revision)) FROM (${revised.join(" UNION ALL ")}) AS t) AS revisions`,
    );
  }
  if (has("events")) {
    // Rows go in in the batch's order, so their seqs grow in that order.
    parts.push(`new_events AS (INSERT INTO events (${names(EVENT_COLUMNS).join(", ")})
       SELECT ${names(EVENT_COLUMNS).join(", ")} FROM ${from(EVENT_COLUMNS, { ordinality: true })}
       ORDER BY u.ordinality RETURNING seq)`);
    results.push("(SELECT array_agg(seq ORDER BY seq) FROM new_events) AS seqs");
  }
  if (has("notify")) {
    parts.push(
      `notified AS (SELECT pg_notify($${next}, t) FROM (SELECT DISTINCT unnest($${next + 1}::text[]) AS t) AS types)`,
    );
    results.push("(SELECT count(*) FROM notified) AS notified");
  }
  return `${parts.length > 0 ? `WITH ${parts.join(",\n")}\n` : ""}SELECT ${results.length > 0 ? results.join(", ") : "1"}`;
}

/** Write statements by mask, built when first needed. */
const writeStatements = new Map<number, { name: string; text: string }>();

function writeStatement(mask: number): { name: string; text: string } {
  let statement = writeStatements.get(mask);
  if (!statement) writeStatements.set(mask, (statement = { name: `skein_write_${mask}`, text: writeSql(mask) }));
  return statement;
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
  compensatingRuns: {
    name: "skein_compensating_runs",
    text: "SELECT run_id FROM runs WHERE status = 'COMPENSATING' ORDER BY created_at LIMIT $1",
  },
  getVisit: {
    name: "skein_get_visit",
    text: `SELECT ${VISITS} FROM visits WHERE run_id = $1 AND node_id = $2 AND visit = $3`,
  },
  // The run's lock, not the visit's: a run is changed only under its lock. MATERIALIZED keeps
  // the LIMIT with the locking scan, so the claim never returns more than asked.
  claimable: {
    name: "skein_claimable",
    text: `WITH c AS MATERIALIZED (
             SELECT v.run_id, v.node_id, v.visit FROM visits v JOIN runs r ON r.run_id = v.run_id
              WHERE v.agent_type = $1 AND v.ready_at IS NOT NULL AND v.ready_at <= $2 AND v.payload IS NOT NULL
                AND NOT (v.concurrency_key IS NOT NULL AND EXISTS (
                  SELECT 1 FROM unnest($4::text[], $5::text[], $6::text[]) AS full_key(workflow_id, node_id, key)
                   WHERE full_key.workflow_id = r.workflow_id AND full_key.node_id = v.node_id
                     AND full_key.key = v.concurrency_key))
              ORDER BY v.ready_at LIMIT $3
                FOR UPDATE OF r SKIP LOCKED)
           SELECT run_id, node_id, visit FROM c`,
  },
  claimableCompensations: {
    name: "skein_claimable_compensations",
    text: `WITH c AS MATERIALIZED (
             SELECT c.run_id FROM compensations c JOIN runs r ON r.run_id = c.run_id
              WHERE c.agent_type = $1 AND c.ready_at IS NOT NULL AND c.ready_at <= $2 AND r.status = 'COMPENSATING'
              ORDER BY c.ready_at LIMIT $3
                FOR UPDATE OF r SKIP LOCKED)
           SELECT run_id FROM c`,
  },
  // Claims that concern a limit, serialised per schema (the NOTIFY channel names it); the
  // count is a statement of its own, so its snapshot is taken once the lock is held.
  limitsLock: {
    name: "skein_limits_lock",
    text: "SELECT pg_advisory_xact_lock($1, hashtext($2))",
  },
  runningByType: {
    name: "skein_running_by_type",
    text: `SELECT agent_type, count(*)::int AS n FROM (
             SELECT agent_type FROM visits WHERE state = 'RUNNING' AND agent_type = ANY($1::text[]) AND run_id <> ALL($2::text[])
             UNION ALL
             SELECT agent_type FROM compensations WHERE state = 'RUNNING' AND agent_type = ANY($1::text[]) AND run_id <> ALL($2::text[])
           ) running GROUP BY agent_type`,
  },
  runningByKey: {
    name: "skein_running_by_key",
    text: `SELECT count(*)::int AS n FROM visits v JOIN runs r ON r.run_id = v.run_id
            WHERE v.state = 'RUNNING' AND v.node_id = $1 AND v.concurrency_key = $2 AND r.workflow_id = $3
              AND v.run_id <> ALL($4::text[])`,
  },
  rateBuckets: {
    name: "skein_rate_buckets",
    text: "SELECT agent_type, tokens, updated_at FROM rate_buckets WHERE agent_type = ANY($1::text[])",
  },
  writeRateBuckets: {
    name: "skein_write_rate_buckets",
    text: `INSERT INTO rate_buckets (agent_type, tokens, updated_at)
             SELECT * FROM unnest($1::text[], $2::float8[], $3::int8[])
           ON CONFLICT (agent_type) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at`,
  },
  unresolved: {
    name: "skein_unresolved",
    text: `SELECT run_id, node_id, visit FROM visits
            WHERE ready_at IS NOT NULL AND payload IS NULL AND ready_at <= $1 ORDER BY ready_at LIMIT $2`,
  },
  expiredAttempts: {
    name: "skein_expired_attempts",
    text: `SELECT run_id, node_id, visit FROM visits
            WHERE state = 'RUNNING' AND lease_expires_at <= $1 ORDER BY lease_expires_at LIMIT $2`,
  },
  lastHeartbeats: {
    name: "skein_last_heartbeats",
    text: "SELECT engine_id, heartbeat_at FROM engines WHERE engine_id = ANY($1::text[])",
  },
  attemptsHeldBy: {
    name: "skein_attempts_held_by",
    text: "SELECT run_id, node_id, visit FROM visits WHERE state = 'RUNNING' AND holder = ANY($1::text[]) LIMIT $2",
  },
  expiredHolds: {
    name: "skein_expired_holds",
    text: `SELECT run_id, node_id, visit FROM (
             SELECT run_id, node_id, visit, lease_expires_at FROM visits WHERE state = 'IN_REVIEW' AND lease_expires_at <= $1
             UNION ALL
             SELECT run_id, node_id, visit, lease_expires_at FROM visits WHERE state = 'WAITING' AND lease_expires_at <= $1) AS held
           ORDER BY lease_expires_at LIMIT $2`,
  },
  childrenToSettle: {
    name: "skein_children_to_settle",
    text: `SELECT c.run_id FROM visits v JOIN runs c ON c.run_id = substr(v.holder, 5)
           WHERE v.holder LIKE 'run:%' AND v.is_current AND c.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED') LIMIT $1`,
  },
  // A workflow node's child is run by the attempt holding it (holder run:<child>); a map item's
  // by its map visit while that runs, held by `map`, at the attempt that started the item.
  orphanedChildren: {
    name: "skein_orphaned_children",
    text: `SELECT c.run_id FROM runs c WHERE c.parent IS NOT NULL AND c.ended_at IS NULL AND NOT EXISTS (
             SELECT 1 FROM visits v WHERE v.run_id = c.parent->>'run_id' AND v.node_id = c.parent->>'node_id'
               AND v.visit = (c.parent->>'visit')::int AND v.state = 'RUNNING'
               AND CASE WHEN c.parent->>'item' IS NULL THEN v.holder = 'run:' || c.run_id
                        ELSE v.holder = 'map' AND v.attempt = (c.parent->>'attempt')::int END)
           ORDER BY c.created_at LIMIT $1`,
  },
  expiredRuns: {
    name: "skein_expired_runs",
    text: "SELECT run_id FROM runs WHERE ended_at IS NULL AND deadline_at <= $1 ORDER BY deadline_at LIMIT $2",
  },
  nextDue: {
    name: "skein_next_due",
    text: `SELECT min(t) AS t FROM (
             SELECT min(ready_at) AS t FROM visits WHERE ready_at IS NOT NULL AND ready_at > $1
             UNION ALL SELECT min(lease_expires_at) FROM visits WHERE state = 'RUNNING'
             UNION ALL SELECT min(lease_expires_at) FROM visits WHERE state = 'IN_REVIEW'
             UNION ALL SELECT min(lease_expires_at) FROM visits WHERE state = 'WAITING'
             UNION ALL SELECT min(deadline_at) FROM runs WHERE ended_at IS NULL
             UNION ALL SELECT min(ready_at) FROM compensations WHERE ready_at IS NOT NULL AND ready_at > $1
             UNION ALL SELECT min(lease_expires_at) FROM compensations WHERE state = 'RUNNING'
             UNION ALL SELECT min(next_fire_at) FROM schedules WHERE NOT paused AND next_fire_at IS NOT NULL) AS due`,
  },
} as const;

/** Last one wins when a batch names the same row twice (one statement may not touch a row twice). */
function distinct<T>(rows: Iterable<T>, key: (row: T) => string): T[] {
  const byKey = new Map<string, T>();
  for (const row of rows) byKey.set(key(row), row);
  return [...byKey.values()];
}

const visitKey = (v: Visit) => `${v.run_id}\0${v.node_id}\0${v.visit}`;

export class PostgresTx implements StoreTx {
  private ended = false;
  private readonly events: InboxTx = postgresInbox((config, values) => this.q(config, values));
  readonly waitingEvents: InboxTx["waitingEvents"] = (runId, name, limit) =>
    this.events.waitingEvents(runId, name, limit);
  readonly inboxSize: InboxTx["inboxSize"] = (runId) => this.events.inboxSize(runId);
  readonly keyedEvents: InboxTx["keyedEvents"] = (name, key, since) => this.events.keyedEvents(name, key, since);
  readonly inboxByIdempotencyKey: InboxTx["inboxByIdempotencyKey"] = (scope, key) =>
    this.events.inboxByIdempotencyKey(scope, key);
  readonly writeInbox: InboxTx["writeInbox"] = (rows) => this.events.writeInbox(rows);
  readonly pruneKeyed: InboxTx["pruneKeyed"] = (before) => this.events.pruneKeyed(before);
  private readonly items: MapTx = postgresMapItems((config, values) => this.q(config, values));
  readonly insertMapItems: MapTx["insertMapItems"] = (key, items, now, offset) =>
    this.items.insertMapItems(key, items, now, offset);
  readonly pendingMapItems: MapTx["pendingMapItems"] = (key, from, limit) =>
    this.items.pendingMapItems(key, from, limit);
  readonly updateMapItems: MapTx["updateMapItems"] = (updates) => this.items.updateMapItems(updates);
  readonly failedMapItems: MapTx["failedMapItems"] = (key, limit) => this.items.failedMapItems(key, limit);
  readonly runningMapItems: MapTx["runningMapItems"] = (key, limit) => this.items.runningMapItems(key, limit);
  readonly heldMaps: MapTx["heldMaps"] = (limit) => this.items.heldMaps(limit);
  readonly newestSucceededMapItem: MapTx["newestSucceededMapItem"] = (key) => this.items.newestSucceededMapItem(key);
  readonly mapOutput: MapTx["mapOutput"] = (key, maxBytes) => this.items.mapOutput(key, maxBytes);
  readonly mapItemsToSettle: MapTx["mapItemsToSettle"] = (limit) => this.items.mapItemsToSettle(limit);
  private readonly pruning: PruneTx = postgresPrune((config, values) => this.q(config, values));
  readonly pruneRuns: PruneTx["pruneRuns"] = (cut, limit) => this.pruning.pruneRuns(cut, limit);
  readonly countPrunable: PruneTx["countPrunable"] = (cut) => this.pruning.countPrunable(cut);
  private readonly schedules: ScheduleTx = postgresSchedules((config, values) => this.q(config, values));
  readonly lockSchedule: ScheduleTx["lockSchedule"] = (id) => this.schedules.lockSchedule(id);
  readonly writeSchedule: ScheduleTx["writeSchedule"] = (schedule) => this.schedules.writeSchedule(schedule);
  readonly deleteSchedule: ScheduleTx["deleteSchedule"] = (id) => this.schedules.deleteSchedule(id);
  readonly dueSchedules: ScheduleTx["dueSchedules"] = (now, limit) => this.schedules.dueSchedules(now, limit);
  readonly unfinishedScheduleRuns: ScheduleTx["unfinishedScheduleRuns"] = (id, limit) =>
    this.schedules.unfinishedScheduleRuns(id, limit);
  readonly advanceSchedule: ScheduleTx["advanceSchedule"] = (id, to) => this.schedules.advanceSchedule(id, to);

  constructor(
    private readonly session: Session,
    /** The transaction's time: the database's, read at BEGIN, or the injected clock's. */
    private readonly time: () => number,
    /** The NOTIFY channel of the store's schema. */
    private readonly channel: string,
    /** The store's schema (it names the engines' liveness locks). */
    private readonly schema: string,
    /**
     * Other engines seen with their lock free, since when (the store's, kept between
     * transactions); null while the store's own listener is down: no engine is judged by its lock.
     */
    private readonly lockFree: Map<string, number> | null,
    /** The runs locked as the transaction began, read in the same round trip. */
    private readonly locked: ReadonlyMap<string, RunRead> = new Map(),
    /** Those of them locked by `tryLock` (the ones no other transaction held). */
    private readonly tried: readonly RunRead[] = [],
  ) {}

  /** Called when the transaction ends: a tx kept past its transaction must not run statements on a reused connection. */
  end(): void {
    this.ended = true;
  }

  private async q<R extends object>(config: { name?: string; text: string }, values: unknown[]): Promise<R[]> {
    if (this.ended) throw new Error("skein: a store transaction was used after it ended");
    const result = await this.session.query<R & Record<string, unknown>>({ ...config, values });
    return result.rows;
  }

  async now(): Promise<number> {
    return this.time();
  }

  async write(batch: WriteBatch, options: { last?: boolean } = {}): Promise<Written> {
    const inserted = new Set(batch.insertRuns.map((r) => r.run_id));
    const updateRuns = distinct(batch.updateRuns, (r) => r.run_id).filter((r) => !inserted.has(r.run_id));
    const updated = new Set(updateRuns.map((r) => r.run_id));
    const touched = new Set(
      [...batch.updateVisits, ...batch.insertVisits, ...batch.compensations]
        .map((row) => row.run_id)
        .filter((id) => !inserted.has(id) && !updated.has(id)),
    );
    const rows = {
      insertRuns: columnArrays(RUN_COLUMNS, batch.insertRuns),
      updateRuns: columnArrays(RUN_UPDATE_COLUMNS, updateRuns),
      touchRuns: [[...touched]],
      updateVisits: columnArrays(VISIT_COLUMNS, distinct(batch.updateVisits, visitKey)),
      insertVisits: columnArrays(VISIT_COLUMNS, batch.insertVisits),
      compensations: columnArrays(
        COMPENSATION_COLUMNS,
        distinct(batch.compensations, (c) => `${c.run_id}\0${c.seq}`),
      ),
      events: columnArrays(EVENT_COLUMNS, batch.events),
      notify: batch.notify.length > 0 ? [this.channel, batch.notify.map(noticePayload)] : [],
    };
    let mask = 0;
    const values: unknown[] = [];
    WRITE_PARTS.forEach((part, i) => {
      const arrays = rows[part];
      // A part is present when it has rows: its first column array is not empty.
      if (part === "notify" ? arrays.length === 0 : (arrays[0] as unknown[]).length === 0) return;
      mask |= 1 << i;
      values.push(...arrays);
    });
    if (mask === 0) return { events: [], revisions: new Map() };
    type Row = { seqs: (number | string)[] | null; revisions: [string, number][] | null };
    let row: Row | undefined;
    if (options.last) {
      // Nothing follows: the COMMIT goes with the write, one round trip less for every step.
      if (this.ended) throw new Error("skein: a store transaction was used after it ended");
      this.ended = true;
      row = (await this.session.commitWith({ ...writeStatement(mask), values })).rows[0] as Row | undefined;
    } else {
      [row] = await this.q<Row>(writeStatement(mask), values);
    }
    // RETURNING's order is not promised; the seqs, drawn in insertion order, are.
    const seqs = row?.seqs ?? [];
    return {
      events: batch.events.map((e, i) => ({ ...e, seq: Number(seqs[i]) })),
      revisions: new Map((row?.revisions ?? []).map(([id, revision]) => [id, Number(revision)])),
    };
  }

  /**
   * Takes engines dead by their heartbeat, or by a lock seen free for FREE_LOCK_GRACE_MS: an
   * engine whose listener's connection was cut (a failover, pg_terminate_backend) is alive and
   * takes its lock back within that time, and its attempts must not run twice. The engines
   * seen free are kept by the store between sweeps (`lockFree`, by the transaction's time);
   * nextDue asks for a sweep when the first of them has been free long enough.
   */
  async takeDeadEngines(self: string, staleBefore: number): Promise<string[]> {
    const now = this.time();
    const lockFree = this.lockFree;
    const confirmed = [...(lockFree ?? [])].filter(([, since]) => since <= now - FREE_LOCK_GRACE_MS).map(([id]) => id);
    const rows = await this.q<{ engine_id: string; taken: boolean }>(
      { name: "skein_take_dead_engines", text: TAKE_DEAD_ENGINES },
      [self, staleBefore, now, this.schema, confirmed],
    );
    if (lockFree) {
      const free = new Set(rows.filter((r) => !r.taken).map((r) => r.engine_id));
      for (const id of lockFree.keys()) if (!free.has(id)) lockFree.delete(id);
      for (const id of free) if (!lockFree.has(id)) lockFree.set(id, now);
    }
    return rows.filter((r) => r.taken).map((r) => r.engine_id);
  }

  async runByIdempotencyKey(key: string): Promise<Run | null> {
    const [row] = await this.q<DbRun>(SQL.runByKey, [key]);
    return row ? runFromDb(row) : null;
  }

  async runsByIdempotencyKeys(keys: string[]): Promise<Run[]> {
    return (await this.q<DbRun>(SQL.runsByKeys, [keys])).map(runFromDb);
  }

  async raiseTreeRuns(rootRunId: string, runs: number, limit: number): Promise<number | null> {
    const [row] = await this.q<{ runs: number }>(SQL.raiseTreeRuns, [rootRunId, runs, limit]);
    return row?.runs ?? null;
  }

  async runBudgets(runIds: string[]): Promise<Pick<Run, "run_id" | "usage" | "budget">[]> {
    return this.q<Pick<Run, "run_id" | "usage" | "budget">>(SQL.runBudgets, [runIds]);
  }

  async insertRuns(runs: Run[]): Promise<void> {
    await this.write({ ...EMPTY_BATCH, insertRuns: runs });
  }

  async updateRuns(runs: Run[]): Promise<void> {
    await this.write({ ...EMPTY_BATCH, updateRuns: runs });
  }

  async loadRuns(runIds: string[], known?: KnownRevisions): Promise<RunRead[]> {
    // Runs locked as the transaction began were read in the same round trip.
    const missing = runIds.filter((id) => !this.locked.has(id));
    const rows = missing.length > 0 ? await this.q<LoadedRunRow>(SQL.loadRuns, loadRunsValues(missing, known)) : [];
    const loaded = new Map(rows.map((row) => [row.run_id, runRead(row)]));
    return runIds.flatMap((id) => {
      const run = this.locked.get(id) ?? loaded.get(id);
      return run ? [run] : [];
    });
  }

  async tryLocked(): Promise<RunRead[]> {
    return [...this.tried];
  }

  async loadRun(runId: string, options: { skipLocked?: boolean; known?: number } = {}): Promise<RunRead | null> {
    const [row] = await this.q<DbRun & { revision: number }>(options.skipLocked ? SQL.lockRunSkip : SQL.lockRun, [
      runId,
    ]);
    if (!row) return null;
    const { revision, ...run } = row;
    if (revision === options.known) return { run_id: runId, unchanged: true };
    const [rest] = await this.q<{ visits: DbVisit[]; compensations: DbCompensation[] }>(SQL.runRows, [runId]);
    return {
      run: runFromDb(run),
      revision,
      visits: (rest?.visits ?? []).map(visitFromDb),
      compensations: (rest?.compensations ?? []).map(compensationFromDb),
    };
  }

  async runHistory(runId: string): Promise<{ visit: Visit; successSeq: number | null }[]> {
    const rows = await this.q<DbVisit & { success_seq: number | null }>(SQL.runHistory, [runId]);
    return rows.map(({ success_seq, ...row }) => ({ visit: visitFromDb(row), successSeq: success_seq }));
  }

  async writeCompensations(rows: Iterable<Compensation>): Promise<void> {
    await this.write({ ...EMPTY_BATCH, compensations: [...rows] });
  }

  async compensatingRuns(limit: number): Promise<string[]> {
    const rows = await this.q<{ run_id: string }>(SQL.compensatingRuns, [limit]);
    return rows.map((r) => r.run_id);
  }

  async getVisit(key: VisitKey): Promise<Visit | null> {
    const [row] = await this.q<DbVisit>(SQL.getVisit, [key.run_id, key.node_id, key.visit]);
    return row ? visitFromDb(row) : null;
  }

  async insertVisits(visits: Iterable<Visit>): Promise<void> {
    await this.write({ ...EMPTY_BATCH, insertVisits: [...visits] });
  }

  async updateVisits(visits: Iterable<Visit>): Promise<void> {
    await this.write({ ...EMPTY_BATCH, updateVisits: [...visits] });
  }

  async insertEvents(events: NewEvent[]): Promise<RunEvent[]> {
    return (await this.write({ ...EMPTY_BATCH, events })).events;
  }

  async claimable(
    agentType: string,
    now: number,
    limit: number,
    skip: readonly ConcurrencyGroup[] = [],
  ): Promise<VisitKey[]> {
    const skipped = [skip.map((g) => g.workflow_id), skip.map((g) => g.node_id), skip.map((g) => g.key)];
    return this.q<VisitKey>(SQL.claimable, [agentType, now, limit, ...skipped]);
  }

  async claimableCompensations(agentType: string, now: number, limit: number): Promise<string[]> {
    const rows = await this.q<{ run_id: string }>(SQL.claimableCompensations, [agentType, now, limit]);
    return rows.map((r) => r.run_id);
  }

  async countRunningForLimits(agentTypes: string[], except: string[]): Promise<Map<string, number>> {
    // Sent together (pipeline mode): the count runs once the lock is granted.
    const [, rows] = await Promise.all([
      this.q(SQL.limitsLock, [LIMITS_LOCK, this.channel]),
      this.q<{ agent_type: string; n: number }>(SQL.runningByType, [agentTypes, except]),
    ]);
    return new Map(rows.map((r) => [r.agent_type, r.n]));
  }

  async countRunningByKey(workflowId: string, nodeId: string, key: string, except: string[]): Promise<number> {
    const [, rows] = await Promise.all([
      this.q(SQL.limitsLock, [LIMITS_LOCK, this.channel]),
      this.q<{ n: number }>(SQL.runningByKey, [nodeId, key, workflowId, except]),
    ]);
    return rows[0]?.n ?? 0;
  }

  async rateBuckets(agentTypes: string[]): Promise<Map<string, RateBucket>> {
    const [, rows] = await Promise.all([
      this.q(SQL.limitsLock, [LIMITS_LOCK, this.channel]),
      this.q<{ agent_type: string; tokens: number; updated_at: string | number }>(SQL.rateBuckets, [agentTypes]),
    ]);
    return new Map(rows.map((r) => [r.agent_type, { tokens: r.tokens, updated_at: Number(r.updated_at) }]));
  }

  async writeRateBuckets(buckets: Map<string, RateBucket>): Promise<void> {
    const rows = [...buckets];
    await this.q(SQL.writeRateBuckets, [
      rows.map(([type]) => type),
      rows.map(([, b]) => b.tokens),
      rows.map(([, b]) => b.updated_at),
    ]);
  }

  async unresolved(now: number, limit: number): Promise<VisitKey[]> {
    return this.q<VisitKey>(SQL.unresolved, [now, limit]);
  }

  async expiredAttempts(now: number, limit: number): Promise<VisitKey[]> {
    return this.q<VisitKey>(SQL.expiredAttempts, [now, limit]);
  }

  async lastHeartbeats(engineIds: string[]): Promise<Map<string, number>> {
    const rows = await this.q<{ engine_id: string; heartbeat_at: number }>(SQL.lastHeartbeats, [engineIds]);
    return new Map(rows.map((r) => [r.engine_id, r.heartbeat_at]));
  }

  async attemptsHeldBy(holders: string[], limit: number): Promise<VisitKey[]> {
    if (holders.length === 0) return [];
    return this.q<VisitKey>(SQL.attemptsHeldBy, [holders, limit]);
  }

  async expiredHolds(now: number, limit: number): Promise<VisitKey[]> {
    return this.q<VisitKey>(SQL.expiredHolds, [now, limit]);
  }

  async childrenToSettle(limit: number): Promise<string[]> {
    const rows = await this.q<{ run_id: string }>(SQL.childrenToSettle, [limit]);
    return rows.map((r) => r.run_id);
  }

  async orphanedChildren(limit: number): Promise<string[]> {
    const rows = await this.q<{ run_id: string }>(SQL.orphanedChildren, [limit]);
    return rows.map((r) => r.run_id);
  }

  async expiredRuns(now: number, limit: number): Promise<string[]> {
    const rows = await this.q<{ run_id: string }>(SQL.expiredRuns, [now, limit]);
    return rows.map((r) => r.run_id);
  }

  async nextDue(now: number): Promise<number | null> {
    const [row] = await this.q<{ t: number | null }>(SQL.nextDue, [now]);
    const due = row?.t ?? null;
    // An engine seen with a free lock is looked at again once its grace has passed.
    const suspects = [...(this.lockFree?.values() ?? [])].map((since) => since + FREE_LOCK_GRACE_MS);
    if (suspects.length === 0) return due;
    const suspect = Math.min(...suspects);
    return due === null ? suspect : Math.min(due, suspect);
  }
}
