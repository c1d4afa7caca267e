-- Skein schema v2 (PostgreSQL): compensation rows (DESIGN §6), as SQLite's 002_compensations.sql.

-- One row per visit a failed run undoes; a run's rows run one at a time, by seq.
CREATE TABLE compensations (
  run_id           text COLLATE "C" NOT NULL REFERENCES runs (run_id),
  seq              integer NOT NULL,   -- order within the run: 1 runs first
  node_id          text COLLATE "C" NOT NULL,   -- the visit it undoes
  visit            integer NOT NULL,
  execution_id     text    NOT NULL,   -- <visit execution_id>:compensate
  agent_type       text COLLATE "C" NOT NULL,
  state            text    NOT NULL,
  output           json,
  error            json,
  reason           text,
  failures         integer NOT NULL DEFAULT 0,
  attempt          integer NOT NULL DEFAULT 0,
  interruptions    integer NOT NULL DEFAULT 0,
  ready_at         bigint,
  deadline_at      bigint,
  lease_expires_at bigint,
  holder           text COLLATE "C",
  created_at       bigint  NOT NULL,
  started_at       bigint,
  ended_at         bigint,
  PRIMARY KEY (run_id, seq),
  UNIQUE (run_id, node_id, visit)      -- a visit is undone at most once, even across redrives
);
CREATE INDEX compensations_due ON compensations (ready_at) WHERE ready_at IS NOT NULL;
CREATE INDEX compensations_running ON compensations (lease_expires_at) WHERE state = 'RUNNING';
-- The sweep resumes compensating runs by status (compensatingRuns), oldest first.
CREATE INDEX runs_compensating ON runs (created_at) WHERE status = 'COMPENSATING';
