import type { RunState } from "../../core/scheduler.js";
import { HELD_STATES, isTerminal } from "../../core/states.js";

/**
 * Run states kept between transactions, so a busy run's visits are not re-read from the
 * database for every result: a step then costs the same in a workflow of 10 nodes or 1,000.
 * Each is kept with the run's revision (LoadedRun), which every write of the run by another raises; a
 * transaction uses a kept state only if the database still has that revision, so another
 * engine's or a client's write is never missed. Runs touched by a transaction that rolled back
 * are forgotten, finished runs and runs that only wait (a sleep, a review: rows with a due time)
 * dropped (a finished run is kept while cancelled attempts still return to it: a map's items,
 * cancelled a chunk a flush, each settle into it), and the least recently used go first when the cache is full.
 */
export class RunCache {
  private readonly runs = new Map<string, { state: RunState; revision: number }>();

  constructor(private readonly capacity: number) {}

  get(runId: string): { state: RunState; revision: number } | undefined {
    return this.runs.get(runId);
  }

  /** The revisions of those of `runIds` that are kept: a load of one still at it reads nothing. */
  revisions(runIds: Iterable<string>): Map<string, number> {
    const known = new Map<string, number>();
    for (const runId of runIds) {
      const kept = this.runs.get(runId);
      if (kept) known.set(runId, kept.revision);
    }
    return known;
  }

  /** After a commit: keep what the transaction left, at the revisions it left, most recently used last. */
  keep(states: Iterable<RunState>, revisions: ReadonlyMap<string, number>): void {
    if (this.capacity <= 0) return;
    for (const rs of states) {
      this.runs.delete(rs.run.run_id);
      const revision = revisions.get(rs.run.run_id);
      if (revision === undefined) continue;
      if (rs.run.status === "COMPENSATING" || (rs.run.status === "RUNNING" ? !parked(rs) : awaitsAttempts(rs))) {
        this.runs.set(rs.run.run_id, { state: rs, revision });
      }
    }
    for (const runId of this.runs.keys()) {
      if (this.runs.size <= this.capacity) break;
      this.runs.delete(runId);
    }
  }

  /** After a rollback: the in-memory states are ahead of the database. */
  forget(runIds: Iterable<string>): void {
    for (const runId of runIds) this.runs.delete(runId);
  }
}

/**
 * The run only waits, for a time or a person: nothing runs or is ready, some visit is held
 * (IN_REVIEW, WAITING). It costs no memory until its due time or an input loads it again.
 */
function parked(rs: RunState): boolean {
  let held = false;
  for (const v of rs.current.values()) {
    if (HELD_STATES.includes(v.state)) held = true;
    else if (!isTerminal(v.state) && !(v.state === "PENDING" && v.ready_at === null)) return false;
  }
  return held;
}

/**
 * The run ended, but cancelled visits still hold their attempts until those return (a map's
 * running items, a child run, an in-process attempt being aborted): each return loads the run.
 */
function awaitsAttempts(rs: RunState): boolean {
  for (const v of rs.current.values()) if (v.state === "CANCELLED" && v.holder !== null) return true;
  return false;
}
