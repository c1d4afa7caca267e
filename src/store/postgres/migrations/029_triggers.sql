-- Skein schema v29 (PostgreSQL), as SQLite's 029_triggers.sql: event triggers (DESIGN §17). One
-- row per event name a workflow version's `triggers` declare, written with the version, so that
-- publishEvent finds the workflows whose latest version declares its event; and the event whose
-- trigger started a run, written once when the run is created (null for runs started otherwise).
CREATE TABLE workflow_triggers (
  event        text COLLATE "C" NOT NULL,
  workflow_id  text COLLATE "C" NOT NULL,
  version      integer NOT NULL,
  PRIMARY KEY (event, workflow_id, version)
);
ALTER TABLE runs ADD COLUMN triggered_by jsonb;
