/** Claiming ready work and counting it against limits (DESIGN §12), inside a write transaction. */
import type { VisitKey } from "./runs.js";

/** The visits a node's `concurrency` limits together: a node of a workflow (any version), one key value. */
export interface ConcurrencyGroup {
  workflow_id: string;
  node_id: string;
  key: string;
}

/**
 * An agent type's rate limits as stored (DESIGN §17): its buckets' contents at `updated_at` (epoch
 * ms), each refilled with time from there, what its last attempt used, and its hold.
 */
export interface RateBucket {
  /** Claims left under `per_second`/`per_minute`. */
  tokens: number;
  updated_at: number;
  /** Tokens of usage left in the `tokens_per_minute` window; null: never spent (full). */
  usage_tokens: number | null;
  /** The tokens the type's last attempt used (its next one's expectation); null: none known. */
  last_usage: number | null;
  /** No attempt of the type starts before this time (a provider's Retry-After); null: never held. */
  held_until: number | null;
}

/**
 * Claims and limits. The limits lock (PostgreSQL: a transaction-level advisory lock on the
 * schema; SQLite: one writer, nothing to take) is held from the first count to the end of the
 * transaction, so no two transactions fill the same free slot. DatabaseError on a failure.
 */
export interface ClaimsTx {
  /** Ready, resolved visits of the type due by `now` (not of a paused run), by priority (lower first) then oldest first, at most `limit`, runs locked (held ones skipped); `skip`: full keys left out. */
  claimable(agentType: string, now: number, limit: number, skip?: readonly ConcurrencyGroup[]): Promise<VisitKey[]>;
  /** Compensating runs whose next row is of this type and due by `now`, oldest first, at most `limit`, locked as `claimable`'s. */
  claimableCompensations(agentType: string, now: number, limit: number): Promise<string[]>;
  /** RUNNING attempts (visits, compensations, map items) per agent type, but of runs `except`, under the limits lock; types at 0 left out. */
  countRunningForLimits(agentTypes: string[], except: string[]): Promise<Map<string, number>>;
  /** RUNNING visits of the workflow's node with this concurrency key, but of runs `except`, under the limits lock. */
  countRunningByKey(workflowId: string, nodeId: string, key: string, except: string[]): Promise<number>;
  /** These types' token buckets as last written, under the limits lock; a type never written is left out. */
  rateBuckets(agentTypes: string[]): Promise<Map<string, RateBucket>>;
  /** Inserts or replaces these buckets (all but `held_until`), under the limits lock the transaction holds. Idempotent. */
  writeRateBuckets(buckets: Map<string, RateBucket>): Promise<void>;
  /** Holds the type until `until`, or later if it is held longer (a row is made for it), under the limits lock. */
  holdAgentType(agentType: string, until: number): Promise<void>;
  /** Agent types held past `now`, with when each hold ends. */
  rateHolds(now: number): Promise<Map<string, number>>;
}
