/**
 * Runs by a part of their id (Store.findRunsByIdPart), for abbreviated ids in the CLI. A prefix
 * is a range of the primary key's index (ids compare as bytes: char(65535) is above every
 * character of an id); a suffix has no index (ids are UUIDv7: the random part is the tail), so
 * it scans the primary key's index, which holds only the ids, and reads the few rows it found.
 */
export const RUNS_BY_ID_PREFIX = `SELECT * FROM runs WHERE run_id >= @part AND run_id < @part || char(65535)
  ORDER BY run_id LIMIT @limit`;

export const RUNS_BY_ID_SUFFIX = `SELECT * FROM runs WHERE run_id IN (
    SELECT run_id FROM runs
    WHERE length(run_id) >= length(@part) AND substr(run_id, -length(@part)) = @part LIMIT @limit)
  ORDER BY run_id`;
