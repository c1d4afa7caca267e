-- Skein schema v29: event triggers (DESIGN §17). `workflow_triggers` holds one row per event name
-- a workflow version's `triggers` declare, written with the version: publishEvent finds the
-- workflows whose latest version declares its event without reading every definition. Versions
-- registered before declare none (the format had no triggers). `runs.triggered_by` is the event
-- whose trigger started a run, `{ event, key, event_id, idempotency_key }` as JSON, written once
-- when the run is created; null for runs started otherwise.
CREATE TABLE workflow_triggers (
  event        TEXT    NOT NULL,
  workflow_id  TEXT    NOT NULL,
  version      INTEGER NOT NULL,
  PRIMARY KEY (event, workflow_id, version)
) WITHOUT ROWID;
ALTER TABLE runs ADD COLUMN triggered_by TEXT;
