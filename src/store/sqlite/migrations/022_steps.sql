-- Skein schema v22: durable steps inside a visit (DESIGN §14.1). One row per step an attempt
-- recorded with `task.step(name, fn)` (or a worker's POST .../steps): its JSON result, kept so
-- that a later attempt of the same visit (a retry, a recovery after a crash) gets it without
-- calling `fn` again. Keyed by the attempt's execution_id (a visit's, a compensation's or a map
-- item's) and the step's name, unique within it: the first record wins. A redrive's new visit
-- starts with a copy of the rows of the visit it replaces.
CREATE TABLE steps (
  seq           INTEGER PRIMARY KEY,   -- the order steps were recorded in
  execution_id  TEXT NOT NULL,
  name          TEXT NOT NULL,
  run_id        TEXT NOT NULL REFERENCES runs (run_id),
  node_id       TEXT NOT NULL,
  visit         INTEGER NOT NULL,
  attempt       INTEGER NOT NULL,      -- the attempt that recorded it (a copied row keeps it)
  output        TEXT NOT NULL,
  size          INTEGER NOT NULL,      -- bytes of the output's JSON
  recorded_at   INTEGER NOT NULL
);
CREATE UNIQUE INDEX steps_by_execution ON steps (execution_id, name);
-- A node's steps over its visits (the API and the run page).
CREATE INDEX steps_by_node ON steps (run_id, node_id, visit, seq);
