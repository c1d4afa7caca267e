/**
 * Runs by a part of their id (Store.findRunsByIdPart), for abbreviated ids in the CLI. Ids are
 * COLLATE "C" (byte order), so a prefix is a range of the primary key's index (chr(65535) is
 * above every character of an id); a suffix has no index (ids are UUIDv7: the random part is the
 * tail), so it scans the primary key (an index-only scan once the table is vacuumed) and reads
 * the few rows it found.
 */
export const runIdStatements = (columns: string) => ({
  prefix: {
    name: "skein_runs_by_id_prefix",
    text: `SELECT ${columns} FROM runs WHERE run_id >= $1 AND run_id < $1 || chr(65535) ORDER BY run_id LIMIT $2`,
  },
  suffix: {
    name: "skein_runs_by_id_suffix",
    text: `SELECT ${columns} FROM runs WHERE run_id IN (
        SELECT run_id FROM runs WHERE right(run_id, char_length($1)) = $1 LIMIT $2)
      ORDER BY run_id`,
  },
});
