/**
 * The metrics gauges' statements on SQLite (Store.readGauges), at the time bound as `@now`.
 * Ready visits are the claim query's (ready by now, payload resolved), grouped: the partial
 * index visits_ready holds only ready rows, so a scrape reads the queue, never the history.
 */
export const READY_BY_AGENT_TYPE = `SELECT agent_type, count(*) AS visits, @now - min(ready_at) AS oldest_age_ms FROM visits
  WHERE ready_at IS NOT NULL AND ready_at <= @now AND payload IS NOT NULL GROUP BY agent_type ORDER BY agent_type`;

/** Reviews and waits by their partial indexes (visits_in_review, visits_waiting); the engine by its key. */
export const PENDING_AND_HEARTBEAT = `SELECT
  (SELECT count(*) FROM visits WHERE state = 'IN_REVIEW') AS pending_reviews,
  (SELECT count(*) FROM visits WHERE state = 'WAITING') AS pending_waits,
  (SELECT @now - heartbeat_at FROM engines WHERE engine_id = @engineId) AS heartbeat_age_ms`;
