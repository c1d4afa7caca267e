-- Skein schema v12: text search in runs' input and output (`q` of listRuns, GET /v1/runs). An
-- FTS5 index with the trigram tokenizer (case-insensitive substrings of 3 characters or more)
-- over the JSON text of each run's input and output, kept by triggers. Each run has two rows:
-- its input (rowid 2 × id), written when it starts, and its output (2 × id + 1), written when it
-- ends; so nothing is tokenized twice. A map's item runs (workflow ids with a '/') are not
-- indexed: there can be thousands per map, the runs list does not show them, and the map's item
-- page finds them by index. The index is contentless (the text stays in runs only); its ids are
-- run_text_ids.id, an INTEGER PRIMARY KEY, because VACUUM may renumber the implicit rowids of runs.
CREATE TABLE run_text_ids (
  id      INTEGER PRIMARY KEY,
  run_id  TEXT NOT NULL UNIQUE
);
CREATE VIRTUAL TABLE run_text USING fts5(text, tokenize = 'trigram', content = '', contentless_delete = 1);

INSERT INTO run_text_ids (run_id) SELECT run_id FROM runs WHERE instr(workflow_id, '/') = 0 ORDER BY created_at;
INSERT INTO run_text (rowid, text)
  SELECT 2 * m.id, r.input FROM runs r JOIN run_text_ids m ON m.run_id = r.run_id;
INSERT INTO run_text (rowid, text)
  SELECT 2 * m.id + 1, r.output FROM runs r JOIN run_text_ids m ON m.run_id = r.run_id WHERE r.output IS NOT NULL;

CREATE TRIGGER run_text_insert AFTER INSERT ON runs WHEN instr(new.workflow_id, '/') = 0 BEGIN
  INSERT INTO run_text_ids (run_id) VALUES (new.run_id);
  INSERT INTO run_text (rowid, text) VALUES (2 * last_insert_rowid(), new.input);
END;
CREATE TRIGGER run_text_output AFTER UPDATE OF output ON runs
  WHEN old.output IS NOT new.output AND instr(new.workflow_id, '/') = 0 BEGIN
  INSERT OR REPLACE INTO run_text (rowid, text)
    VALUES (2 * (SELECT id FROM run_text_ids WHERE run_id = new.run_id) + 1, new.output);
END;
CREATE TRIGGER run_text_delete AFTER DELETE ON runs WHEN instr(old.workflow_id, '/') = 0 BEGIN
  DELETE FROM run_text WHERE rowid IN (
    SELECT 2 * id FROM run_text_ids WHERE run_id = old.run_id
    UNION ALL SELECT 2 * id + 1 FROM run_text_ids WHERE run_id = old.run_id);
  DELETE FROM run_text_ids WHERE run_id = old.run_id;
END;
