-- Skein schema v18 (PostgreSQL), as SQLite's 018_served_types.sql: the agent types each engine
-- serves, so that a visit of a type nobody serves is said to wait for an agent (getRun's
-- `waiting`, a warning in the log) instead of waiting in silence until its run's TTL. A JSON
-- list, written at registration and with every heartbeat: the engine's in-process handlers and
-- the types external workers claimed or reported at it lately.
ALTER TABLE engines ADD COLUMN served_types json;
