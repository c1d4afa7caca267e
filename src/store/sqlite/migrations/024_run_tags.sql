-- Skein schema v24: run tags (DESIGN §16). A run carries at most 16 name/value pairs (startRun's,
-- inherited by its child runs), kept whole in `runs.tags` (JSON) for reading the run, and one row
-- each in `run_tags` for finding runs by them: listRuns' tag filter is a lookup of (name, value),
-- whatever the name. Runs written before have none.
ALTER TABLE runs ADD COLUMN tags TEXT NOT NULL DEFAULT '{}';
CREATE TABLE run_tags (
  name   TEXT NOT NULL,
  value  TEXT NOT NULL,
  run_id TEXT NOT NULL,
  PRIMARY KEY (name, value, run_id)
) WITHOUT ROWID;
-- Pruning deletes a run's tags with it.
CREATE INDEX run_tags_by_run ON run_tags (run_id);
