/**
 * One batch of pruning (DESIGN §8), the same on both stores: which runs go, built from a few
 * statements each store writes in its own SQL. A run goes with its whole tree (its child runs,
 * their children, its map items' runs), never a child alone while its parent lives, and never a
 * tree with a run still in progress.
 */
import type { PruneCut, PrunedStatus } from "./store.js";

export const PRUNED_STATUSES: readonly PrunedStatus[] = ["SUCCEEDED", "FAILED", "CANCELLED"];

/** A run as a batch sees it. */
export interface PruneRow {
  run_id: string;
  status: string;
  ended_at: number | null;
}

/** The statements a store gives a batch, all inside its write transaction. */
export interface PruneStatements {
  /** Top-level runs of `status` that ended before `before`, oldest ended first, at most `limit`. */
  roots(status: PrunedStatus, before: number, limit: number): Promise<string[]>;
  /** The child runs of these runs (`workflow` children and map items' runs), with their parent. */
  children(runIds: string[]): Promise<{ run_id: string; parent_id: string }[]>;
  /**
   * These runs as they are now. PostgreSQL locks them, skipping any another transaction holds
   * (left out of the answer, so their tree waits for a later batch).
   */
  lock(runIds: string[]): Promise<PruneRow[]>;
  /** Deletes these runs and every row that belongs to them, children's rows before parents'. */
  deleteRuns(runIds: string[]): Promise<void>;
}

const isPrunedStatus = (status: string): status is PrunedStatus => (PRUNED_STATUSES as string[]).includes(status);

/** Deletes whole trees, oldest first, until about `limit` runs went (at least one tree). */
export async function pruneBatch(s: PruneStatements, cut: PruneCut, limit: number): Promise<number> {
  const roots: string[] = [];
  for (const status of PRUNED_STATUSES) {
    const before = cut[status];
    if (before === undefined || roots.length >= limit) continue;
    roots.push(...(await s.roots(status, before, limit - roots.length)));
  }
  if (roots.length === 0) return 0;

  // The trees, level by level; a run reached twice (a map item carried over by a redrive) counts once.
  const rootOf = new Map(roots.map((id) => [id, id]));
  const members = new Map(roots.map((id) => [id, [id]]));
  for (let level = roots; level.length > 0; ) {
    const next: string[] = [];
    for (const { run_id, parent_id } of await s.children(level)) {
      if (rootOf.has(run_id)) continue;
      const root = rootOf.get(parent_id) as string;
      rootOf.set(run_id, root);
      members.get(root)?.push(run_id);
      next.push(run_id);
    }
    level = next;
  }

  const now = new Map((await s.lock([...rootOf.keys()])).map((r) => [r.run_id, r]));
  const prunable = (root: string): boolean => {
    const r = now.get(root);
    // Checked again as locked: a redrive may have run it again since it was chosen.
    const before = r && isPrunedStatus(r.status) ? cut[r.status] : undefined;
    if (!r || before === undefined || r.ended_at === null || r.ended_at >= before) return false;
    return (members.get(root) ?? []).every((id) => {
      const m = now.get(id);
      return m !== undefined && isPrunedStatus(m.status);
    });
  };

  const doomed: string[] = [];
  for (const root of roots) {
    if (doomed.length >= limit) break;
    if (prunable(root)) doomed.push(...(members.get(root) ?? []));
  }
  if (doomed.length > 0) await s.deleteRuns(doomed);
  return doomed.length;
}
