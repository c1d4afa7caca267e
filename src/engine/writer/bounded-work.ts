/**
 * Bounded dynamic work (DESIGN §13.1): one root run's tree holds at most `maxRunsPerTree` runs,
 * and one flush starts, writes and cancels a bounded number of runs and item rows, so the
 * transaction stays short and the API keeps answering while a large map or a deep tree grows or
 * is cancelled. What a flush leaves over is continued by the next (the dispatcher asks for it
 * on the next turn of the event loop, after queued requests: a kind step's `leftOver`, `out.more`).
 */
import type { Run, VisitError } from "../../core/types.js";
import type { StoreTx } from "../../store/store.js";

/**
 * Queued inputs one flush applies at most (results, payloads, requests): when a cancel aborts
 * thousands of attempts at once, their results are applied a few hundred a transaction, each
 * loading its run, with the API served between them. Ordinary load (a few per run) stays far below.
 */
export const INPUTS_PER_FLUSH = 200;
/**
 * Child and map item runs one flush starts at most (a map's window fills over several flushes),
 * by store: a SQLite transaction never yields to the event loop, so its flushes stay short; a
 * PostgreSQL one yields at every round trip, and starting a window 20 runs a flush held a map of
 * 10,000 no-op items to two thirds of its speed there (bench pg_map10k).
 */
export function startsPerFlush(exclusive: boolean): number {
  return exclusive ? 20 : 100;
}
/** Map item rows one flush writes at most (a 100,000-item list is written over several flushes). */
export const ITEM_ROWS_PER_FLUSH = 1000;
/** Runs one flush cancels at most as a cancel cascades down a tree (the rest in the next flushes). */
export const CANCELS_PER_FLUSH = 20;
/**
 * Real time a flush spends before it starts or cancels no more runs (the counts above bound a
 * fast machine, this a slow or loaded one): the rest waits for the next flush, after the API
 * has answered what came meanwhile. A measure of work, never a due time (that is the clock's).
 */
export const FLUSH_WORK_MS = 10;
/** The default of the engine option `maxRunsPerTree`. */
export const DEFAULT_MAX_RUNS_PER_TREE = 100_000;

/** The root of the run's tree: its last ancestor, or itself. */
export function rootOf(run: Pick<Run, "run_id" | "parent">): string {
  const ancestors = run.parent?.ancestors;
  if (ancestors && ancestors.length > 0) return ancestors[ancestors.length - 1] as string;
  return run.parent?.run_id ?? run.run_id; // a child started before schema v11 names its parent only
}

/**
 * Counts `runs` more in the tree of `run` (the run that starts them), or, when that would pass
 * `limit` (the engine's `maxRunsPerTree`), the visit's error (`tree_limit`) and nothing counted.
 */
export async function treeRefusal(
  tx: StoreTx,
  limit: number,
  run: Pick<Run, "run_id" | "parent">,
  runs: number,
): Promise<VisitError | null> {
  const root = rootOf(run);
  if ((await tx.raiseTreeRuns(root, runs, limit)) !== null) return null;
  return {
    message:
      `the tree of root run ${root} may hold at most ${limit} runs (engine option maxRunsPerTree), and starting ` +
      `${runs} more would pass it: raise maxRunsPerTree, or start fewer child runs (does a workflow start itself?)`,
    reason: "tree_limit",
    details: { root_run_id: root, max_runs_per_tree: limit },
  };
}

/**
 * What one flush may still start, write and cancel: a count, and none once it has worked
 * FLUSH_WORK_MS (a slow machine starts fewer per flush, never answers later); what it leaves
 * over, the next flush continues.
 */
export class WorkBounds {
  private readonly maxStarts: number;
  private starts: number;
  private cancels = CANCELS_PER_FLUSH;
  /** Map item rows the flush may still write. */
  rowsLeft = ITEM_ROWS_PER_FLUSH;
  private readonly began = performance.now();

  constructor(exclusive: boolean) {
    this.maxStarts = this.starts = startsPerFlush(exclusive);
  }

  // The time bound applies once the flush has started (cancelled) some: every flush makes progress.
  get startsLeft(): number {
    return this.starts < this.maxStarts && this.overTime() ? Math.min(0, this.starts) : this.starts;
  }
  set startsLeft(n: number) {
    this.starts = n;
  }
  get cancelsLeft(): number {
    return this.cancels < CANCELS_PER_FLUSH && this.overTime() ? Math.min(0, this.cancels) : this.cancels;
  }
  set cancelsLeft(n: number) {
    this.cancels = n;
  }
  private overTime(): boolean {
    return performance.now() - this.began > FLUSH_WORK_MS;
  }
}
