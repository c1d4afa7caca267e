-- Skein schema v2 (SQLite): compensation rows (DESIGN §6).

-- One row per visit a failed run undoes; a run's rows run one at a time, by seq.
CREATE TABLE compensations (
  run_id           TEXT    NOT NULL REFERENCES runs (run_id),
  seq              INTEGER NOT NULL,   -- order within the run: 1 runs first
  node_id          TEXT    NOT NULL,   -- the visit it undoes
  visit            INTEGER NOT NULL,
  execution_id     TEXT    NOT NULL,   -- <visit execution_id>:compensate
  agent_type       TEXT    NOT NULL,
  state            TEXT    NOT NULL,
  output           TEXT,
  error            TEXT,
  reason           TEXT,
  failures         INTEGER NOT NULL DEFAULT 0,
  attempt          INTEGER NOT NULL DEFAULT 0,
  interruptions    INTEGER NOT NULL DEFAULT 0,
  ready_at         INTEGER,
  deadline_at      INTEGER,
  lease_expires_at INTEGER,
  holder           TEXT,
  created_at       INTEGER NOT NULL,
  started_at       INTEGER,
  ended_at         INTEGER,
  PRIMARY KEY (run_id, seq),
  UNIQUE (run_id, node_id, visit)      -- a visit is undone at most once, even across redrives
);
CREATE INDEX compensations_due ON compensations (ready_at) WHERE ready_at IS NOT NULL;
CREATE INDEX compensations_running ON compensations (lease_expires_at) WHERE state = 'RUNNING';
