-- Skein schema v21 (PostgreSQL), as SQLite's 021_item_attempts.sql: an item of
-- `each: { agent_type }` holds its attempts in its own row (DESIGN §11.1), with a visit's attempt
-- fields, instead of a child run with its own run and visit rows and events. An item of
-- `each: { workflow_id }` is still a child run (agent_type NULL), and so are rows written before.
ALTER TABLE map_items
  ADD COLUMN agent_type text,
  ADD COLUMN attempt integer NOT NULL DEFAULT 0,
  ADD COLUMN failures integer NOT NULL DEFAULT 0,
  ADD COLUMN interruptions integer NOT NULL DEFAULT 0,
  ADD COLUMN ready_at bigint,
  ADD COLUMN deadline_at bigint,
  ADD COLUMN lease_expires_at bigint,
  ADD COLUMN holder text;
-- Ready items, oldest due first: those an agent type may claim, and the next retry time (nextDue).
-- Only items their maps started have one: as many as the maps let run, never a whole list.
CREATE INDEX map_items_ready ON map_items (ready_at) WHERE ready_at IS NOT NULL;
-- Running item attempts by lease: the sweep's expired ones, and a dead engine's (as many as run).
CREATE INDEX map_items_leased ON map_items (lease_expires_at) WHERE state = 'RUNNING' AND agent_type IS NOT NULL;
