-- Skein schema v25 (PostgreSQL), as SQLite's 025_run_pause.sql: paused runs (DESIGN §16). The
-- claim queries already join the run they lock, so they test `paused IS NULL` there.
ALTER TABLE runs ADD COLUMN paused jsonb;
CREATE INDEX runs_paused ON runs (created_at) WHERE paused IS NOT NULL;
