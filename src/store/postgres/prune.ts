/**
 * Pruning finished runs on PostgreSQL (DESIGN §8): the statements of prune-trees.ts. Plain
 * DELETEs of one batch in a short transaction, so autovacuum reclaims the rows as it does any
 * others and no lock is held long enough to stall another engine's dispatch.
 */

import type { PruneTx } from "../prune.js";
import { type PruneRow, type PruneStatements, pruneBatch } from "../prune-trees.js";

type Query = <R extends object>(config: { name?: string; text: string }, values: unknown[]) => Promise<R[]>;

/** Every run a cut reaches, with the root of its tree (see sqlite/prune.ts). */
const COUNT = `WITH RECURSIVE tree(root, run_id) AS (
    SELECT run_id, run_id FROM runs WHERE parent IS NULL AND ended_at IS NOT NULL
      AND ((status = 'SUCCEEDED' AND ended_at < $1) OR (status = 'FAILED' AND ended_at < $2)
           OR (status = 'CANCELLED' AND ended_at < $3))
    UNION
    SELECT t.root, k.run_id FROM tree t CROSS JOIN LATERAL (
      SELECT c.run_id FROM runs c
        WHERE c.parent IS NOT NULL AND c.parent->>'item' IS NULL AND c.parent->>'run_id' = t.run_id
      UNION ALL
      SELECT m.child_run_id FROM map_items m WHERE m.run_id = t.run_id AND m.child_run_id IS NOT NULL) k
  )
  SELECT coalesce(sum(n), 0)::int AS n FROM (
    SELECT count(*) AS n FROM tree t JOIN runs r ON r.run_id = t.run_id GROUP BY t.root
    HAVING bool_and(r.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED'))) trees`;

const SQL = {
  roots: {
    name: "skein_prune_roots",
    text: `SELECT run_id FROM runs WHERE status = $1 AND parent IS NULL AND ended_at IS NOT NULL AND ended_at < $2
            ORDER BY ended_at LIMIT $3`,
  },
  children: {
    name: "skein_prune_children",
    text: `SELECT run_id, parent->>'run_id' AS parent_id FROM runs
            WHERE parent IS NOT NULL AND parent->>'item' IS NULL AND parent->>'run_id' = ANY($1::text[])
           UNION
           SELECT child_run_id, run_id FROM map_items WHERE run_id = ANY($1::text[]) AND child_run_id IS NOT NULL`,
  },
  // SKIP LOCKED: a run another transaction holds (a redrive, an event sent to it) is left out,
  // and its tree with it, rather than waited for.
  lock: {
    name: "skein_prune_lock",
    text: "SELECT run_id, status, ended_at FROM runs WHERE run_id = ANY($1::text[]) FOR UPDATE SKIP LOCKED",
  },
  // One statement: its foreign keys (visits, compensations and inbox rows refer to runs) are
  // checked at its end, when the rows that refer to the runs are gone too.
  delete: {
    name: "skein_prune_delete",
    text: `WITH e AS (DELETE FROM events WHERE run_id = ANY($1::text[])),
           i AS (DELETE FROM inbox WHERE run_id = ANY($1::text[])),
           c AS (DELETE FROM compensations WHERE run_id = ANY($1::text[])),
           m AS (DELETE FROM map_items WHERE run_id = ANY($1::text[])),
           s AS (DELETE FROM steps WHERE run_id = ANY($1::text[])),
           v AS (DELETE FROM visits WHERE run_id = ANY($1::text[])),
           t AS (DELETE FROM run_trees WHERE root_run_id = ANY($1::text[]))
           DELETE FROM runs WHERE run_id = ANY($1::text[])`,
  },
} as const;

/** The pruning statements of one transaction, through its query function. */
export function postgresPrune(q: Query): PruneTx {
  const statements: PruneStatements = {
    roots: async (status, before, limit) =>
      (await q<{ run_id: string }>(SQL.roots, [status, before, limit])).map((r) => r.run_id),
    children: (runIds) => q<{ run_id: string; parent_id: string }>(SQL.children, [runIds]),
    lock: async (runIds) =>
      (await q<PruneRow>(SQL.lock, [runIds])).map((r) => ({
        ...r,
        ended_at: r.ended_at === null ? null : Number(r.ended_at),
      })),
    deleteRuns: async (runIds) => {
      await q(SQL.delete, [runIds]);
    },
  };
  return {
    pruneRuns: (cut, limit) => pruneBatch(statements, cut, limit),
    countPrunable: async (cut) => {
      const [row] = await q<{ n: number }>({ text: COUNT }, [
        cut.SUCCEEDED ?? null,
        cut.FAILED ?? null,
        cut.CANCELLED ?? null,
      ]);
      return row?.n ?? 0;
    },
  };
}
