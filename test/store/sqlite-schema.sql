CREATE VIEW events AS
  SELECT b.last_seq - b.count + 1 + j.key AS seq, b.run_id AS run_id, j.value ->> 0 AS type,
         j.value ->> 1 AS node_id, j.value ->> 2 AS visit, b.trace_id AS trace_id, j.value ->> 3 AS at,
         j.value -> 4 AS data
    FROM event_batches b, json_each(b.events) j;

CREATE TRIGGER run_text_delete AFTER DELETE ON runs WHEN instr(old.workflow_id, '/') = 0 BEGIN
  DELETE FROM run_text WHERE rowid IN (
    SELECT 2 * id FROM run_text_ids WHERE run_id = old.run_id
    UNION ALL SELECT 2 * id + 1 FROM run_text_ids WHERE run_id = old.run_id);
  DELETE FROM run_text_queue WHERE k IN (
    SELECT 2 * id FROM run_text_ids WHERE run_id = old.run_id
    UNION ALL SELECT 2 * id + 1 FROM run_text_ids WHERE run_id = old.run_id);
  DELETE FROM run_text_ids WHERE run_id = old.run_id;
END;

CREATE TRIGGER run_text_insert AFTER INSERT ON runs WHEN instr(new.workflow_id, '/') = 0 BEGIN
  INSERT INTO run_text_ids (run_id) VALUES (new.run_id);
  INSERT INTO run_text_queue (k) VALUES (2 * last_insert_rowid());
END;

CREATE TRIGGER run_text_output AFTER UPDATE OF output ON runs
  WHEN old.output IS NOT new.output AND instr(new.workflow_id, '/') = 0 BEGIN
  INSERT OR IGNORE INTO run_text_queue (k) SELECT 2 * id + 1 FROM run_text_ids WHERE run_id = new.run_id;
END;

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

CREATE TABLE engines (
  engine_id     TEXT    PRIMARY KEY,
  host          TEXT    NOT NULL,
  pid           INTEGER NOT NULL,
  started_at    INTEGER NOT NULL,
  heartbeat_at  INTEGER NOT NULL,
  stopped_at    INTEGER
, served_types TEXT);

CREATE TABLE event_batches (
  last_seq  INTEGER PRIMARY KEY,
  run_id    TEXT    NOT NULL,
  count     INTEGER NOT NULL,
  trace_id  TEXT    NOT NULL,
  events    TEXT    NOT NULL
);

CREATE TABLE inbox (
  seq                INTEGER PRIMARY KEY,  -- arrival order: the oldest event is taken first
  event_id           TEXT NOT NULL UNIQUE,
  run_id             TEXT REFERENCES runs (run_id),
  name               TEXT NOT NULL,
  key                TEXT,
  payload            TEXT NOT NULL,
  idempotency_key    TEXT NOT NULL,        -- the sender's, else the event_id
  created_at         INTEGER NOT NULL,
  delivered_node_id  TEXT,
  delivered_visit    INTEGER,
  delivered_at       INTEGER
, size INTEGER, scope TEXT);

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
  ended_at      INTEGER, agent_type TEXT, attempt INTEGER NOT NULL DEFAULT 0, failures INTEGER NOT NULL DEFAULT 0, interruptions INTEGER NOT NULL DEFAULT 0, ready_at INTEGER, deadline_at INTEGER, lease_expires_at INTEGER, holder TEXT, priority INTEGER NOT NULL DEFAULT 5 CHECK (priority BETWEEN 0 AND 9),
  PRIMARY KEY (run_id, node_id, visit, idx)
);

CREATE TABLE rate_buckets (
  agent_type  TEXT    PRIMARY KEY,
  tokens      REAL    NOT NULL,
  updated_at  INTEGER NOT NULL
, usage_tokens REAL, last_usage REAL, held_until INTEGER);

CREATE TABLE run_tags (
  name   TEXT NOT NULL,
  value  TEXT NOT NULL,
  run_id TEXT NOT NULL,
  PRIMARY KEY (name, value, run_id)
) WITHOUT ROWID;

CREATE VIRTUAL TABLE run_text USING fts5(text, tokenize = 'trigram', content = '', contentless_delete = 1);

CREATE TABLE 'run_text_config'(k PRIMARY KEY, v) WITHOUT ROWID;

CREATE TABLE 'run_text_data'(id INTEGER PRIMARY KEY, block BLOB);

CREATE TABLE 'run_text_docsize'(id INTEGER PRIMARY KEY, sz BLOB, origin INTEGER);

CREATE TABLE run_text_ids (
  id      INTEGER PRIMARY KEY,
  run_id  TEXT NOT NULL UNIQUE
);

CREATE TABLE 'run_text_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;

CREATE TABLE run_text_queue (
  k  INTEGER PRIMARY KEY
);

