-- Skein schema v6: the `map` node (DESIGN §11.1). A map visit keeps its item counts on the visit
-- (MapCounts as JSON, NULL for other kinds), and its items as rows: one per item of the list,
-- never a list held in memory, each run as a child run of the visit's attempt.
ALTER TABLE visits ADD COLUMN items TEXT;
-- No foreign keys: a 10,000-item list would pay 10,000 key checks (a third of its insert on
-- PostgreSQL), and items are written only for a visit of a run the transaction holds, maybe
-- before that visit's own row in the same transaction.
CREATE TABLE map_items (
  run_id        TEXT    NOT NULL,
  node_id       TEXT    NOT NULL,
  visit         INTEGER NOT NULL,
  idx           INTEGER NOT NULL,  -- its position in the list: the output's slot
  item          TEXT    NOT NULL,  -- the item, as JSON
  state         TEXT    NOT NULL,  -- PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED
  child_run_id  TEXT,              -- the child run that runs it; NULL while PENDING
  output        TEXT,              -- the child's output once SUCCEEDED
  error         TEXT,              -- the child's error once FAILED or CANCELLED
  started_at    INTEGER,
  ended_at      INTEGER,
  PRIMARY KEY (run_id, node_id, visit, idx)
);
-- Items start in index order: the next PENDING ones of a visit, and those still running.
CREATE INDEX map_items_pending ON map_items (run_id, node_id, visit, idx) WHERE state = 'PENDING';
CREATE INDEX map_items_running ON map_items (run_id, node_id, visit, idx) WHERE state = 'RUNNING';
-- The sweep finds running items whose child run ended (mapItemsToSettle): only running rows.
CREATE INDEX map_items_running_children ON map_items (child_run_id) WHERE state = 'RUNNING';
-- getRun lists a run's children but not its map items (they are paged): an index of the
-- children without the items, so a 10,000-item map costs neither getRun nor each item's insert.
DROP INDEX runs_by_parent;
CREATE INDEX runs_by_parent ON runs (json_extract(parent, '$.run_id'))
  WHERE parent IS NOT NULL AND json_extract(parent, '$.item') IS NULL;
