-- Skein schema v30: token rate limits and provider holds (DESIGN §17), on the rate limits' rows
-- (one per agent type, shared by every engine, read and written under the limits lock).
-- usage_tokens: tokens of reported usage left in the type's `tokens_per_minute` window at
--   updated_at (refilled with time from there; NULL: never spent, the window is full).
-- last_usage: the tokens the type's last attempt used, the next attempt's expectation when its
--   payload sets no larger max_tokens (NULL: none known yet).
-- held_until: a provider answered 429 with Retry-After: no attempt of the type starts on any
--   engine before this time (NULL: never held). A type without rate limits gets a row for it.
ALTER TABLE rate_buckets ADD COLUMN usage_tokens REAL;
ALTER TABLE rate_buckets ADD COLUMN last_usage REAL;
ALTER TABLE rate_buckets ADD COLUMN held_until INTEGER;
