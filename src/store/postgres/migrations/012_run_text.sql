-- Skein schema v12 (PostgreSQL), as SQLite's 012_run_text.sql: text search in runs' input and
-- output (`q` of listRuns). pg_trgm GIN indexes over the JSON text of each (ILIKE, case-
-- insensitive, uses them for patterns of 3 characters or more). The extension is created once
-- per database, in schema public (a trusted extension since PostgreSQL 13: the database's owner,
-- or any role with CREATE on it, may create it), under a database-wide advisory lock so that two
-- schemas migrating at once do not race on it; the indexes name its operator class in whichever
-- schema it was installed, since the store's search_path is its own schema only.
SELECT pg_advisory_xact_lock(hashtext('skein:pg_trgm'));
DO $$
DECLARE
  ext_schema text;
BEGIN
  SELECT n.nspname INTO ext_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'pg_trgm';
  IF ext_schema IS NULL THEN
    CREATE EXTENSION pg_trgm SCHEMA public;
    ext_schema := 'public';
  END IF;
  EXECUTE format('CREATE INDEX runs_input_trgm ON runs USING gin ((input::text) %I.gin_trgm_ops)', ext_schema);
  EXECUTE format('CREATE INDEX runs_output_trgm ON runs USING gin ((output::text) %I.gin_trgm_ops)', ext_schema);
END
$$;
