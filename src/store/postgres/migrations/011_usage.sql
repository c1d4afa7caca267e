-- Skein schema v11 (PostgreSQL), as SQLite's 011_usage.sql: usage and budgets (DESIGN §12).
-- `usage` is the run's own and its descendants' (a report is added to the run and every run
-- above it, each locked, in the transaction that applies it); `budget` is the run's own, set
-- once when the run starts.
ALTER TABLE runs ADD COLUMN usage json NOT NULL DEFAULT '{"tokens_in":0,"tokens_out":0,"cost":0}';
ALTER TABLE runs ADD COLUMN budget json;
