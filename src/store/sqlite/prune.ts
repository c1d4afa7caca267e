/** Pruning finished runs on SQLite (DESIGN §8): the statements of prune-trees.ts. */
import type Database from "better-sqlite3";
import type { PruneCut, PruneTx } from "../prune.js";
import { type PruneRow, type PruneStatements, pruneBatch } from "../prune-trees.js";

/** Run ids are bound as one JSON array, read back with json_each. */
const IDS = "(SELECT value FROM json_each(?))";

/**
 * Every run a cut reaches, with the root of its tree: top-level runs (by the index of finished
 * runs, migration 007), then `workflow` children (runs_by_parent) and map items' runs (map_items).
 */
const TREES = `WITH RECURSIVE tree(root, run_id) AS (
    SELECT run_id, run_id FROM runs WHERE parent IS NULL AND ended_at IS NOT NULL
      AND ((status = 'SUCCEEDED' AND ended_at < @succeeded) OR (status = 'FAILED' AND ended_at < @failed)
           OR (status = 'CANCELLED' AND ended_at < @cancelled))
    UNION
    SELECT t.root, c.run_id FROM tree t JOIN runs c
      ON c.parent IS NOT NULL AND json_extract(c.parent, '$.item') IS NULL AND json_extract(c.parent, '$.run_id') = t.run_id
    UNION
    SELECT t.root, m.child_run_id FROM tree t JOIN map_items m ON m.run_id = t.run_id AND m.child_run_id IS NOT NULL
  )`;

export function sqlitePrune(db: Database.Database): PruneTx {
  const s = {
    roots: db.prepare(
      `SELECT run_id FROM runs WHERE status = ? AND parent IS NULL AND ended_at IS NOT NULL AND ended_at < ?
        ORDER BY ended_at LIMIT ?`,
    ),
    children: db.prepare(
      `SELECT run_id, json_extract(parent, '$.run_id') AS parent_id FROM runs
        WHERE parent IS NOT NULL AND json_extract(parent, '$.item') IS NULL AND json_extract(parent, '$.run_id') IN ${IDS}
       UNION
       SELECT child_run_id, run_id FROM map_items WHERE run_id IN ${IDS} AND child_run_id IS NOT NULL`,
    ),
    rows: db.prepare(`SELECT run_id, status, ended_at FROM runs WHERE run_id IN ${IDS}`),
    deletes: [
      ...["event_batches", "inbox", "compensations", "map_items", "steps", "visits", "run_tags", "runs"].map((table) =>
        db.prepare(`DELETE FROM ${table} WHERE run_id IN ${IDS}`),
      ),
      db.prepare(`DELETE FROM run_trees WHERE root_run_id IN ${IDS}`), // a pruned root's tree count (migration 015)
    ],
    count: db.prepare(
      `${TREES} SELECT coalesce(sum(n), 0) AS n FROM (
         SELECT count(*) AS n FROM tree t JOIN runs r ON r.run_id = t.run_id GROUP BY t.root
         HAVING sum(r.status NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) = 0)`,
    ),
  };
  const statements: PruneStatements = {
    roots: async (status, before, limit) => s.roots.pluck().all(status, before, limit) as string[],
    children: async (runIds) => {
      const ids = JSON.stringify(runIds);
      return s.children.all(ids, ids) as { run_id: string; parent_id: string }[];
    },
    // One writer: nothing else holds these runs.
    lock: async (runIds) => s.rows.all(JSON.stringify(runIds)) as PruneRow[],
    deleteRuns: async (runIds) => {
      const ids = JSON.stringify(runIds);
      for (const statement of s.deletes) statement.run(ids);
    },
  };
  return {
    pruneRuns: (cut, limit) => pruneBatch(statements, cut, limit),
    countPrunable: async (cut: PruneCut) =>
      s.count.pluck().get({
        succeeded: cut.SUCCEEDED ?? null,
        failed: cut.FAILED ?? null,
        cancelled: cut.CANCELLED ?? null,
      }) as number,
  };
}
