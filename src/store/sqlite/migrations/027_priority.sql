-- Skein schema v27: run priority (DESIGN §17), 0 to 9, lower claimed first; 5 for every run
-- written before. A visit and a map item row carry a copy of their run's priority, written with
-- the row and never changed (a run's priority never changes): the claim queries order ready work
-- by (priority, ready_at) from one index, without reading runs.
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 5 CHECK (priority BETWEEN 0 AND 9);
ALTER TABLE visits ADD COLUMN priority INTEGER NOT NULL DEFAULT 5 CHECK (priority BETWEEN 0 AND 9);
ALTER TABLE map_items ADD COLUMN priority INTEGER NOT NULL DEFAULT 5 CHECK (priority BETWEEN 0 AND 9);
-- The ready visits of an agent type in claim order: the claim (INDEXED BY visits_ready) reads
-- them in order and stops at its limit, with no sort. nextDue scans the same partial index, as
-- it did before (only ready rows are in it).
DROP INDEX visits_ready;
CREATE INDEX visits_ready ON visits (agent_type, priority, ready_at) WHERE ready_at IS NOT NULL;
-- The same for map items holding their attempts; nextDue's min(ready_at) now scans it, ready
-- items being only those their maps started (as many as they let run).
DROP INDEX map_items_ready;
CREATE INDEX map_items_ready ON map_items (agent_type, priority, ready_at) WHERE ready_at IS NOT NULL;
