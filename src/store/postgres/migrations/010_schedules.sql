-- Skein schema v10 (PostgreSQL), as SQLite's 010_schedules.sql: schedules (DESIGN §11.5). The
-- engines' sweeps find due ones by next_fire_at (FOR UPDATE SKIP LOCKED: one engine fires a
-- schedule at a time) and fire each slot once: the run's idempotency key is
-- schedule:<id>:<slot>, and the run is written in the transaction that moves next_fire_at.
CREATE TABLE schedules (
  schedule_id    text COLLATE "C" PRIMARY KEY,
  workflow_id    text COLLATE "C" NOT NULL,
  version        integer,            -- pinned; NULL: the latest at each firing
  cron           text NOT NULL,
  timezone       text NOT NULL,
  input          json NOT NULL,
  overlap        text NOT NULL,      -- skip | allow | cancel_previous
  catchup        text NOT NULL,      -- none | latest | all
  catchup_limit  integer NOT NULL,
  paused         boolean NOT NULL,
  next_fire_at   bigint,             -- NULL while paused
  last_slot_at   bigint,
  last_run_id    text COLLATE "C",
  created_at     bigint NOT NULL,
  updated_at     bigint NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE NOT paused AND next_fire_at IS NOT NULL;
CREATE INDEX schedules_by_workflow ON schedules (workflow_id);
-- The schedule that started a run: its runs not ended yet (overlap) and the runs filter.
ALTER TABLE runs ADD COLUMN schedule_id text COLLATE "C";
CREATE INDEX runs_by_schedule ON runs (schedule_id, created_at) WHERE schedule_id IS NOT NULL;
CREATE INDEX runs_active_by_schedule ON runs (schedule_id) WHERE schedule_id IS NOT NULL AND ended_at IS NULL;
