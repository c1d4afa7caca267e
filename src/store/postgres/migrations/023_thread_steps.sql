-- Skein schema v23 (PostgreSQL), as SQLite's 023_thread_steps.sql: the visits of an agent
-- node's thread (DESIGN §14.2), found by their `thread:<key>` step; partial, so no other step
-- pays for the index.
CREATE INDEX steps_by_thread ON steps (name, seq) WHERE name LIKE 'thread:%';
