-- Skein schema v14: scopes at run time and the engine's own idempotency keys (DESIGN §13.1).
-- `runs.scope` is the JSON list of workflow patterns of the principal that started the run's
-- root (a scoped token's `workflows`), inherited by its child runs and map items; NULL: every
-- workflow (an unscoped caller, the library). `schedules.scope` is the scope of the token that
-- put the schedule, given to the runs its slots start.
ALTER TABLE runs ADD COLUMN scope TEXT;
ALTER TABLE schedules ADD COLUMN scope TEXT;
-- The keys the engine made before this version (`<execution_id>:<attempt>[:<index>]` of child
-- runs and map items, `schedule:<id>:<slot>` of schedule slots) move under the reserved prefix
-- `skein:`, which clients may no longer write: a child, an item or a slot the engine started
-- before the upgrade is found again under its new key and never started twice. Runs are told
-- apart by what the engine alone sets (a parent, a schedule_id), never by the key's shape, so a
-- client's run under a key of that shape keeps its key. A key whose new form a client already
-- took (`skein:` was not reserved before) is left as it was: the engine then finds the client's
-- run under its key, sees it is not its own, and fails the visit (or skips the slot) saying so.
UPDATE runs SET idempotency_key = 'skein:' || idempotency_key
WHERE idempotency_key IS NOT NULL
  AND substr(idempotency_key, 1, 6) <> 'skein:'
  AND (parent IS NOT NULL OR (schedule_id IS NOT NULL AND substr(idempotency_key, 1, 9) = 'schedule:'))
  AND NOT EXISTS (SELECT 1 FROM runs AS taken WHERE taken.idempotency_key = 'skein:' || runs.idempotency_key);
