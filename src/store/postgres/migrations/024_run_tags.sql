-- Skein schema v24 (PostgreSQL), as SQLite's 024_run_tags.sql: run tags (DESIGN §16), at most 16
-- name/value pairs a run, kept as jsonb; listRuns' tag filter is containment (`tags @> $1`),
-- which the GIN index answers whatever the names. Runs written before have none.
ALTER TABLE runs ADD COLUMN tags jsonb NOT NULL DEFAULT '{}';
CREATE INDEX runs_by_tags ON runs USING gin (tags jsonb_path_ops);
