-- Skein schema v28 (PostgreSQL), as SQLite's 028_run_keys.sql: one active run per key, and
-- debounce (DESIGN §17).
ALTER TABLE runs ADD COLUMN key text;
ALTER TABLE runs ADD COLUMN queued jsonb;
CREATE INDEX runs_by_key ON runs (workflow_id, key) WHERE key IS NOT NULL AND ended_at IS NULL;
