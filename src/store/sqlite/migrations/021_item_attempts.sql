-- Skein schema v21: an item of `each: { agent_type }` holds its attempts in its own row (DESIGN
-- §11.1), with a visit's attempt fields, instead of a child run with its own run and visit rows
-- and events: a map item costs about what a step does. An item of `each: { workflow_id }` is
-- still a child run (agent_type NULL), and so are rows written before this version.
ALTER TABLE map_items ADD COLUMN agent_type TEXT;
ALTER TABLE map_items ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE map_items ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE map_items ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE map_items ADD COLUMN ready_at INTEGER;          -- set while it may be claimed
ALTER TABLE map_items ADD COLUMN deadline_at INTEGER;
ALTER TABLE map_items ADD COLUMN lease_expires_at INTEGER;
ALTER TABLE map_items ADD COLUMN holder TEXT;
-- Ready items, oldest due first: those an agent type may claim, and the next retry time (nextDue).
-- Only items their maps started have one: as many as the maps let run, never a whole list.
CREATE INDEX map_items_ready ON map_items (ready_at) WHERE ready_at IS NOT NULL;
-- Running item attempts by lease: the sweep's expired ones, and a dead engine's (as many as run).
CREATE INDEX map_items_leased ON map_items (lease_expires_at) WHERE state = 'RUNNING' AND agent_type IS NOT NULL;
