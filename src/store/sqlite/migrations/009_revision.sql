-- Skein schema v9: a revision per run, raised by every write of the run's row, its visits or its
-- compensation rows. An engine keeps busy runs in memory between transactions; a transaction
-- reads a kept run again only when its revision is not the one the engine holds, so a step
-- costs the same in a workflow of 10 nodes or 1,000, and another process's write (a client's
-- cancel, another engine) is never missed.
ALTER TABLE runs ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
