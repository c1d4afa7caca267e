-- Skein schema v12 (PostgreSQL), as SQLite's 012_run_text.sql: text search in runs' input and
-- output (`q` of listRuns). pg_trgm GIN indexes over the JSON text of each (ILIKE, case-
-- insensitive, uses them for patterns of 3 characters or more). The extension is created once
-- per database, in schema public (a trusted extension since PostgreSQL 13: the database's owner,
-- or any role with CREATE on it, may create it), under a database-wide advisory lock so that two
-- schemas migrating at once do not race on it; the indexes name its operator class in whichever
-- schema it was installed, since the store's search_path is its own schema only. Where the
-- extension cannot be created, the migration goes on without the indexes (below).
SELECT pg_advisory_xact_lock(hashtext('skein:pg_trgm'));
DO $$
DECLARE
  ext_schema text;
BEGIN
  SELECT n.nspname INTO ext_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'pg_trgm';
  IF ext_schema IS NULL THEN
    BEGIN
      CREATE EXTENSION pg_trgm SCHEMA public;
      ext_schema := 'public';
    EXCEPTION WHEN insufficient_privilege OR undefined_file OR feature_not_supported THEN
      -- A role that may not create it, or a server without the contrib package: search still
      -- works (ILIKE reads every run of the filter), only without the index. Creating pg_trgm
      -- later and these two indexes by hand gives it back; the warning says so once, here.
      RAISE WARNING 'skein: pg_trgm is not available (%): text search in runs (q) will not use an index; CREATE EXTENSION pg_trgm and the indexes runs_input_trgm, runs_output_trgm (see migration 012) to give it one', SQLERRM;
      RETURN;
    END;
  END IF;
  -- Not a map's item runs (as SQLite's index): the runs list does not show them.
  EXECUTE format('CREATE INDEX runs_input_trgm ON runs USING gin ((input::text) %I.gin_trgm_ops)
    WHERE strpos(workflow_id, ''/'') = 0', ext_schema);
  EXECUTE format('CREATE INDEX runs_output_trgm ON runs USING gin ((output::text) %I.gin_trgm_ops)
    WHERE strpos(workflow_id, ''/'') = 0', ext_schema);
END
$$;
