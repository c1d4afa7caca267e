-- Skein schema v26 (PostgreSQL), as SQLite's 026_run_forked_from.sql: a forked run's source
-- (DESIGN §16, forkRun), `{ run_id, node_id }`, written once when the run is created; null for
-- runs written before and runs started otherwise.
ALTER TABLE runs ADD COLUMN forked_from jsonb;
