-- Skein schema v27 (PostgreSQL), as SQLite's 027_priority.sql: run priority (DESIGN §17), 0 to 9,
-- lower claimed first; 5 for every run written before (a constant default: no table rewrite).
-- A visit and a map item row carry a copy of their run's priority, written with the row and
-- never changed, so the claim queries order ready work by (priority, ready_at) from one index
-- before they lock the runs they take.
ALTER TABLE runs ADD COLUMN priority integer NOT NULL DEFAULT 5 CHECK (priority BETWEEN 0 AND 9);
ALTER TABLE visits ADD COLUMN priority integer NOT NULL DEFAULT 5 CHECK (priority BETWEEN 0 AND 9);
ALTER TABLE map_items ADD COLUMN priority integer NOT NULL DEFAULT 5 CHECK (priority BETWEEN 0 AND 9);
DROP INDEX visits_ready;
CREATE INDEX visits_ready ON visits (agent_type, priority, ready_at) WHERE ready_at IS NOT NULL;
DROP INDEX map_items_ready;
CREATE INDEX map_items_ready ON map_items (agent_type, priority, ready_at) WHERE ready_at IS NOT NULL;
