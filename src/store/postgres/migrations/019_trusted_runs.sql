-- Skein schema v19 (PostgreSQL only; SQLite has one writer and no round trips to save): one
-- round trip for a step (issue 35). A transaction whose runs the engine holds in memory sends
-- its BEGIN, this lock-and-check, its writes and its COMMIT together. The check locks the runs
-- (in run_id order, as every transaction does: none deadlock), and when one of them is gone or
-- is no longer at the revision the engine holds, or the engine's estimate of the database's
-- clock is off, it raises SK409: everything sent after it fails, COMMIT ends the transaction
-- with nothing written, and the engine reads the runs and the clock and tries again.
CREATE OR REPLACE FUNCTION skein_lock_trusted(ids text[], revisions bigint[], estimate bigint, tolerance bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  db_now bigint;
  stale text;
BEGIN
  PERFORM 1 FROM runs WHERE run_id = ANY(ids) ORDER BY run_id FOR UPDATE;
  -- A statement of its own: its snapshot is taken after the locks, so it sees what the
  -- transactions it waited for committed.
  SELECT k.run_id INTO stale FROM unnest(ids, revisions) AS k(run_id, revision)
    WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = k.run_id AND r.revision = k.revision)
    LIMIT 1;
  IF stale IS NOT NULL THEN
    RAISE EXCEPTION 'run % changed since this engine read it', stale USING ERRCODE = 'SK409';
  END IF;
  db_now := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
  IF estimate IS NOT NULL AND abs(db_now - estimate) > tolerance THEN
    RAISE EXCEPTION 'the engine''s estimate of the database''s clock is % ms off', db_now - estimate
      USING ERRCODE = 'SK409';
  END IF;
  RETURN db_now;
END
$$;
