-- Skein schema v10: schedules (DESIGN §11.5). A schedule starts runs of a workflow on a cron
-- expression; the engines' sweep finds those due by next_fire_at (only unpaused ones are in its
-- index) and fires each slot once: the run's idempotency key is schedule:<id>:<slot>, and the
-- run is written in the transaction that moves next_fire_at. Times are epoch ms.
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
);
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE paused = 0 AND next_fire_at IS NOT NULL;
CREATE INDEX schedules_by_workflow ON schedules (workflow_id);
-- The schedule that started a run: its runs not ended yet (overlap) and the runs filter.
ALTER TABLE runs ADD COLUMN schedule_id TEXT;
CREATE INDEX runs_by_schedule ON runs (schedule_id, created_at) WHERE schedule_id IS NOT NULL;
CREATE INDEX runs_active_by_schedule ON runs (schedule_id) WHERE schedule_id IS NOT NULL AND ended_at IS NULL;
