-- Skein schema v1 (PostgreSQL): the same logical schema as SQLite's 001_init.sql.
-- Times are epoch milliseconds (bigint). JSON columns are `json`, not `jsonb`: json keeps the
-- text as written (key order, \u0000 escapes), so every value reads back exactly as stored.
-- Ids are COLLATE "C": byte order, as in SQLite, whatever the database's locale (and one
-- collation on both sides of every comparison between columns).
-- Objects are created unqualified: the migrator sets search_path to the store's schema.

CREATE TABLE workflows (
  id          text COLLATE "C" NOT NULL,
  version     integer NOT NULL,
  hash        text    NOT NULL,  -- sha256 of the canonical definition: same content, same version
  definition  text    NOT NULL,  -- as registered (JSON text), kept byte for byte
  created_at  bigint  NOT NULL,
  PRIMARY KEY (id, version),
  UNIQUE (id, hash)
);

CREATE TABLE runs (
  run_id            text COLLATE "C" PRIMARY KEY,
  workflow_id       text COLLATE "C" NOT NULL,
  workflow_version  integer NOT NULL,
  status            text    NOT NULL,
  input             json    NOT NULL,
  output            json,
  error             json,
  end_cause         text,
  trace_id          text    NOT NULL,
  traceparent       text    NOT NULL,
  idempotency_key   text,
  input_hash        text    NOT NULL,
  needs_attention   boolean NOT NULL DEFAULT false,
  created_at        bigint  NOT NULL,
  updated_at        bigint  NOT NULL,
  deadline_at       bigint  NOT NULL,  -- the run's TTL
  ended_at          bigint,
  -- Named: two engines starting a run under the same key at once collide here, and the store
  -- reports that as transient (the retried transaction finds the run the other one started).
  CONSTRAINT runs_idempotency_key UNIQUE (idempotency_key),
  FOREIGN KEY (workflow_id, workflow_version) REFERENCES workflows (id, version)
);
CREATE INDEX runs_by_status ON runs (status, created_at);
CREATE INDEX runs_by_workflow ON runs (workflow_id, created_at);
CREATE INDEX runs_by_deadline ON runs (deadline_at) WHERE ended_at IS NULL;

-- One row per visit of a node in a run. The current visit of a node has is_current = true.
CREATE TABLE visits (
  run_id           text COLLATE "C" NOT NULL REFERENCES runs (run_id),
  node_id          text COLLATE "C" NOT NULL,
  visit            integer NOT NULL,
  execution_id     text    NOT NULL,             -- run_id:node_id:visit
  agent_type       text COLLATE "C" NOT NULL,
  state            text    NOT NULL,
  is_current       boolean NOT NULL,
  loop_activated   boolean NOT NULL DEFAULT false, -- created by a loop-back edge, which activates it
  trigger          json,                          -- {"node_id","visit"} of the edge that activated it
  payload          json,                          -- resolved once per visit; NULL until resolved
  output           json,
  error            json,
  reason           text,                          -- why FAILED / SKIPPED / CANCELLED
  handled          boolean NOT NULL DEFAULT false, -- a FAILED visit whose next_on_failure fired
  fired            json,                          -- edge decision: JSON list of targets (NULL = undecided)
  failures         integer NOT NULL DEFAULT 0,    -- spends the retry budget
  attempt          integer NOT NULL DEFAULT 0,    -- only grows; fences results
  interruptions    integer NOT NULL DEFAULT 0,    -- engine deaths while an attempt was held
  prior_starts     integer NOT NULL DEFAULT 0,    -- visits of this node that started before this one
  ready_at         bigint,                        -- set while ready to claim (PENDING or RETRYING)
  deadline_at      bigint,                        -- hard cap of the running attempt
  lease_expires_at bigint,                        -- deadline or heartbeat expiry, the earlier
  holder           text COLLATE "C",             -- engine id (or worker id) holding the attempt
  created_at       bigint  NOT NULL,
  started_at       bigint,
  ended_at         bigint,
  PRIMARY KEY (run_id, node_id, visit)
);
CREATE INDEX visits_ready ON visits (agent_type, ready_at) WHERE ready_at IS NOT NULL;
CREATE INDEX visits_unresolved ON visits (ready_at) WHERE ready_at IS NOT NULL AND payload IS NULL;
CREATE INDEX visits_running ON visits (lease_expires_at) WHERE state = 'RUNNING';
CREATE INDEX visits_in_review ON visits (lease_expires_at) WHERE state = 'IN_REVIEW';

CREATE TABLE events (
  -- Grows with every insert. Across engines seq is not commit order, but a run's events are
  -- written under its row lock, so within one run it is.
  seq       bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id    text COLLATE "C" NOT NULL,
  type      text    NOT NULL,
  node_id   text COLLATE "C",
  visit     integer,
  trace_id  text    NOT NULL,
  at        bigint  NOT NULL,
  data      json    NOT NULL
);
CREATE INDEX events_by_run ON events (run_id, seq);

CREATE TABLE engines (
  engine_id     text COLLATE "C" PRIMARY KEY,
  host          text    NOT NULL,
  pid           integer NOT NULL,
  started_at    bigint  NOT NULL,
  heartbeat_at  bigint  NOT NULL,
  stopped_at    bigint
);
