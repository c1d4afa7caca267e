-- Skein schema v26: a forked run's source (DESIGN §16, forkRun): `{ run_id, node_id }` as JSON,
-- the run whose visits before the node it kept and the node it ran again from. Written once, when
-- the run is created; runs written before, and runs started otherwise, have none.
ALTER TABLE runs ADD COLUMN forked_from TEXT;
