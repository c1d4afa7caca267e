/** What fell due on SQLite (DueTx): the sweep's questions, each answered by an index. */
import type Database from "better-sqlite3";
import type { DueTx } from "../due.js";
import type { VisitKey } from "../runs.js";

export function sqliteDue(db: Database.Database): DueTx {
  const s = {
    unresolved: db.prepare(
      `SELECT run_id, node_id, visit FROM visits
         WHERE ready_at IS NOT NULL AND payload IS NULL AND ready_at <= ? ORDER BY ready_at LIMIT ?`,
    ),
    expiredAttempts: db.prepare(
      `SELECT run_id, node_id, visit FROM visits
         WHERE state = 'RUNNING' AND lease_expires_at <= ? ORDER BY lease_expires_at LIMIT ?`,
    ),
    expiredHolds: db.prepare(
      `SELECT run_id, node_id, visit FROM (
         SELECT run_id, node_id, visit, lease_expires_at FROM visits WHERE state = 'IN_REVIEW' AND lease_expires_at <= @now
         UNION ALL
         SELECT run_id, node_id, visit, lease_expires_at FROM visits WHERE state = 'WAITING' AND lease_expires_at <= @now)
       ORDER BY lease_expires_at LIMIT @limit`,
    ),
    childrenToSettle: db.prepare(
      `SELECT c.run_id FROM visits v JOIN runs c ON c.run_id = substr(v.holder, 5)
       WHERE v.holder LIKE 'run:%' AND v.is_current = 1 AND c.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED') LIMIT ?`,
    ),
    // A workflow node's child is run by the attempt holding it (holder run:<child>); a map item's
    // by its map visit while that runs, held by `map`, at the attempt that started the item; an
    // agent's tool call's by its visit while that goes on (running, retrying, waiting for approval).
    orphanedChildren: db.prepare(
      `SELECT c.run_id FROM runs c WHERE c.parent IS NOT NULL AND c.ended_at IS NULL AND NOT EXISTS (
         SELECT 1 FROM visits v WHERE v.run_id = json_extract(c.parent, '$.run_id')
           AND v.node_id = json_extract(c.parent, '$.node_id') AND v.visit = json_extract(c.parent, '$.visit')
           AND CASE WHEN json_extract(c.parent, '$.call') IS NOT NULL THEN v.state IN ('RUNNING', 'RETRYING', 'IN_REVIEW')
                    WHEN json_extract(c.parent, '$.item') IS NULL THEN v.state = 'RUNNING' AND v.holder = 'run:' || c.run_id
                    ELSE v.state = 'RUNNING' AND v.holder = 'map' AND v.attempt = json_extract(c.parent, '$.attempt') END)
       ORDER BY c.created_at LIMIT ?`,
    ),
    expiredRuns: db.prepare(
      "SELECT run_id FROM runs WHERE ended_at IS NULL AND deadline_at <= ? ORDER BY deadline_at LIMIT ?",
    ),
    nextDue: db.prepare(
      `SELECT min(t) AS t FROM (
         SELECT min(ready_at) AS t FROM visits WHERE ready_at IS NOT NULL AND ready_at > @now
         UNION ALL SELECT min(lease_expires_at) FROM visits WHERE state = 'RUNNING'
         UNION ALL SELECT min(lease_expires_at) FROM visits WHERE state = 'IN_REVIEW'
         UNION ALL SELECT min(lease_expires_at) FROM visits WHERE state = 'WAITING'
         UNION ALL SELECT min(deadline_at) FROM runs WHERE ended_at IS NULL
         UNION ALL SELECT min(ready_at) FROM compensations WHERE ready_at IS NOT NULL AND ready_at > @now
         UNION ALL SELECT min(lease_expires_at) FROM compensations WHERE state = 'RUNNING'
         UNION ALL SELECT min(ready_at) FROM map_items INDEXED BY map_items_ready WHERE ready_at > @now
         UNION ALL SELECT min(lease_expires_at) FROM map_items INDEXED BY map_items_leased
           WHERE state = 'RUNNING' AND agent_type IS NOT NULL
         UNION ALL SELECT min(next_fire_at) FROM schedules INDEXED BY schedules_due
           WHERE paused = 0 AND next_fire_at IS NOT NULL)`,
    ),
  };
  const keys = (rows: unknown[]) => rows as VisitKey[];
  const runIds = (rows: unknown[]) => (rows as { run_id: string }[]).map((r) => r.run_id);
  return {
    unresolved: async (now, limit) => keys(s.unresolved.all(now, limit)),
    expiredAttempts: async (now, limit) => keys(s.expiredAttempts.all(now, limit)),
    // As many placeholders as holders: prepared per call (a sweep after an engine died, rare).
    attemptsHeldBy: async (holders, limit) =>
      holders.length === 0
        ? []
        : keys(
            db
              .prepare(
                `SELECT run_id, node_id, visit FROM visits WHERE state = 'RUNNING'
                     AND holder IN (${holders.map(() => "?").join(",")}) LIMIT ?`,
              )
              .all(...holders, limit),
          ),
    expiredHolds: async (now, limit) => keys(s.expiredHolds.all({ now, limit })),
    childrenToSettle: async (limit) => runIds(s.childrenToSettle.all(limit)),
    orphanedChildren: async (limit) => runIds(s.orphanedChildren.all(limit)),
    expiredRuns: async (now, limit) => runIds(s.expiredRuns.all(now, limit)),
    nextDue: async (now) => {
      const { t } = s.nextDue.get({ now }) as { t: number | null };
      return t;
    },
  };
}
