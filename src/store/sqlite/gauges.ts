import { PAUSED_RUNS } from "./claims.js";

/**
 * The metrics gauges' statements on SQLite (Store.readGauges), at the time bound as `@now`.
 * Ready visits are the claim query's (ready by now, payload resolved), and so are ready map items
 * of an agent, grouped: the partial indexes visits_ready and map_items_ready hold only ready
 * rows, so a scrape reads the queue, never the history. A paused run's are not in the queue.
 */
export const READY_BY_AGENT_TYPE = `SELECT agent_type, count(*) AS visits, @now - min(ready_at) AS oldest_age_ms FROM (
    SELECT agent_type, ready_at FROM visits WHERE ready_at IS NOT NULL AND ready_at <= @now AND payload IS NOT NULL
      AND run_id NOT IN (${PAUSED_RUNS})
    UNION ALL
    SELECT agent_type, ready_at FROM map_items WHERE ready_at IS NOT NULL AND ready_at <= @now AND agent_type IS NOT NULL
      AND run_id NOT IN (${PAUSED_RUNS})
  ) GROUP BY agent_type ORDER BY agent_type`;

/** Reviews, waits and paused runs by their partial indexes (visits_in_review, visits_waiting, runs_paused); the engine by its key. */
export const PENDING_AND_HEARTBEAT = `SELECT
  (SELECT count(*) FROM visits WHERE state = 'IN_REVIEW') AS pending_reviews,
  (SELECT count(*) FROM visits WHERE state = 'WAITING') AS pending_waits,
  (SELECT count(*) FROM (${PAUSED_RUNS})) AS paused_runs,
  (SELECT @now - heartbeat_at FROM engines WHERE engine_id = @engineId) AS heartbeat_age_ms`;
