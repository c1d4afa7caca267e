-- Skein schema v15: bounded dynamic work (DESIGN §13.1).
-- How many runs each root run's tree holds (the root, its child runs and map item runs, at any
-- depth), raised by the transaction that inserts them, so a tree never passes maxRunsPerTree
-- whatever number of engines start its runs. A counter, not a count: counting a tree of
-- 100,000 rows at every start would cost what the limit is there to bound. A root whose tree
-- never started a child has no row (its tree is the root alone).
CREATE TABLE run_trees (
  root_run_id  TEXT PRIMARY KEY,
  runs         INTEGER NOT NULL
);
-- A run's inbox is looked up by event name (the oldest waiting one of that name) and its size
-- read from the index alone (count and bytes of the events no wait took yet), never loaded whole.
ALTER TABLE inbox ADD COLUMN size INTEGER;
CREATE INDEX inbox_waiting ON inbox (run_id, name, seq, size) WHERE delivered_at IS NULL AND run_id IS NOT NULL;
