-- Skein schema v25: paused runs (DESIGN §16). `paused` holds why and by whom (JSON) while a run
-- is paused, NULL otherwise. The claim queries leave out a paused run's ready visits and map
-- items with `run_id NOT IN (paused runs)`, read once per query from this partial index, which
-- stays empty (and costs a run's write nothing) until a run is paused; listRuns' filter and the
-- gauge read it too.
ALTER TABLE runs ADD COLUMN paused TEXT;
CREATE INDEX runs_paused ON runs (run_id) WHERE paused IS NOT NULL;
