-- Skein schema v17 (PostgreSQL), as SQLite's 017_held_maps.sql: the map visits an engine continues. A map fills its window and cancels its
-- items a chunk per transaction (DESIGN §13.1); what is left is continued from the engine's
-- memory. When an engine starts, or takes over a dead one's work, it continues every held map
-- visit (holder 'map', RUNNING or CANCELLED with items still running) found by this index,
-- which holds map visits only: never a scan of every visit.
CREATE INDEX visits_held_by_map ON visits (run_id) WHERE holder = 'map';
-- An event by key from a scoped publisher keeps its scope: a wait that starts within its buffer
-- takes it only when its run's workflow is in that scope (null: any run).
ALTER TABLE inbox ADD COLUMN scope json;
