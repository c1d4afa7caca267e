-- Skein schema v5: events (DESIGN §11.2, §11.3). One row per event sent to a run (run_id) or
-- published by key (run_id NULL, key set). A run's event that no wait_event took yet waits here
-- (delivered_at NULL), so an event sent just before the wait starts is never lost; a delivered
-- one stays, so the same idempotency_key sent again is answered without a second delivery.
-- An event by key is kept for the buffers of waits that start later, and pruned after a day.
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
);
CREATE INDEX inbox_undelivered ON inbox (run_id, seq) WHERE delivered_at IS NULL AND run_id IS NOT NULL;
CREATE UNIQUE INDEX inbox_run_idempotency ON inbox (run_id, idempotency_key) WHERE run_id IS NOT NULL;
CREATE UNIQUE INDEX inbox_key_idempotency ON inbox (name, key, idempotency_key) WHERE run_id IS NULL;
CREATE INDEX inbox_by_key ON inbox (name, key, created_at) WHERE run_id IS NULL;
