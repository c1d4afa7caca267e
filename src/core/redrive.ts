/**
 * Redrive (DESIGN §6) as a pure function: a FAILED or CANCELLED run runs again from where it
 * stopped. The engine checks that the run may be redriven; this decides what runs again.
 */
import { currentVisit, event, newVisit, nodeOf, type RunState, settle } from "./scheduler.js";

/**
 * Gives new visits to every node that failed unhandled, was cancelled or skipped by the run's
 * end, or whose success a compensation undid, to `from` when given, and to everything
 * downstream of them; other successes are kept. The run gets a fresh TTL; new visits count
 * towards `max_visits`. Returns the nodes that run again, in document order.
 */
export function redrive(rs: RunState, options: { from: string | null; force: boolean }, now: number): string[] {
  const undone = new Set(rs.compensations.filter((c) => c.state === "SUCCEEDED").map((c) => `${c.node_id}#${c.visit}`));
  const seeds = new Set<string>();
  for (const v of rs.current.values()) {
    const endedByRun = (v.state === "CANCELLED" || v.state === "SKIPPED") && v.reason?.startsWith("run_") === true;
    if ((v.state === "FAILED" && !v.handled) || endedByRun || undone.has(`${v.node_id}#${v.visit}`)) {
      seeds.add(v.node_id);
    }
  }
  if (options.from !== null) seeds.add(options.from);

  const downstream = new Set<string>();
  const queue = [...seeds].flatMap((id) => nodeOf(rs, id).affected);
  for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
    if (downstream.has(id)) continue;
    downstream.add(id);
    queue.push(...nodeOf(rs, id).affected);
  }

  const again = rs.graph.order.filter((id) => seeds.has(id) || downstream.has(id));
  for (const id of again) {
    const old = currentVisit(rs, id);
    const v = newVisit(rs, id, old.visit + 1, old.prior_starts + (old.started_at === null ? 0 : 1), now);
    // A node nothing upstream runs again keeps the activation a loop-back gave it; the others
    // are activated again by their sources' new decisions.
    if (!downstream.has(id) && old.loop_activated) {
      v.loop_activated = true;
      v.trigger = old.trigger;
    }
  }

  const run = rs.run;
  run.status = "RUNNING";
  run.end_cause = null;
  run.error = null;
  run.output = null;
  run.ended_at = null;
  run.needs_attention = false;
  run.deadline_at = now + rs.graph.timeout * 1000;
  run.updated_at = now;
  rs.changes.runUpdated = true;
  event(rs, "run.retried", null, now, { from: options.from, force: options.force, nodes: again });
  settle(rs, again, now);
  return again;
}
