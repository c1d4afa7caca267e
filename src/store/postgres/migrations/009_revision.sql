-- Skein schema v9 (PostgreSQL), as SQLite's 009_revision.sql: a revision per run, raised by every
-- write of the run's row, its visits or its compensation rows. An engine keeps busy runs in
-- memory between transactions; a transaction reads a kept run's visits again only when its
-- revision is not the one the engine holds (another engine or a client wrote it since).
ALTER TABLE runs ADD COLUMN revision bigint NOT NULL DEFAULT 0;
