-- Skein schema v30 (PostgreSQL), as SQLite's 030_token_rates.sql: token rate limits and provider
-- holds (DESIGN §17) on the rate limits' rows. usage_tokens: tokens left in the type's
-- tokens_per_minute window at updated_at (NULL: full); last_usage: the tokens the type's last
-- attempt used (NULL: none known); held_until: no attempt of the type starts before it (a 429's
-- Retry-After; NULL: never held).
ALTER TABLE rate_buckets ADD COLUMN usage_tokens double precision;
ALTER TABLE rate_buckets ADD COLUMN last_usage double precision;
ALTER TABLE rate_buckets ADD COLUMN held_until bigint;
