-- Skein schema v20 (SQLite only; PostgreSQL keeps a row per event, and has no 020): a run's events
-- of one transaction are stored as one row (issue 35). A step writes five to seven events of the
-- same run, and a row with its index entry was a seventh of the CPU a run cost; one row per run
-- and transaction keeps every event (DESIGN §9), in fewer rows.
--
-- `events` holds the events of a run written by one transaction, as a JSON array of
-- [type, node_id, visit, at, data], in seq order. Seqs stay global and increasing: the row's key
-- is the seq of its last event (the writer gives a row of n events the n seqs after the largest
-- one written), and its first is last_seq - count + 1.
CREATE TABLE event_batches (
  last_seq  INTEGER PRIMARY KEY,
  run_id    TEXT    NOT NULL,
  count     INTEGER NOT NULL,
  trace_id  TEXT    NOT NULL,
  events    TEXT    NOT NULL
);
CREATE INDEX event_batches_by_run ON event_batches (run_id, last_seq);

INSERT INTO event_batches (last_seq, run_id, count, trace_id, events)
  SELECT seq, run_id, 1, trace_id, json_array(json_array(type, node_id, visit, at, json(data))) FROM events;
DROP TABLE events;

-- The events one a row, as the table was: for reading the file by hand, and for the history the
-- fault suite's oracles and compensation's order read.
CREATE VIEW events AS
  SELECT b.last_seq - b.count + 1 + j.key AS seq, b.run_id AS run_id, j.value ->> 0 AS type,
         j.value ->> 1 AS node_id, j.value ->> 2 AS visit, b.trace_id AS trace_id, j.value ->> 3 AS at,
         j.value -> 4 AS data
    FROM event_batches b, json_each(b.events) j;
