/** What fell due on PostgreSQL (DueTx): the sweep's questions, one statement each. */
import type { VisitKey } from "../runs.js";
import { FREE_LOCK_GRACE_MS } from "./engine-lock.js";
import type { TxQuery } from "./tx-query.js";

const SQL = {
  unresolved: {
    name: "skein_unresolved",
    text: `SELECT run_id, node_id, visit FROM visits
            WHERE ready_at IS NOT NULL AND payload IS NULL AND ready_at <= $1 ORDER BY ready_at LIMIT $2`,
  },
  expiredAttempts: {
    name: "skein_expired_attempts",
    text: `SELECT run_id, node_id, visit FROM visits
            WHERE state = 'RUNNING' AND lease_expires_at <= $1 ORDER BY lease_expires_at LIMIT $2`,
  },
  attemptsHeldBy: {
    name: "skein_attempts_held_by",
    text: "SELECT run_id, node_id, visit FROM visits WHERE state = 'RUNNING' AND holder = ANY($1::text[]) LIMIT $2",
  },
  expiredHolds: {
    name: "skein_expired_holds",
    text: `SELECT run_id, node_id, visit FROM (
             SELECT run_id, node_id, visit, lease_expires_at FROM visits WHERE state = 'IN_REVIEW' AND lease_expires_at <= $1
             UNION ALL
             SELECT run_id, node_id, visit, lease_expires_at FROM visits WHERE state = 'WAITING' AND lease_expires_at <= $1) AS held
           ORDER BY lease_expires_at LIMIT $2`,
  },
  childrenToSettle: {
    name: "skein_children_to_settle",
    text: `SELECT c.run_id FROM visits v JOIN runs c ON c.run_id = substr(v.holder, 5)
           WHERE v.holder LIKE 'run:%' AND v.is_current AND c.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED') LIMIT $1`,
  },
  // A workflow node's child is run by the attempt holding it (holder run:<child>); a map item's
  // by its map visit while that runs, held by `map`, at the attempt that started the item; an
  // agent's tool call's by its visit while that goes on (running, retrying, waiting for approval).
  orphanedChildren: {
    name: "skein_orphaned_children",
    text: `SELECT c.run_id FROM runs c WHERE c.parent IS NOT NULL AND c.ended_at IS NULL AND NOT EXISTS (
             SELECT 1 FROM visits v WHERE v.run_id = c.parent->>'run_id' AND v.node_id = c.parent->>'node_id'
               AND v.visit = (c.parent->>'visit')::int
               AND CASE WHEN c.parent->>'call' IS NOT NULL THEN v.state IN ('RUNNING', 'RETRYING', 'IN_REVIEW')
                        WHEN c.parent->>'item' IS NULL THEN v.state = 'RUNNING' AND v.holder = 'run:' || c.run_id
                        ELSE v.state = 'RUNNING' AND v.holder = 'map' AND v.attempt = (c.parent->>'attempt')::int END)
           ORDER BY c.created_at LIMIT $1`,
  },
  expiredRuns: {
    name: "skein_expired_runs",
    text: "SELECT run_id FROM runs WHERE ended_at IS NULL AND deadline_at <= $1 ORDER BY deadline_at LIMIT $2",
  },
  nextDue: {
    name: "skein_next_due",
    text: `SELECT min(t) AS t FROM (
             SELECT min(ready_at) AS t FROM visits WHERE ready_at IS NOT NULL AND ready_at > $1
             UNION ALL SELECT min(lease_expires_at) FROM visits WHERE state = 'RUNNING'
             UNION ALL SELECT min(lease_expires_at) FROM visits WHERE state = 'IN_REVIEW'
             UNION ALL SELECT min(lease_expires_at) FROM visits WHERE state = 'WAITING'
             UNION ALL SELECT min(deadline_at) FROM runs WHERE ended_at IS NULL
             UNION ALL SELECT min(ready_at) FROM compensations WHERE ready_at IS NOT NULL AND ready_at > $1
             UNION ALL SELECT min(lease_expires_at) FROM compensations WHERE state = 'RUNNING'
             UNION ALL SELECT min(ready_at) FROM map_items WHERE ready_at IS NOT NULL AND ready_at > $1
             UNION ALL SELECT min(lease_expires_at) FROM map_items WHERE state = 'RUNNING' AND agent_type IS NOT NULL
             UNION ALL SELECT min(next_fire_at) FROM schedules WHERE NOT paused AND next_fire_at IS NOT NULL) AS due`,
  },
} as const;

export function unresolved(tx: TxQuery, now: number, limit: number): Promise<VisitKey[]> {
  return tx.q<VisitKey>(SQL.unresolved, [now, limit]);
}

export function expiredAttempts(tx: TxQuery, now: number, limit: number): Promise<VisitKey[]> {
  return tx.q<VisitKey>(SQL.expiredAttempts, [now, limit]);
}

export async function attemptsHeldBy(tx: TxQuery, holders: string[], limit: number): Promise<VisitKey[]> {
  if (holders.length === 0) return [];
  return tx.q<VisitKey>(SQL.attemptsHeldBy, [holders, limit]);
}

export function expiredHolds(tx: TxQuery, now: number, limit: number): Promise<VisitKey[]> {
  return tx.q<VisitKey>(SQL.expiredHolds, [now, limit]);
}

export async function childrenToSettle(tx: TxQuery, limit: number): Promise<string[]> {
  const rows = await tx.q<{ run_id: string }>(SQL.childrenToSettle, [limit]);
  return rows.map((r) => r.run_id);
}

export async function orphanedChildren(tx: TxQuery, limit: number): Promise<string[]> {
  const rows = await tx.q<{ run_id: string }>(SQL.orphanedChildren, [limit]);
  return rows.map((r) => r.run_id);
}

export async function expiredRuns(tx: TxQuery, now: number, limit: number): Promise<string[]> {
  const rows = await tx.q<{ run_id: string }>(SQL.expiredRuns, [now, limit]);
  return rows.map((r) => r.run_id);
}

/** `lockFree`: other engines seen with their lock free, since when (engines.ts); each is due again once its grace passed. */
export async function nextDue(
  tx: TxQuery,
  lockFree: ReadonlyMap<string, number> | null,
  now: number,
): Promise<number | null> {
  const [row] = await tx.q<{ t: number | null }>(SQL.nextDue, [now]);
  const due = row?.t ?? null;
  // An engine seen with a free lock is looked at again once its grace has passed.
  const suspects = [...(lockFree?.values() ?? [])].map((since) => since + FREE_LOCK_GRACE_MS);
  if (suspects.length === 0) return due;
  const suspect = Math.min(...suspects);
  return due === null ? suspect : Math.min(due, suspect);
}
