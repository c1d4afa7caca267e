/**
 * Usage and budgets in the flush's transaction (DESIGN §12): a usage report added to its run and
 * every run above it (all locked as the flush began: `inputRuns` takes `usage_runs`), and the
 * budget check before an attempt starts. A run without a budget above it costs nothing here: its
 * own figures are in memory, and ancestors are read only when the run names budgeted ones.
 */
import { addUsage, BUDGET_EXCEEDED, budgetReached, exemptFromBudget } from "../core/budget.js";
import { failVisit, type RunState } from "../core/scheduler.js";
import type { Usage, Visit, VisitError } from "../core/types.js";
import type { Flush } from "./flush.js";

/** Adds `usage` to each run of `runIds` (an attempt's run, then the runs above it). */
export async function addRunUsage(f: Flush, runIds: readonly string[], usage: Usage): Promise<void> {
  for (const id of runIds) {
    const rs = await f.load(id);
    if (!rs) continue; // pruned since: nothing to add to
    rs.run.usage = addUsage(rs.run.usage, usage);
    rs.changes.runUpdated = true;
  }
}

/**
 * Why no further attempt may start in `rs`: its own budget reached, or that of a run above it;
 * null while every budget holds. Ancestors this flush holds are judged as it left them; others
 * are read once per flush.
 */
export async function budgetError(f: Flush, rs: RunState): Promise<VisitError | null> {
  const own = budgetReached(rs.run, "this run");
  if (own) return own;
  const above = rs.run.parent?.budgeted;
  if (!above || above.length === 0) return null;
  const unread = above.filter((id) => !f.states.has(id) && !f.budgets.has(id));
  if (unread.length > 0) for (const r of await f.tx.runBudgets(unread)) f.budgets.set(r.run_id, r);
  for (const id of above) {
    const run = f.states.get(id)?.run ?? f.budgets.get(id);
    const error = run ? budgetReached(run, "an ancestor") : null;
    if (error) return error;
  }
  return null;
}

/**
 * Before a ready visit's attempt starts (or a `workflow` child, or a map's items): a budget
 * reached fails it `budget_exceeded`, not retried, routable by next_on_failure. True when it did.
 * The node that next_on_failure routes such a failure to is let through (`exemptFromBudget`).
 */
export async function budgetStops(f: Flush, rs: RunState, v: Visit): Promise<boolean> {
  if (exemptFromBudget(v, rs.current)) return false;
  const error = await budgetError(f, rs);
  if (!error) return false;
  failVisit(rs, v, BUDGET_EXCEEDED, error, f.now);
  return true;
}
