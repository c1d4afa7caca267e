import type { RunState } from "../core/scheduler.js";
import { HELD_STATES, isTerminal } from "../core/states.js";

/**
 * Run states kept between transactions, so a busy run is not re-read from the database for
 * every result. Valid only while this engine is the database's only writer (SQLite: one engine
 * per file); runs touched by a transaction that rolled back are forgotten, finished runs and runs
 * that only wait (a sleep, a review: rows with a due time) dropped, and the least recently used
 * go first when the cache is full.
 */
export class RunCache {
  private readonly runs = new Map<string, RunState>();

  constructor(private readonly capacity: number) {}

  get(runId: string): RunState | undefined {
    return this.runs.get(runId);
  }

  /** After a commit: keep what the transaction left, most recently used last. */
  keep(states: Iterable<RunState>): void {
    if (this.capacity <= 0) return;
    for (const rs of states) {
      this.runs.delete(rs.run.run_id);
      if (rs.run.status === "COMPENSATING" || (rs.run.status === "RUNNING" && !parked(rs))) {
        this.runs.set(rs.run.run_id, rs);
      }
    }
    for (const runId of this.runs.keys()) {
      if (this.runs.size <= this.capacity) break;
      this.runs.delete(runId);
    }
  }

  /** Another process wrote to the database: what is kept may be stale. */
  clear(): void {
    this.runs.clear();
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
