-- Skein schema v8 (PostgreSQL), as SQLite's 008_limits.sql: concurrency limits across engines
-- and workers (agentConcurrency). A claim of a limited agent type counts the attempts of that
-- type RUNNING in the database: these indexes hold only running rows, so the count reads no
-- more than the limit allows to run.
CREATE INDEX visits_running_by_type ON visits (agent_type) WHERE state = 'RUNNING';
CREATE INDEX compensations_running_by_type ON compensations (agent_type) WHERE state = 'RUNNING';
-- A node's `concurrency` (DESIGN §2): the value of its key, resolved once per visit with the
-- payload, and the running visits of each (node, value), which its claims count.
ALTER TABLE visits ADD COLUMN concurrency_key text COLLATE "C";
CREATE INDEX visits_running_by_key ON visits (node_id, concurrency_key)
  WHERE state = 'RUNNING' AND concurrency_key IS NOT NULL;
-- Rate limits (`rateLimits`): one token bucket per limited agent type, shared by every engine,
-- updated in the claiming transaction under the limits lock. Tokens refill with time from
-- updated_at (the transaction's time: the database's).
CREATE TABLE rate_buckets (
  agent_type  text COLLATE "C" PRIMARY KEY,
  tokens      double precision NOT NULL,
  updated_at  bigint NOT NULL
);
