-- Skein schema v6 (PostgreSQL): the `map` node, as SQLite's 006_map.sql. A map visit keeps its
-- item counts on the visit (MapCounts as JSON, NULL for other kinds), and its items as rows: one
-- per item of the list, never a list held in memory, each run as a child run of the visit's attempt.
-- JSON is json, as in every other table: its text stays as written (jsonb would reorder an
-- object's keys); the carry-over of a redrive compares items as jsonb.
ALTER TABLE visits ADD COLUMN items json;
-- No foreign keys: a 10,000-item list would pay 10,000 key checks (a third of its insert on
-- PostgreSQL), and items are written only for a visit of a run the transaction holds, maybe
-- before that visit's own row in the same transaction.
CREATE TABLE map_items (
  run_id        text COLLATE "C" NOT NULL,
  node_id       text COLLATE "C" NOT NULL,
  visit         integer NOT NULL,
  idx           integer NOT NULL,  -- its position in the list: the output's slot
  item          json    NOT NULL,
  state         text    NOT NULL,  -- PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED
  child_run_id  text COLLATE "C",  -- the child run that runs it; NULL while PENDING
  output        json,              -- the child's output once SUCCEEDED
  error         json,              -- the child's error once FAILED or CANCELLED
  started_at    bigint,
  ended_at      bigint,
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
CREATE INDEX runs_by_parent ON runs ((parent->>'run_id')) WHERE parent IS NOT NULL AND parent->>'item' IS NULL;
