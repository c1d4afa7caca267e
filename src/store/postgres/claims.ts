/**
 * Claims and limits on PostgreSQL (ClaimsTx). A claim locks the runs it takes (SKIP LOCKED: a run
 * another engine holds is left to it); a count that concerns a limit is sent together with the
 * limits lock (pipeline mode) and runs once the lock is granted.
 */
import type { ConcurrencyGroup, RateBucket } from "../claims.js";
import type { VisitKey } from "../runs.js";
import type { TxQuery } from "./tx-query.js";

/** The advisory lock class of claims that concern a concurrency limit ("sklm"), keyed by schema. */
const LIMITS_LOCK = 0x736b6c6d;

/** The columns of a rate_buckets row but its agent type (`RateBucket`). */
export const RATE_COLUMNS = "tokens, updated_at, usage_tokens, last_usage, held_until";

const SQL = {
  // The run's lock, not the visit's: a run is changed only under its lock. MATERIALIZED keeps
  // the LIMIT with the locking scan, so the claim never returns more than asked. By priority,
  // then age: the order of visits_ready (migration 027), the visit's own copy of its run's priority.
  claimable: {
    name: "skein_claimable",
    text: `WITH c AS MATERIALIZED (
             SELECT v.run_id, v.node_id, v.visit FROM visits v JOIN runs r ON r.run_id = v.run_id
              WHERE v.agent_type = $1 AND v.ready_at IS NOT NULL AND v.ready_at <= $2 AND v.payload IS NOT NULL
                AND r.paused IS NULL
                AND NOT (v.concurrency_key IS NOT NULL AND EXISTS (
                  SELECT 1 FROM unnest($4::text[], $5::text[], $6::text[]) AS full_key(workflow_id, node_id, key)
                   WHERE full_key.workflow_id = r.workflow_id AND full_key.node_id = v.node_id
                     AND full_key.key = v.concurrency_key))
              ORDER BY v.priority, v.ready_at LIMIT $3
                FOR UPDATE OF r SKIP LOCKED)
           SELECT run_id, node_id, visit FROM c`,
  },
  claimableCompensations: {
    name: "skein_claimable_compensations",
    text: `WITH c AS MATERIALIZED (
             SELECT c.run_id FROM compensations c JOIN runs r ON r.run_id = c.run_id
              WHERE c.agent_type = $1 AND c.ready_at IS NOT NULL AND c.ready_at <= $2 AND r.status = 'COMPENSATING'
              ORDER BY c.ready_at LIMIT $3
                FOR UPDATE OF r SKIP LOCKED)
           SELECT run_id FROM c`,
  },
  // Claims that concern a limit, serialised per schema (the NOTIFY channel names it); the
  // count is a statement of its own, so its snapshot is taken once the lock is held.
  limitsLock: {
    name: "skein_limits_lock",
    text: "SELECT pg_advisory_xact_lock($1, hashtext($2))",
  },
  runningByType: {
    name: "skein_running_by_type",
    text: `SELECT agent_type, count(*)::int AS n FROM (
             SELECT agent_type FROM visits WHERE state = 'RUNNING' AND agent_type = ANY($1::text[]) AND run_id <> ALL($2::text[])
             UNION ALL
             SELECT agent_type FROM compensations WHERE state = 'RUNNING' AND agent_type = ANY($1::text[]) AND run_id <> ALL($2::text[])
             UNION ALL
             SELECT agent_type FROM map_items WHERE state = 'RUNNING' AND agent_type = ANY($1::text[]) AND run_id <> ALL($2::text[])
           ) running GROUP BY agent_type`,
  },
  runningByKey: {
    name: "skein_running_by_key",
    text: `SELECT count(*)::int AS n FROM visits v JOIN runs r ON r.run_id = v.run_id
            WHERE v.state = 'RUNNING' AND v.node_id = $1 AND v.concurrency_key = $2 AND r.workflow_id = $3
              AND v.run_id <> ALL($4::text[])`,
  },
  rateBuckets: {
    name: "skein_rate_buckets",
    text: `SELECT agent_type, ${RATE_COLUMNS} FROM rate_buckets WHERE agent_type = ANY($1::text[])`,
  },
  writeRateBuckets: {
    name: "skein_write_rate_buckets",
    text: `INSERT INTO rate_buckets (agent_type, tokens, updated_at, usage_tokens, last_usage)
             SELECT * FROM unnest($1::text[], $2::float8[], $3::int8[], $4::float8[], $5::float8[])
           ON CONFLICT (agent_type) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at,
             usage_tokens = excluded.usage_tokens, last_usage = excluded.last_usage`,
  },
  // A new row's buckets were written at time 0: full by now, as a row never written.
  hold: {
    name: "skein_hold_agent_type",
    text: `INSERT INTO rate_buckets (agent_type, tokens, updated_at, held_until) VALUES ($1, 0, 0, $2)
           ON CONFLICT (agent_type) DO UPDATE
             SET held_until = greatest(rate_buckets.held_until, excluded.held_until)`,
  },
  holds: {
    name: "skein_rate_holds",
    text: "SELECT agent_type, held_until FROM rate_buckets WHERE held_until > $1",
  },
} as const;

