/**
 * The metrics gauges' statements on PostgreSQL (Store.readGauges): the SQLite ones, at `$1`
 * when the store was given a clock, else at the database's time (`dbNow`, the clock its due
 * times are written in). Ready visits are the claim query's (ready by now, payload resolved), and
 * so are ready map items of an agent, grouped, by the partial indexes visits_ready and map_items_ready.
 */
/** The paused runs (DESIGN §16), whose ready visits are not in the queue: migration 025's partial index. */
const PAUSED = "SELECT run_id FROM runs WHERE paused IS NOT NULL";

export function gaugeStatements(dbNow: string) {
  const now = `(SELECT coalesce($1::bigint, ${dbNow}) AS now)`;
  return {
    ready: {
      name: "skein_gauges_ready",
      text: `SELECT agent_type, priority, count(*) AS visits, t.now - min(ready_at) AS oldest_age_ms FROM (
                SELECT agent_type, priority, ready_at FROM visits, ${now} t
                 WHERE ready_at IS NOT NULL AND ready_at <= t.now AND payload IS NOT NULL AND run_id NOT IN (${PAUSED})
                UNION ALL
                SELECT agent_type, priority, ready_at FROM map_items, ${now} t
                 WHERE ready_at IS NOT NULL AND ready_at <= t.now AND agent_type IS NOT NULL AND run_id NOT IN (${PAUSED})
              ) ready, ${now} t
              GROUP BY agent_type, priority, t.now ORDER BY agent_type, priority`,
    },
    // The ready work of type $2 claimed before priority $3 (Store.readyAhead), by the same indexes.
    ahead: {
      name: "skein_ready_ahead",
      text: `SELECT
        (SELECT count(*) FROM visits, ${now} t WHERE agent_type = $2 AND ready_at IS NOT NULL AND priority < $3
           AND ready_at <= t.now AND payload IS NOT NULL AND run_id NOT IN (${PAUSED}))
        + (SELECT count(*) FROM map_items, ${now} t WHERE agent_type = $2 AND ready_at IS NOT NULL AND priority < $3
           AND ready_at <= t.now AND run_id NOT IN (${PAUSED})) AS ahead`,
    },
    // QUEUED runs by why (runs_by_key holds them all).
    queued: {
      name: "skein_gauges_queued",
      text: `SELECT queued->>'reason' AS reason, count(*) AS runs FROM runs
              WHERE key IS NOT NULL AND ended_at IS NULL AND queued IS NOT NULL GROUP BY 1 ORDER BY 1`,
    },
    // Reviews, waits and paused runs by their partial indexes (visits_in_review, visits_waiting, runs_paused); the engine by its key.
    pending: {
      name: "skein_gauges_pending",
      text: `SELECT
        (SELECT count(*) FROM visits WHERE state = 'IN_REVIEW') AS pending_reviews,
        (SELECT count(*) FROM visits WHERE state = 'WAITING') AS pending_waits,
        (SELECT count(*)::int FROM runs WHERE paused IS NOT NULL) AS paused_runs,
        (SELECT t.now - heartbeat_at FROM engines, ${now} t WHERE engine_id = $2) AS heartbeat_age_ms`,
    },
  };
}
