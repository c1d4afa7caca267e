-- Skein schema v7: pruning finished runs (DESIGN §8). A batch takes the top-level runs of one
-- status that ended longest ago: a range of this index, never a scan of every finished run.
-- Only finished top-level runs are in it, so starting a run and each map item's run cost nothing.
CREATE INDEX runs_finished ON runs (status, ended_at) WHERE parent IS NULL AND ended_at IS NOT NULL;
