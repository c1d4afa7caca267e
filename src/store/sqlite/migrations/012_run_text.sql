-- Skein schema v12: text search in runs' input and output (`q` of listRuns, GET /v1/runs). An
-- FTS5 index with the trigram tokenizer (case-insensitive substrings of 3 characters or more)
-- over the JSON text of each run's input and output, kept by triggers: a run's input is written
-- once when it starts, its output once when it ends, so the index is written twice per run.
-- The index is contentless (the text stays in runs only); its rowids are run_text_ids.id, an
-- INTEGER PRIMARY KEY, because VACUUM may renumber the implicit rowids of runs.
CREATE TABLE run_text_ids (
  id      INTEGER PRIMARY KEY,
  run_id  TEXT NOT NULL UNIQUE
);
CREATE VIRTUAL TABLE run_text USING fts5(input, output, tokenize = 'trigram', content = '', contentless_delete = 1);

INSERT INTO run_text_ids (run_id) SELECT run_id FROM runs ORDER BY created_at;
INSERT INTO run_text (rowid, input, output)
  SELECT m.id, r.input, r.output FROM runs r JOIN run_text_ids m ON m.run_id = r.run_id;

CREATE TRIGGER run_text_insert AFTER INSERT ON runs BEGIN
  INSERT INTO run_text_ids (run_id) VALUES (new.run_id);
  INSERT INTO run_text (rowid, input, output)
    VALUES ((SELECT id FROM run_text_ids WHERE run_id = new.run_id), new.input, new.output);
END;
CREATE TRIGGER run_text_output AFTER UPDATE OF output ON runs WHEN old.output IS NOT new.output BEGIN
  INSERT OR REPLACE INTO run_text (rowid, input, output)
    VALUES ((SELECT id FROM run_text_ids WHERE run_id = new.run_id), new.input, new.output);
END;
CREATE TRIGGER run_text_delete AFTER DELETE ON runs BEGIN
  DELETE FROM run_text WHERE rowid = (SELECT id FROM run_text_ids WHERE run_id = old.run_id);
  DELETE FROM run_text_ids WHERE run_id = old.run_id;
END;
