/** Claims and limits on SQLite (ClaimsTx): one writer, so a count alone is exact and no limits lock is taken. */
import type Database from "better-sqlite3";
import type { ClaimsTx, RateBucket } from "../claims.js";
import type { VisitKey } from "../runs.js";

/**
 * The paused runs (DESIGN §16), whose ready visits and items are not claimed: read once per
 * claim query from migration 025's partial index, empty unless a run is paused.
 */
export const PAUSED_RUNS = "SELECT run_id FROM runs INDEXED BY runs_paused WHERE paused IS NOT NULL";

/** The columns of a rate_buckets row but its agent type (`RateBucket`). */
export const RATE_COLUMNS = "tokens, updated_at, usage_tokens, last_usage, held_until";

export type RateRow = { agent_type: string } & RateBucket;

/** Rate rows by agent type. */
export function rateBucketsOf(rows: RateRow[]): Map<string, RateBucket> {
  return new Map(rows.map(({ agent_type, ...bucket }) => [agent_type, bucket]));
}

export function sqliteClaims(db: Database.Database): ClaimsTx {
  const s = {
    // By priority, then age, as visits_ready orders them (migration 027): the claim reads the
    // index in order and stops at its limit, however many visits wait.
    claimable: db.prepare(
      `SELECT run_id, node_id, visit FROM visits INDEXED BY visits_ready
         WHERE agent_type = ? AND ready_at IS NOT NULL AND ready_at <= ? AND payload IS NOT NULL
           AND run_id NOT IN (${PAUSED_RUNS})
         ORDER BY priority, ready_at LIMIT ?`,
    ),
    // The same, leaving out the visits of node concurrency keys found full (@skip: a JSON list of groups).
    claimableSkipping: db.prepare(
      `SELECT run_id, node_id, visit FROM visits v INDEXED BY visits_ready
         WHERE agent_type = @agentType AND ready_at IS NOT NULL AND ready_at <= @now AND payload IS NOT NULL
           AND run_id NOT IN (${PAUSED_RUNS})
           AND NOT (v.concurrency_key IS NOT NULL AND EXISTS (
             SELECT 1 FROM json_each(@skip) AS g
              WHERE g.value ->> 'node_id' = v.node_id AND g.value ->> 'key' = v.concurrency_key
                AND g.value ->> 'workflow_id' = (SELECT workflow_id FROM runs WHERE run_id = v.run_id)))
         ORDER BY priority, ready_at LIMIT @limit`,
    ),
    claimableCompensations: db.prepare(
      `SELECT c.run_id FROM compensations c JOIN runs r ON r.run_id = c.run_id
         WHERE c.agent_type = ? AND c.ready_at IS NOT NULL AND c.ready_at <= ? AND r.status = 'COMPENSATING'
         ORDER BY c.ready_at LIMIT ?`,
    ),
    runningByType: db.prepare(
      `SELECT agent_type, count(*) AS n FROM (
         SELECT agent_type FROM visits INDEXED BY visits_running_by_type
          WHERE state = 'RUNNING' AND agent_type IN (SELECT value FROM json_each(@types))
            AND run_id NOT IN (SELECT value FROM json_each(@except))
         UNION ALL
         SELECT agent_type FROM compensations INDEXED BY compensations_running_by_type
          WHERE state = 'RUNNING' AND agent_type IN (SELECT value FROM json_each(@types))
            AND run_id NOT IN (SELECT value FROM json_each(@except))
         UNION ALL
         SELECT agent_type FROM map_items INDEXED BY map_items_leased
          WHERE state = 'RUNNING' AND agent_type IN (SELECT value FROM json_each(@types))
            AND run_id NOT IN (SELECT value FROM json_each(@except))
       ) GROUP BY agent_type`,
    ),
    runningByKey: db.prepare(
      `SELECT count(*) AS n FROM visits v INDEXED BY visits_running_by_key JOIN runs r ON r.run_id = v.run_id
        WHERE v.state = 'RUNNING' AND v.concurrency_key IS NOT NULL AND v.node_id = @nodeId
          AND v.concurrency_key = @key AND r.workflow_id = @workflowId
          AND v.run_id NOT IN (SELECT value FROM json_each(@except))`,
    ),
    rateBuckets: db.prepare(
      `SELECT agent_type, ${RATE_COLUMNS} FROM rate_buckets WHERE agent_type IN (SELECT value FROM json_each(?))`,
    ),
    writeRateBucket: db.prepare(
      `INSERT INTO rate_buckets (agent_type, tokens, updated_at, usage_tokens, last_usage)
         VALUES (@agent_type, @tokens, @updated_at, @usage_tokens, @last_usage)
         ON CONFLICT (agent_type) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at,
           usage_tokens = excluded.usage_tokens, last_usage = excluded.last_usage`,
    ),
    // A new row's buckets were written at time 0: full by now, as a row never written.
    hold: db.prepare(
      `INSERT INTO rate_buckets (agent_type, tokens, updated_at, held_until) VALUES (?, 0, 0, ?)
         ON CONFLICT (agent_type) DO UPDATE SET held_until = max(coalesce(held_until, 0), excluded.held_until)`,
    ),
    holds: db.prepare("SELECT agent_type, held_until FROM rate_buckets WHERE held_until > ?"),
  };
  return {
    claimable: async (agentType, now, limit, skip = []) =>
      (skip.length === 0
        ? s.claimable.all(agentType, now, limit)
        : s.claimableSkipping.all({ agentType, now, limit, skip: JSON.stringify(skip) })) as VisitKey[],
    claimableCompensations: async (agentType, now, limit) =>
      (s.claimableCompensations.all(agentType, now, limit) as { run_id: string }[]).map((r) => r.run_id),
    countRunningForLimits: async (agentTypes, except) => {
      const rows = s.runningByType.all({ types: JSON.stringify(agentTypes), except: JSON.stringify(except) }) as {
        agent_type: string;
        n: number;
      }[];
      return new Map(rows.map((r) => [r.agent_type, r.n]));
    },
    countRunningByKey: async (workflowId, nodeId, key, except) => {
      const row = s.runningByKey.get({ workflowId, nodeId, key, except: JSON.stringify(except) }) as { n: number };
      return row.n;
    },
    rateBuckets: async (agentTypes) => rateBucketsOf(s.rateBuckets.all(JSON.stringify(agentTypes)) as RateRow[]),
    writeRateBuckets: async (buckets) => {
      for (const [agent_type, b] of buckets) {
        const { tokens, updated_at, usage_tokens, last_usage } = b;
        s.writeRateBucket.run({ agent_type, tokens, updated_at, usage_tokens, last_usage });
      }
    },
    holdAgentType: async (agentType, until) => {
      s.hold.run(agentType, until);
    },
    rateHolds: async (now) => {
      const rows = s.holds.all(now) as { agent_type: string; held_until: number }[];
      return new Map(rows.map((r) => [r.agent_type, r.held_until]));
    },
  };
}
