/**
 * Usage and budgets in the flush's transaction (DESIGN §12): a usage report added to its run and
 * every run above it (all locked as the flush began: `runsToLock` takes `usage_runs`), and the
 * budget check before an attempt starts. A run without a budget above it costs nothing here: its
 * own figures are in memory, and ancestors are read only when the run names budgeted ones.
 *
 * Budgets reserve (DESIGN §13.1): before an attempt of an `llm` node or an agent starts under a
 * budget, its expected usage goes into each budgeted run's `reserved` (`reserveFor`), those runs
 * locked by this transaction (a run another engine holds right now: the attempt waits, ready);
 * the attempt starts only while usage plus what is reserved is under the budget. Its reservation
 * is taken out when the attempt ends (`release`, whatever ended it); one that could
 * not be taken out then (its budgeted run busy elsewhere) is found stale and dropped the next
 * time it stands in an attempt's way (`dropStale`).
 *
 * `Budget` is the flush's step: built with it, it keeps what one flush read and released.
 */
import { parseExecutionId } from "../../core/attempt.js";
import {
  addUsage,
  BUDGET_EXCEEDED,
  budgetedRuns,
  budgetReached,
  exemptFromBudget,
  expectedUsage,
  parseReservationKey,
  reservationFits,
  reservationKey,
  withoutReservations,
  withReservation,
} from "../../core/budget.js";
import { failVisit, type RunState } from "../../core/scheduler.js";
import type { Run, RunUsage, Usage, Visit, VisitError } from "../../core/types.js";
import { kindOf } from "../../definition/kinds/index.js";
import type { FlushContext } from "./context.js";
import type { DispatcherOptions } from "./dispatcher-options.js";

/**
 * The last usage reported per node (`<workflow_id>#<node_id>`) and per agent type, on this
 * engine: an attempt's expectation when its payload sets no max_tokens. Kept per engine (its
 * dispatcher's options), in memory: another engine learns it from its own first call.
 */
const lastUsage = new WeakMap<DispatcherOptions, Map<string, RunUsage>>();

function memory(o: DispatcherOptions): Map<string, RunUsage> {
  let m = lastUsage.get(o);
  if (!m) lastUsage.set(o, (m = new Map()));
  return m;
}

/** Adds `usage` to each run of `runIds` (an attempt's run, then the runs above it); `executionId`: the attempt's, to learn from. */
export async function addRunUsage(
  f: FlushContext,
  runIds: readonly string[],
  usage: Usage,
  executionId?: string,
): Promise<void> {
  for (const id of runIds) {
    const rs = await f.load(id);
    if (!rs) continue; // pruned since: nothing to add to
    rs.run.usage = addUsage(rs.run.usage, usage);
    rs.changes.runUpdated = true;
  }
  const key = executionId === undefined ? null : parseExecutionId(executionId);
  const rs = key ? f.states.get(key.run_id) : undefined;
  const v = key ? rs?.current.get(key.node_id) : undefined;
  if (rs && v) {
    const figures = addUsage({ tokens_in: 0, tokens_out: 0, cost: 0 }, usage);
    memory(f.o).set(`${rs.run.workflow_id}#${v.node_id}`, figures);
    memory(f.o).set(v.agent_type, figures);
  }
}

/** Attempts that reserve under a budget: `llm` nodes and agents' (not `http`, whose calls report no usage). */
function reserves(agentType: string): boolean {
  const kind = kindOf(agentType);
  return kind.start === "agent" && kind.name !== "http" && kind.name !== "aggregator";
}

/** The flush's budget step: reservations, and the budgets it read of runs above those it holds. */
export class Budget {
  /** Budgets and usage of runs above claimed ones, read once per flush. */
  private readonly budgets = new Map<string, Pick<Run, "run_id" | "usage" | "budget">>();
  /** Runs whose reservations this flush checked already (`dropStale` reads each run's once). */
  private readonly checked = new Set<string>();
  /** Agent types whose reservations this flush took out: told to workers and other engines with its write. */
  private readonly released = new Set<string>();

  constructor(private readonly f: FlushContext) {}

  /**
   * Reserves the expected usage of `v`'s next attempt against every budget it counts toward;
   * true when the attempt may start (reserved, or nothing to reserve), false when it waits (a
   * budgeted run is busy in another engine's transaction, or its budget is taken up by attempts
   * in flight). Called after `stops` let it through, right before the claim.
   */
  async reserveFor(rs: RunState, v: Visit): Promise<boolean> {
    if (!reserves(v.agent_type) || exemptFromBudget(v, rs.current)) return true;
    const ids = budgetedRuns(rs.run);
    if (ids.length === 0) return true;
    const runs: RunState[] = [];
    for (const id of ids) {
      const x = id === rs.run.run_id ? rs : await this.f.load(id); // locked: engines take turns on a budget
      if (!x) return false;
      runs.push(x);
    }
    const m = memory(this.f.o);
    const expected = expectedUsage(v.payload, m.get(`${rs.run.workflow_id}#${v.node_id}`) ?? m.get(v.agent_type));
    for (const x of runs) {
      if (reservationFits(x.run, expected)) continue;
      if (!(await this.dropStale(x)) || !reservationFits(x.run, expected)) return false;
    }
    const key = reservationKey(v.execution_id, v.attempt + 1); // the attempt the claim starts
    const before = reservationKey(v.execution_id, v.attempt);
    for (const x of runs) {
      x.run.reserved = withReservation(x.run.reserved, key, expected, before);
      x.changes.runUpdated = true;
    }
    return true;
  }