CREATE TABLE run_trees (
  root_run_id  TEXT PRIMARY KEY,
  runs         INTEGER NOT NULL
);

CREATE TABLE runs (
  run_id            TEXT    PRIMARY KEY,
  workflow_id       TEXT    NOT NULL,
  workflow_version  INTEGER NOT NULL,
  status            TEXT    NOT NULL,
  input             TEXT    NOT NULL,
  output            TEXT,
  error             TEXT,
  end_cause         TEXT,
  trace_id          TEXT    NOT NULL,
  traceparent       TEXT    NOT NULL,
  idempotency_key   TEXT    UNIQUE,
  input_hash        TEXT    NOT NULL,
  needs_attention   INTEGER NOT NULL DEFAULT 0,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  deadline_at       INTEGER NOT NULL,  -- the run's TTL
  ended_at          INTEGER, parent TEXT, revision INTEGER NOT NULL DEFAULT 0, schedule_id TEXT, usage TEXT NOT NULL DEFAULT '{"tokens_in":0,"tokens_out":0,"cost":0}', budget TEXT, scope TEXT, reserved TEXT, tags TEXT NOT NULL DEFAULT '{}', paused TEXT, forked_from TEXT, priority INTEGER NOT NULL DEFAULT 5 CHECK (priority BETWEEN 0 AND 9), key TEXT, queued TEXT, triggered_by TEXT,
  FOREIGN KEY (workflow_id, workflow_version) REFERENCES workflows (id, version)
);

CREATE TABLE schedules (
  schedule_id    TEXT    PRIMARY KEY,
  workflow_id    TEXT    NOT NULL,
  version        INTEGER,            -- pinned; NULL: the latest at each firing
  cron           TEXT    NOT NULL,
  timezone       TEXT    NOT NULL,
  input          TEXT    NOT NULL,   -- JSON
  overlap        TEXT    NOT NULL,   -- skip | allow | cancel_previous
  catchup        TEXT    NOT NULL,   -- none | latest | all
  catchup_limit  INTEGER NOT NULL,
  paused         INTEGER NOT NULL,
  next_fire_at   INTEGER,            -- NULL while paused
  last_slot_at   INTEGER,
  last_run_id    TEXT,
  created_at     INTEGER NOT NULL,
  updated_at     INTEGER NOT NULL
, scope TEXT);

CREATE TABLE skein_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);

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

CREATE TABLE visits (
  run_id          TEXT    NOT NULL REFERENCES runs (run_id),
  node_id         TEXT    NOT NULL,
  visit           INTEGER NOT NULL,
  execution_id    TEXT    NOT NULL,            -- run_id:node_id:visit
  agent_type      TEXT    NOT NULL,
  state           TEXT    NOT NULL,
  is_current      INTEGER NOT NULL,
  loop_activated  INTEGER NOT NULL DEFAULT 0,  -- created by a loop-back edge, which activates it
  trigger         TEXT,                        -- {"node_id","visit"} of the edge that activated it
  payload         TEXT,                        -- resolved once per visit; NULL until resolved
  output          TEXT,
  error           TEXT,
  reason          TEXT,                        -- why FAILED / SKIPPED / CANCELLED
  handled         INTEGER NOT NULL DEFAULT 0,  -- a FAILED visit whose next_on_failure fired
  fired           TEXT,                        -- edge decision: JSON list of targets (NULL = undecided)
  failures        INTEGER NOT NULL DEFAULT 0,  -- spends the retry budget
  attempt         INTEGER NOT NULL DEFAULT 0,  -- only grows; fences results
  interruptions   INTEGER NOT NULL DEFAULT 0,  -- engine deaths while an attempt was held
  prior_starts    INTEGER NOT NULL DEFAULT 0,  -- visits of this node that started before this one
  ready_at        INTEGER,                     -- set while ready to claim (PENDING or RETRYING)
  deadline_at     INTEGER,                     -- hard cap of the running attempt
  lease_expires_at INTEGER,                    -- deadline or heartbeat expiry, the earlier
  holder          TEXT,                        -- engine id (or worker id) holding the attempt
  created_at      INTEGER NOT NULL,
  started_at      INTEGER,
  ended_at        INTEGER, items TEXT, concurrency_key TEXT, priority INTEGER NOT NULL DEFAULT 5 CHECK (priority BETWEEN 0 AND 9),
  PRIMARY KEY (run_id, node_id, visit)
);

CREATE TABLE workflow_triggers (
  event        TEXT    NOT NULL,
  workflow_id  TEXT    NOT NULL,
  version      INTEGER NOT NULL,
  PRIMARY KEY (event, workflow_id, version)
) WITHOUT ROWID;

