/** Compensation planning in the flush's transaction (DESIGN §6). */
import { type PastVisit, planCompensation } from "../../core/compensation.js";
import type { FlushContext } from "./context.js";

/**
 * Plans the compensation of runs that ended with work to undo (DESIGN §6), from the run's
 * whole history: stored rows, overlaid with what this transaction changed in memory.
 */
export async function planCompensations(f: FlushContext): Promise<void> {
  for (const rs of f.states.values()) {
    if (!rs.changes.plan) continue;
    const byKey = new Map<string, PastVisit>();
    for (const p of await f.tx.runHistory(rs.run.run_id)) byKey.set(`${p.visit.node_id}#${p.visit.visit}`, p);
    // Successes of this transaction have no stored event yet: they come after every stored one, in order.
    const fresh = new Map<string, number>();
    rs.changes.events.forEach((e, i) => {
      if (e.type === "node.succeeded") fresh.set(`${e.node_id}#${e.visit}`, 2 ** 50 + i);
    });
    for (const v of [...rs.changes.inserted, ...rs.changes.updated, ...rs.current.values()]) {
      const k = `${v.node_id}#${v.visit}`;
      byKey.set(k, { visit: v, successSeq: fresh.get(k) ?? byKey.get(k)?.successSeq ?? null });
    }
    planCompensation(rs, [...byKey.values()], f.now);
  }
}