  /**
   * Takes out of `x`'s reservations those of attempts that are no longer running (their end was
   * not seen with `x` at hand); true when it dropped any. Once per run and flush.
   */
  private async dropStale(x: RunState): Promise<boolean> {
    const f = this.f;
    if (this.checked.has(x.run.run_id) || !x.run.reserved) return false;
    this.checked.add(x.run.run_id);
    const stale: string[] = [];
    for (const k of Object.keys(x.run.reserved)) {
      const { execution_id, attempt } = parseReservationKey(k);
      const key = parseExecutionId(execution_id);
      const v = key ? (f.states.get(key.run_id)?.current.get(key.node_id) ?? (await f.tx.getVisit(key))) : null;
      const running = v?.visit === key?.visit && v?.state === "RUNNING" && v?.attempt === attempt;
      if (!running) stale.push(k);
    }
    if (stale.length === 0) return false;
    x.run.reserved = withoutReservations(x.run.reserved, stale);
    x.changes.runUpdated = true;
    return true;
  }

  /**
   * Takes out the reservations of the attempts that ended in this flush (a result, a failure, a
   * cancel, a lease or deadline passed, a lost engine: any visit of a reserving kind this flush
   * changed and left not RUNNING). When any was taken out, ready visits held back for the budget
   * are looked for again (this engine's backlog; workers and other engines by `announce`).
   * An attempt that succeeded reporting nothing teaches its node an expectation of nothing (so an
   * agent that reports no usage is a probe only once).
   */
  async release(): Promise<void> {
    const f = this.f;
    const m = memory(f.o);
    for (const rs of [...f.states.values()]) {
      const ids = budgetedRuns(rs.run);
      if (ids.length === 0) continue;
      for (const v of rs.changes.updated) {
        if (v.state === "RUNNING" || v.attempt === 0 || !reserves(v.agent_type)) continue;
        const key = reservationKey(v.execution_id, v.attempt);
        for (const id of ids) {
          const x = id === rs.run.run_id ? rs : (f.states.get(id) ?? (await f.load(id)));
          if (!x?.run.reserved?.[key]) continue;
          x.run.reserved = withoutReservations(x.run.reserved, [key]);
          x.changes.runUpdated = true;
          this.released.add(v.agent_type);
        }
        const node = `${rs.run.workflow_id}#${v.node_id}`;
        if (v.state === "SUCCEEDED" && !m.has(node)) m.set(node, { tokens_in: 0, tokens_out: 0, cost: 0 });
      }
    }
    if (this.released.size > 0) for (const type of f.o.agentTypes()) f.backlog.add(type);
  }

  /** Tells workers (after commit) and other engines (with the write) that visits held for a budget may start now. */
  announce(): void {
    const f = this.f;
    for (const type of this.released) {
      if (!f.out.waiting.includes(type)) f.out.waiting.push(type);
      if (!f.o.store.exclusive && !f.notify.some((n) => n.agentType === type && n.runIds.length === 0)) {
        f.notify.push({ agentType: type, runIds: [] });
      }
    }
  }

  /**
   * Why no further attempt may start in `rs`: its own budget reached, or that of a run above it;
   * null while every budget holds. Ancestors this flush holds are judged as it left them; others
   * are read once per flush.
   */
  async error(rs: RunState): Promise<VisitError | null> {
    const f = this.f;
    const own = budgetReached(rs.run, "this run");
    if (own) return own;
    const above = rs.run.parent?.budgeted;
    if (!above || above.length === 0) return null;
    const unread = above.filter((id) => !f.states.has(id) && !this.budgets.has(id));
    if (unread.length > 0) for (const r of await f.tx.runBudgets(unread)) this.budgets.set(r.run_id, r);
    for (const id of above) {
      const run = f.states.get(id)?.run ?? this.budgets.get(id);
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
  async stops(rs: RunState, v: Visit): Promise<boolean> {
    if (exemptFromBudget(v, rs.current)) return false;
    const error = await this.error(rs);
    if (!error) return false;
    failVisit(rs, v, BUDGET_EXCEEDED, error, this.f.now);
    return true;
  }

  /**
   * Whether the budgets `rs` counts toward leave room beyond what attempts in flight reserved
   * (before a map starts more items while some run: their attempts would only wait). A budgeted
   * run another engine holds right now is taken to have room: the items' attempts reserve anyway.
   */
  async room(rs: RunState): Promise<boolean> {
    for (const id of budgetedRuns(rs.run)) {
      const x = id === rs.run.run_id ? rs : await this.f.load(id);
      if (x && !reservationFits(x.run, { tokens: 0, cost: 0 })) return false;
    }
    return true;
  }
}