CREATE TABLE workflows (
  id          TEXT    NOT NULL,
  version     INTEGER NOT NULL,
  hash        TEXT    NOT NULL,  -- sha256 of the canonical definition: same content, same version
  definition  TEXT    NOT NULL,
  created_at  INTEGER NOT NULL,
  PRIMARY KEY (id, version),
  UNIQUE (id, hash)
);

CREATE INDEX compensations_due ON compensations (ready_at) WHERE ready_at IS NOT NULL;

CREATE INDEX compensations_running ON compensations (lease_expires_at) WHERE state = 'RUNNING';

CREATE INDEX compensations_running_by_type ON compensations (agent_type) WHERE state = 'RUNNING';

CREATE INDEX event_batches_by_run ON event_batches (run_id, last_seq);

CREATE INDEX inbox_by_key ON inbox (name, key, created_at) WHERE run_id IS NULL;

CREATE UNIQUE INDEX inbox_key_idempotency ON inbox (name, key, idempotency_key) WHERE run_id IS NULL;

CREATE UNIQUE INDEX inbox_run_idempotency ON inbox (run_id, idempotency_key) WHERE run_id IS NOT NULL;

CREATE INDEX inbox_undelivered ON inbox (run_id, seq) WHERE delivered_at IS NULL AND run_id IS NOT NULL;

CREATE INDEX inbox_waiting ON inbox (run_id, name, seq, size) WHERE delivered_at IS NULL AND run_id IS NOT NULL;

CREATE INDEX map_items_leased ON map_items (lease_expires_at) WHERE state = 'RUNNING' AND agent_type IS NOT NULL;

CREATE INDEX map_items_pending ON map_items (run_id, node_id, visit, idx) WHERE state = 'PENDING';

CREATE INDEX map_items_ready ON map_items (agent_type, priority, ready_at) WHERE ready_at IS NOT NULL;

CREATE INDEX map_items_running ON map_items (run_id, node_id, visit, idx) WHERE state = 'RUNNING';

CREATE INDEX map_items_running_children ON map_items (child_run_id) WHERE state = 'RUNNING';

CREATE INDEX run_tags_by_run ON run_tags (run_id);

CREATE INDEX runs_active_by_schedule ON runs (schedule_id) WHERE schedule_id IS NOT NULL AND ended_at IS NULL;

CREATE INDEX runs_active_children ON runs (created_at) WHERE parent IS NOT NULL AND ended_at IS NULL;

CREATE INDEX runs_by_deadline ON runs (deadline_at) WHERE ended_at IS NULL;

CREATE INDEX runs_by_key ON runs (workflow_id, key) WHERE key IS NOT NULL AND ended_at IS NULL;

CREATE INDEX runs_by_parent ON runs (json_extract(parent, '$.run_id'))
  WHERE parent IS NOT NULL AND json_extract(parent, '$.item') IS NULL;

CREATE INDEX runs_by_schedule ON runs (schedule_id, created_at) WHERE schedule_id IS NOT NULL;

CREATE INDEX runs_by_status ON runs (status, created_at);

CREATE INDEX runs_by_workflow ON runs (workflow_id, created_at);

CREATE INDEX runs_finished ON runs (status, ended_at) WHERE parent IS NULL AND ended_at IS NOT NULL;

CREATE INDEX runs_paused ON runs (run_id) WHERE paused IS NOT NULL;

CREATE INDEX schedules_by_workflow ON schedules (workflow_id);

CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE paused = 0 AND next_fire_at IS NOT NULL;

CREATE UNIQUE INDEX steps_by_execution ON steps (execution_id, name);

CREATE INDEX steps_by_node ON steps (run_id, node_id, visit, seq);

CREATE INDEX steps_by_thread ON steps (name, seq) WHERE name LIKE 'thread:%';

CREATE INDEX visits_held_by_child ON visits (holder) WHERE holder LIKE 'run:%';

CREATE INDEX visits_held_by_map ON visits (run_id) WHERE holder = 'map';

CREATE INDEX visits_in_review ON visits (lease_expires_at) WHERE state = 'IN_REVIEW';

CREATE INDEX visits_ready ON visits (agent_type, priority, ready_at) WHERE ready_at IS NOT NULL;

CREATE INDEX visits_running ON visits (lease_expires_at) WHERE state = 'RUNNING';

CREATE INDEX visits_running_by_key ON visits (node_id, concurrency_key)
  WHERE state = 'RUNNING' AND concurrency_key IS NOT NULL;

CREATE INDEX visits_running_by_type ON visits (agent_type) WHERE state = 'RUNNING';

CREATE INDEX visits_unresolved ON visits (ready_at) WHERE ready_at IS NOT NULL AND payload IS NULL;

CREATE INDEX visits_waiting ON visits (lease_expires_at) WHERE state = 'WAITING';
