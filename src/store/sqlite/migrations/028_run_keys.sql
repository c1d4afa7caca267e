-- Skein schema v28: one active run per key, and debounce (DESIGN §17). `key` is startRun's key
-- (NULL for most runs); `queued` (JSON) why a QUEUED run waits, NULL once it began. The index
-- holds only the keyed runs that have not ended: a start or an end of a keyed run reads its
-- key's runs from it, and it costs every other run's write nothing.
ALTER TABLE runs ADD COLUMN key TEXT;
ALTER TABLE runs ADD COLUMN queued TEXT;
CREATE INDEX runs_by_key ON runs (workflow_id, key) WHERE key IS NOT NULL AND ended_at IS NULL;
