/**
 * The engines table on PostgreSQL: many engines share the database, each alive while its
 * heartbeat is fresh and its liveness lock (engine-lock.ts) held; a dead one is taken over by
 * exactly one other, which recovers its attempts.
 */
import { engineLockFreeSql, FREE_LOCK_GRACE_MS } from "./engine-lock.js";
import { DB_NOW, type TxQuery } from "./tx-query.js";

/**
 * The dead engine `d` holds an attempt it must give back: a running visit, compensation or map
 * item, or a cancelled visit of a compensating run (compensation waits for it). The SQLite store's four cases.
 */
export const HOLDS_ATTEMPTS = `
  EXISTS (SELECT 1 FROM visits v WHERE v.state = 'RUNNING' AND v.holder = d.engine_id)
  OR EXISTS (SELECT 1 FROM compensations c WHERE c.state = 'RUNNING' AND c.holder = d.engine_id)
  OR EXISTS (SELECT 1 FROM map_items m WHERE m.state = 'RUNNING' AND m.agent_type IS NOT NULL AND m.holder = d.engine_id)
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

/** The engine's own row, outside transactions (PostgresStore: register, heartbeat, stop). */
export const ENGINE_SQL = {
  // $4: the clock's time, or null for the database's. $5: how long a heartbeat stays fresh.
  // Engines found dead by their free lock are left to the sweeps, which give a lock its grace.
  registerEngine: `
    WITH t AS (SELECT coalesce($4::bigint, ${DB_NOW}) AS now),
    me AS (INSERT INTO engines (engine_id, host, pid, started_at, heartbeat_at, served_types)
           SELECT $1, $2, $3, t.now, t.now, $6::json FROM t),
    d AS (UPDATE engines e SET stopped_at = t.now FROM t
           WHERE e.stopped_at IS NULL AND e.heartbeat_at < t.now - $5::bigint AND e.engine_id <> $1
          RETURNING e.engine_id)
    SELECT engine_id FROM d WHERE ${HOLDS_ATTEMPTS}`,
  // A heartbeat also revives an engine another one took for dead while it was merely slow: if
  // it dies later, its newer attempts are recovered as soon as its heartbeat goes stale again.
  heartbeat: `UPDATE engines SET heartbeat_at = coalesce($2::bigint, ${DB_NOW}), stopped_at = NULL,
                               served_types = coalesce($3::json, served_types)
              WHERE engine_id = $1`,
  servedTypes: `SELECT DISTINCT json_array_elements_text(served_types) AS agent_type FROM engines
                WHERE stopped_at IS NULL AND heartbeat_at >= coalesce($1::bigint, ${DB_NOW}) - $2::bigint
                  AND served_types IS NOT NULL`,
  // An engine that stops while attempts it held still run (closed before they returned) is
  // not stopped but made stale at once, so the next engine to look takes it and recovers them.
  stopEngine: `
    WITH d AS (SELECT $1::text AS engine_id),
    h AS (SELECT ${HOLDS_ATTEMPTS} AS held FROM d)
    UPDATE engines e SET stopped_at = CASE WHEN h.held THEN NULL ELSE coalesce($2::bigint, ${DB_NOW}) END,
                         heartbeat_at = CASE WHEN h.held THEN 0 ELSE e.heartbeat_at END
      FROM h WHERE e.engine_id = $1`,
} as const;

const LAST_HEARTBEATS = {
  name: "skein_last_heartbeats",
  text: "SELECT engine_id, heartbeat_at FROM engines WHERE engine_id = ANY($1::text[])",
};

/** What a transaction judges other engines by: its time, the schema (naming their locks), what the store saw free. */
export interface EngineWatch {
  time: () => number;
  schema: string;
  /** Other engines seen with their lock free, since when (kept by the store); null while its listener is down. */
  lockFree: Map<string, number> | null;
}

/**
 * Takes engines dead by their heartbeat, or by a lock seen free for FREE_LOCK_GRACE_MS: an
 * engine whose listener's connection was cut (a failover, pg_terminate_backend) is alive and
 * takes its lock back within that time, and its attempts must not run twice. The engines
 * seen free are kept by the store between sweeps (`lockFree`, by the transaction's time);
 * nextDue asks for a sweep when the first of them has been free long enough.
 */
export async function takeDeadEngines(
  tx: TxQuery,
  watch: EngineWatch,
  self: string,
  staleBefore: number,
): Promise<string[]> {
  const now = watch.time();
  const lockFree = watch.lockFree;
  const confirmed = [...(lockFree ?? [])].filter(([, since]) => since <= now - FREE_LOCK_GRACE_MS).map(([id]) => id);
  const rows = await tx.q<{ engine_id: string; taken: boolean }>(
    { name: "skein_take_dead_engines", text: TAKE_DEAD_ENGINES },
    [self, staleBefore, now, watch.schema, confirmed],
  );
  if (lockFree) {
    const free = new Set(rows.filter((r) => !r.taken).map((r) => r.engine_id));
    for (const id of lockFree.keys()) if (!free.has(id)) lockFree.delete(id);
    for (const id of free) if (!lockFree.has(id)) lockFree.set(id, now);
  }
  return rows.filter((r) => r.taken).map((r) => r.engine_id);
}

export async function lastHeartbeats(tx: TxQuery, engineIds: string[]): Promise<Map<string, number>> {
  const rows = await tx.q<{ engine_id: string; heartbeat_at: number }>(LAST_HEARTBEATS, [engineIds]);
  return new Map(rows.map((r) => [r.engine_id, r.heartbeat_at]));
}
