/** Deleting finished runs (DESIGN §8: retention, `skein prune`). */

/** The finished statuses a run is pruned in (DESIGN §8), each with its own cut. */
export type PrunedStatus = "SUCCEEDED" | "FAILED" | "CANCELLED";

/**
 * Which runs `pruneRuns` deletes: top-level runs of a listed status that ended before its time
 * (epoch ms); a status left out is kept. Their child runs (of `workflow` nodes and map items,
 * recursively) go with them whatever their own age, never alone.
 */
export type PruneCut = Partial<Record<PrunedStatus, number>>;

/**
 * Deleting finished runs, inside a write transaction: a tree with a descendant not finished (or,
 * on PostgreSQL, a run another transaction holds) is left for a later batch. DatabaseError on a failure.
 */
export interface PruneTx {
  /** Deletes about `limit` runs, whole trees oldest ended first (at least one), with all their rows; frees their keys; 0: done. */
  pruneRuns(cut: PruneCut, limit: number): Promise<number>;
  /** How many runs `pruneRuns` would delete in all, batch after batch (it deletes nothing). */
  countPrunable(cut: PruneCut): Promise<number>;
}
