/**
 * The next time that only the clock stands between a run and its progress: what runUntilIdle
 * may skip to. A run waiting on something outside the engine (a person's review, an event, an
 * external worker, a child run) is not moved by the clock: the due times of those waits (a
 * review's timeout, an event's timeout) are reached only by `advance`.
 */
import type { Compensation, MapItem, Run, Visit } from "../core/types.js";
import type { Engine } from "../engine/engine.js";

/** Where a run waits only for time: each kind of due time runUntilIdle skips to. */
export type TimeWait = "retry" | "sleep" | "attempt_deadline" | "run_timeout" | "rate_limit";

export interface DueWork {
  at: number;
  run_id: string;
  node_id: string | null;
  waits: TimeWait;
}

/** What the harness knows of the engine's state in process. */
export interface Watch {
  /** Whether an in-process attempt's handler is running and holds no work of its own (so it waits for its deadline). */
  isHung(executionId: string, attempt: number): boolean;
  /** Whether this engine runs the agent type's handlers in process. */
  inProcess(agentType: string): boolean;
  /** The engine's next timer (its wake-up when a rate limit's next token is due). */
  nextTimer(): number | null;
  now: number;
}

/** The earliest time-only due time over every unfinished run (child and map-item runs included), or null. */
export async function nextTimeDue(engine: Engine, watch: Watch): Promise<DueWork | null> {
  let best: DueWork | null = null;
  for (const runId of await unfinishedRuns(engine)) {
    const due = await runDue(engine, runId, watch);
    if (due && (best === null || due.at < best.at)) best = due;
  }
  return best;
}

async function runDue(engine: Engine, runId: string, watch: Watch): Promise<DueWork | null> {
  const run = await engine.getRun(runId);
  if (run.ended_at !== null && run.status !== "COMPENSATING") return null;
  let best: DueWork | null = null;
  const consider = (at: number | null, node_id: string | null, waits: TimeWait) => {
    if (at !== null && (best === null || at < best.at)) best = { at, run_id: runId, node_id, waits };
  };
  for (const v of run.nodes) timeWaitOf(v, watch, consider);
  for (const c of run.compensations) timeWaitOf(c, watch, consider);
  // Items that hold their own attempts wait for time as visits do (their rows, a page at a time).
  for (const node of run.nodes) {
    if (node.agent_type !== "map" || node.state !== "RUNNING") continue;
    for (const item of await mapItems(engine, runId, node.node_id)) {
      if (item.agent_type === null) continue;
      const execution_id = `${node.execution_id}~${item.index}`;
      timeWaitOf({ ...item, execution_id, agent_type: item.agent_type }, watch, consider);
    }
  }
  // The run's timeout ends it whatever it waits on; it counts only when the run waits for time
  // anyway (a run parked at a review is not timed out by runUntilIdle).
  if (best !== null) consider(run.deadline_at, null, "run_timeout");
  return best;
}

function timeWaitOf(
  v: Pick<
    Visit | Compensation,
    "state" | "ready_at" | "agent_type" | "node_id" | "lease_expires_at" | "deadline_at" | "execution_id" | "attempt"
  >,
  watch: Watch,
  consider: (at: number | null, node: string, waits: TimeWait) => void,
): void {
  const waiting = v.state === "RETRYING" || v.state === "PENDING";
  if (waiting && v.ready_at !== null && v.ready_at > watch.now) consider(v.ready_at, v.node_id, "retry");
  else if (waiting && v.ready_at !== null && watch.inProcess(v.agent_type)) {
    // Ready, with a handler here, and not claimed while the engine is idle: it waits for a rate
    // limit's token (a concurrency slot is held by an attempt, whose deadline counts by itself).
    // The engine's wake-up timer is armed for the token.
    consider(watch.nextTimer(), v.node_id, "rate_limit");
  } else if (v.state === "WAITING" && v.agent_type === "sleep") consider(v.lease_expires_at, v.node_id, "sleep");
  else if (v.state === "RUNNING" && watch.isHung(v.execution_id, v.attempt)) {
    consider(v.lease_expires_at ?? v.deadline_at, v.node_id, "attempt_deadline");
  }
}

/** Every QUEUED, RUNNING or COMPENSATING run, top-level, child and map item alike. */
async function unfinishedRuns(engine: Engine): Promise<string[]> {
  const ids = new Set<string>();
  const queue: string[] = [];
  for (const status of ["QUEUED", "RUNNING", "COMPENSATING"] as const) {
    for (const run of await allRuns(engine, status)) queue.push(run.run_id);
  }
  while (queue.length > 0) {
    const id = queue.shift() as string;
    if (ids.has(id)) continue;
    ids.add(id);
    const run = await engine.getRun(id);
    for (const child of run.children) if (!isFinished(child.status)) queue.push(child.run_id);
    for (const node of run.nodes) {
      if (node.agent_type !== "map" || node.state !== "RUNNING") continue;
      for (const item of await mapItems(engine, id, node.node_id)) {
        if (item.child_run_id && !isFinished(item.state)) queue.push(item.child_run_id);
      }
    }
  }
  return [...ids];
}

/** A running map node's items, every page. */
async function mapItems(engine: Engine, runId: string, nodeId: string): Promise<MapItem[]> {
  const items: MapItem[] = [];
  for (let after = -1; ; ) {
    const page = await engine.listMapItems(runId, nodeId, { after, limit: 1000 });
    items.push(...page.items);
    if (page.next_after === null) return items;
    after = page.next_after;
  }
}

async function allRuns(engine: Engine, status: Run["status"]): Promise<Run[]> {
  const runs: Run[] = [];
  for (let before: string | undefined; ; ) {
    const page = await engine.listRuns({ status, limit: 500, ...(before ? { before } : {}) });
    runs.push(...page);
    if (page.length < 500) return runs;
    before = page[page.length - 1]?.run_id;
  }
}

function isFinished(status: string): boolean {
  return status === "SUCCEEDED" || status === "FAILED" || status === "CANCELLED" || status === "SKIPPED";
}
