import { PAUSED_RUNS } from "./claims.js";

/**
 * The metrics gauges' statements on SQLite (Store.readGauges), at the time bound as `@now`.
 * Ready visits are the claim query's (ready by now, payload resolved), and so are ready map items
 * of an agent, grouped by type and priority: the partial indexes visits_ready and map_items_ready
 * hold only ready rows, so a scrape reads the queue, never the history. A paused run's are not in the queue.
 */
export const READY_BY_AGENT_TYPE = `SELECT agent_type, priority, count(*) AS visits, @now - min(ready_at) AS oldest_age_ms FROM (
    SELECT agent_type, priority, ready_at FROM visits WHERE ready_at IS NOT NULL AND ready_at <= @now AND payload IS NOT NULL
      AND run_id NOT IN (${PAUSED_RUNS})
    UNION ALL
    SELECT agent_type, priority, ready_at FROM map_items WHERE ready_at IS NOT NULL AND ready_at <= @now AND agent_type IS NOT NULL
      AND run_id NOT IN (${PAUSED_RUNS})
  ) GROUP BY agent_type, priority ORDER BY agent_type, priority`;

/**
 * The ready work of one agent type claimed before work of priority `@priority` (Store.readyAhead):
 * a more urgent priority, read from the same indexes (by type, then priority).
 */
export const READY_AHEAD = `SELECT
  (SELECT count(*) FROM visits INDEXED BY visits_ready WHERE agent_type = @type AND ready_at IS NOT NULL
     AND priority < @priority AND ready_at <= @now AND payload IS NOT NULL AND run_id NOT IN (${PAUSED_RUNS}))
  + (SELECT count(*) FROM map_items INDEXED BY map_items_ready WHERE agent_type = @type AND ready_at IS NOT NULL
     AND priority < @priority AND ready_at <= @now AND run_id NOT IN (${PAUSED_RUNS})) AS ahead`;

/** The runs QUEUED (DESIGN §17) by why: behind an active run of their key, or in a debounce window (runs_by_key holds them all). */
export const QUEUED_BY_REASON = `SELECT json_extract(queued, '$.reason') AS reason, count(*) AS runs
  FROM runs INDEXED BY runs_by_key WHERE key IS NOT NULL AND ended_at IS NULL AND queued IS NOT NULL
  GROUP BY 1 ORDER BY 1`;

/** Reviews, waits and paused runs by their partial indexes (visits_in_review, visits_waiting, runs_paused); the engine by its key. */
export const PENDING_AND_HEARTBEAT = `SELECT
  (SELECT count(*) FROM visits WHERE state = 'IN_REVIEW') AS pending_reviews,
  (SELECT count(*) FROM visits WHERE state = 'WAITING') AS pending_waits,
  (SELECT count(*) FROM (${PAUSED_RUNS})) AS paused_runs,
  (SELECT @now - heartbeat_at FROM engines WHERE engine_id = @engineId) AS heartbeat_age_ms`;