export type RateRow = {
  agent_type: string;
  tokens: number;
  updated_at: string | number;
  usage_tokens: number | null;
  last_usage: number | null;
  held_until: string | number | null;
};

/** Rate rows by agent type (bigint columns come as text). */
export function rateBucketsOf(rows: RateRow[]): Map<string, RateBucket> {
  return new Map(
    rows.map((r) => [
      r.agent_type,
      {
        tokens: r.tokens,
        updated_at: Number(r.updated_at),
        usage_tokens: r.usage_tokens,
        last_usage: r.last_usage,
        held_until: r.held_until === null ? null : Number(r.held_until),
      },
    ]),
  );
}

export function claimable(
  tx: TxQuery,
  agentType: string,
  now: number,
  limit: number,
  skip: readonly ConcurrencyGroup[] = [],
): Promise<VisitKey[]> {
  const skipped = [skip.map((g) => g.workflow_id), skip.map((g) => g.node_id), skip.map((g) => g.key)];
  return tx.q<VisitKey>(SQL.claimable, [agentType, now, limit, ...skipped]);
}

/** Takes the limits lock (held until the transaction ends); send it with the statement that needs it. */
export function lockLimits(tx: TxQuery, channel: string): Promise<unknown> {
  return tx.q(SQL.limitsLock, [LIMITS_LOCK, channel]);
}

export async function claimableCompensations(
  tx: TxQuery,
  agentType: string,
  now: number,
  limit: number,
): Promise<string[]> {
  const rows = await tx.q<{ run_id: string }>(SQL.claimableCompensations, [agentType, now, limit]);
  return rows.map((r) => r.run_id);
}

/** `channel`: the NOTIFY channel, which names the schema the limits lock is keyed by. */
export async function countRunningForLimits(
  tx: TxQuery,
  channel: string,
  agentTypes: string[],
  except: string[],
): Promise<Map<string, number>> {
  // Sent together (pipeline mode): the count runs once the lock is granted.
  const [, rows] = await Promise.all([
    tx.q(SQL.limitsLock, [LIMITS_LOCK, channel]),
    tx.q<{ agent_type: string; n: number }>(SQL.runningByType, [agentTypes, except]),
  ]);
  return new Map(rows.map((r) => [r.agent_type, r.n]));
}

export async function countRunningByKey(
  tx: TxQuery,
  channel: string,
  workflowId: string,
  nodeId: string,
  key: string,
  except: string[],
): Promise<number> {
  const [, rows] = await Promise.all([
    tx.q(SQL.limitsLock, [LIMITS_LOCK, channel]),
    tx.q<{ n: number }>(SQL.runningByKey, [nodeId, key, workflowId, except]),
  ]);
  return rows[0]?.n ?? 0;
}

export async function rateBuckets(
  tx: TxQuery,
  channel: string,
  agentTypes: string[],
): Promise<Map<string, RateBucket>> {
  const [, rows] = await Promise.all([
    tx.q(SQL.limitsLock, [LIMITS_LOCK, channel]),
    tx.q<RateRow>(SQL.rateBuckets, [agentTypes]),
  ]);
  return rateBucketsOf(rows);
}

export async function writeRateBuckets(tx: TxQuery, buckets: Map<string, RateBucket>): Promise<void> {
  const rows = [...buckets];
  await tx.q(SQL.writeRateBuckets, [
    rows.map(([type]) => type),
    rows.map(([, b]) => b.tokens),
    rows.map(([, b]) => b.updated_at),
    rows.map(([, b]) => b.usage_tokens),
    rows.map(([, b]) => b.last_usage),
  ]);
}

/**
 * Under the limits lock, as every other write of these rows: a row locked before it would
 * deadlock with a transaction that holds the lock and writes the row.
 */
export async function holdAgentType(tx: TxQuery, channel: string, agentType: string, until: number): Promise<void> {
  await Promise.all([tx.q(SQL.limitsLock, [LIMITS_LOCK, channel]), tx.q(SQL.hold, [agentType, until])]);
}

export async function rateHolds(tx: TxQuery, now: number): Promise<Map<string, number>> {
  const rows = await tx.q<{ agent_type: string; held_until: string | number }>(SQL.holds, [now]);
  return new Map(rows.map((r) => [r.agent_type, Number(r.held_until)]));
}
