-- Skein schema v22 (PostgreSQL), as SQLite's 022_steps.sql: durable steps inside a visit (DESIGN
-- §14.1). One row per step an attempt recorded, keyed by its execution_id and name (the first
-- record wins); a later attempt of the same visit gets the result without calling the step again.
CREATE TABLE steps (
  seq           bigserial PRIMARY KEY,   -- the order steps were recorded in
  execution_id  text COLLATE "C" NOT NULL,
  name          text COLLATE "C" NOT NULL,
  run_id        text COLLATE "C" NOT NULL REFERENCES runs (run_id),
  node_id       text COLLATE "C" NOT NULL,
  visit         integer NOT NULL,
  attempt       integer NOT NULL,        -- the attempt that recorded it (a copied row keeps it)
  output        json NOT NULL,
  size          integer NOT NULL,        -- bytes of the output's JSON
  recorded_at   bigint NOT NULL
);
CREATE UNIQUE INDEX steps_by_execution ON steps (execution_id, name);
-- A node's steps over its visits (the API and the run page).
CREATE INDEX steps_by_node ON steps (run_id, node_id, visit, seq);
