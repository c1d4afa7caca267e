/** What fell due: the sweep's questions, inside a write transaction. */
import type { VisitKey } from "./runs.js";

/**
 * The sweep's reads: each at most `limit` rows, oldest due first where an order is named. They
 * take no lock (the sweep locks the runs it acts on); DatabaseError on a failure.
 */
export interface DueTx {
  /** Ready visits due by `now` whose payload templates are not resolved yet. */
  unresolved(now: number, limit: number): Promise<VisitKey[]>;
  /** RUNNING attempts whose lease or deadline passed by `now`. */
  expiredAttempts(now: number, limit: number): Promise<VisitKey[]>;
  /** RUNNING attempts held by any of these holders (engines taken for dead). */
  attemptsHeldBy(holders: string[], limit: number): Promise<VisitKey[]>;
  /** Visits held without an attempt (IN_REVIEW, WAITING) whose due time (`lease_expires_at`) passed by `now`. */
  expiredHolds(now: number, limit: number): Promise<VisitKey[]>;
  /** Child runs that ended while their parent attempt still names them (DESIGN §11.1): their end is owed to it. */
  childrenToSettle(limit: number): Promise<string[]>;
  /** Running child runs whose parent attempt (a map item's: its RUNNING map visit at `parent.attempt`) no longer runs them. */
  orphanedChildren(limit: number): Promise<string[]>;
  /** Unfinished runs whose TTL passed by `now`. */
  expiredRuns(now: number, limit: number): Promise<string[]>;
  /** The earliest time after `now` something falls due (retry, lease, TTL, compensation, map item, schedule slot), or null. */
  nextDue(now: number): Promise<number | null>;
}
