-- Skein schema v4: child runs (the `workflow` node, DESIGN §11.1). A child run names the parent
-- attempt it is: { run_id, node_id, visit, attempt, depth } as JSON; NULL for a top-level run.
-- The index lists a run's children (getRun) without scanning every run.
ALTER TABLE runs ADD COLUMN parent TEXT;
CREATE INDEX runs_by_parent ON runs (json_extract(parent, '$.run_id')) WHERE parent IS NOT NULL;
-- The sweep finds children whose end their parent did not take yet (the parent was busy in
-- another engine's transaction), and active children whose parent attempt ended.
CREATE INDEX visits_held_by_child ON visits (holder) WHERE holder LIKE 'run:%';
CREATE INDEX runs_active_children ON runs (created_at) WHERE parent IS NOT NULL AND ended_at IS NULL;
