-- Skein schema v15 (PostgreSQL): bounded dynamic work, as SQLite's 015_bounded_work.sql.
-- How many runs each root run's tree holds (the root, its child runs and map item runs, at any
-- depth), raised by the transaction that inserts them: the row is locked until that commit, so
-- two engines starting runs of one tree take turns and the tree never passes maxRunsPerTree.
-- A counter, not a count: counting a tree of 100,000 rows at every start would cost what the
-- limit is there to bound. Its own table, not a column of the root's row: starting runs of a
-- tree never waits for the lock of a root run another engine is busy with.
CREATE TABLE run_trees (
  root_run_id  text COLLATE "C" PRIMARY KEY,
  runs         integer NOT NULL
);
-- A run's inbox is looked up by event name (the oldest waiting one of that name) and its size
-- read from the index alone (count and bytes of the events no wait took yet), never loaded whole.
ALTER TABLE inbox ADD COLUMN size integer;
CREATE INDEX inbox_waiting ON inbox (run_id, name, seq) INCLUDE (size) WHERE delivered_at IS NULL AND run_id IS NOT NULL;
