-- Skein schema v13: the text index (migration 012) is written in batches, not by each engine
-- transaction. FTS5 writes a segment of its index per transaction: tokenizing one run's input
-- in the transaction that starts it cost about 90 µs a row, the same rows in batches about 10.
-- The triggers now only queue what to index (2 × id: a run's input, 2 × id + 1: its output), and
-- the store indexes the queue in the next write transaction, at most every INDEX_TEXT_EVERY_MS.
-- A search reads the index and, for what is still queued, the runs' text itself.
CREATE TABLE run_text_queue (
  k  INTEGER PRIMARY KEY
);

DROP TRIGGER run_text_insert;
DROP TRIGGER run_text_output;
DROP TRIGGER run_text_delete;

CREATE TRIGGER run_text_insert AFTER INSERT ON runs WHEN instr(new.workflow_id, '/') = 0 BEGIN
  INSERT INTO run_text_ids (run_id) VALUES (new.run_id);
  INSERT INTO run_text_queue (k) VALUES (2 * last_insert_rowid());
END;
CREATE TRIGGER run_text_output AFTER UPDATE OF output ON runs
  WHEN old.output IS NOT new.output AND instr(new.workflow_id, '/') = 0 BEGIN
  INSERT OR IGNORE INTO run_text_queue (k) SELECT 2 * id + 1 FROM run_text_ids WHERE run_id = new.run_id;
END;
CREATE TRIGGER run_text_delete AFTER DELETE ON runs WHEN instr(old.workflow_id, '/') = 0 BEGIN
  DELETE FROM run_text WHERE rowid IN (
    SELECT 2 * id FROM run_text_ids WHERE run_id = old.run_id
    UNION ALL SELECT 2 * id + 1 FROM run_text_ids WHERE run_id = old.run_id);
  DELETE FROM run_text_queue WHERE k IN (
    SELECT 2 * id FROM run_text_ids WHERE run_id = old.run_id
    UNION ALL SELECT 2 * id + 1 FROM run_text_ids WHERE run_id = old.run_id);
  DELETE FROM run_text_ids WHERE run_id = old.run_id;
END;
