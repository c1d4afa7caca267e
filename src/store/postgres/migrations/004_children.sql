-- Skein schema v4: child runs (the `workflow` node, DESIGN §11.1). A child run names the parent
-- attempt it is: { run_id, node_id, visit, attempt, depth } as JSON; NULL for a top-level run.
-- The index lists a run's children (getRun) without scanning every run.
ALTER TABLE runs ADD COLUMN parent json;
CREATE INDEX runs_by_parent ON runs ((parent->>'run_id')) WHERE parent IS NOT NULL;
