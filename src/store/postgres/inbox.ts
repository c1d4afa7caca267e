/** The inbox table on PostgreSQL (migration 005): events sent to runs and published by key. */
import type { InboxEvent, Json } from "../../core/types.js";
import type { InboxTx } from "../inbox.js";

interface DbInbox {
  seq: number;
  size?: number | null;
  scope?: string[] | null;
  event_id: string;
  run_id: string | null;
  name: string;
  key: string | null;
  payload: Json;
  idempotency_key: string;
  created_at: number;
  delivered_node_id: string | null;
  delivered_visit: number | null;
  delivered_at: number | null;
}

const fromDb = ({ seq: _seq, size: _size, scope, delivered_node_id, delivered_visit, ...r }: DbInbox): InboxEvent => ({
  ...r,
  ...(scope ? { scope } : {}),
  delivered_to: delivered_node_id === null ? null : { node_id: delivered_node_id, visit: delivered_visit as number },
});

/** Runs waiting on (name, key): the payload of a WAITING wait_event visit is resolved, so it names both. */
export const RUNS_WAITING_ON_KEY = `SELECT DISTINCT run_id FROM visits
  WHERE state = 'WAITING' AND agent_type = 'wait_event'
    AND payload->>'event' = $1 AND payload->>'key' = $2 LIMIT $3`;

const UPSERT = `INSERT INTO inbox (event_id, run_id, name, key, payload, idempotency_key, created_at,
                                   delivered_node_id, delivered_visit, delivered_at, size, scope)
  VALUES ($1, $2, $3, $4, $5::json, $6, $7, $8, $9, $10, $11, $12::json)
  ON CONFLICT (event_id) DO UPDATE SET delivered_node_id = excluded.delivered_node_id,
    delivered_visit = excluded.delivered_visit, delivered_at = excluded.delivered_at`;

type Query = <R extends object>(config: { name?: string; text: string }, values: unknown[]) => Promise<R[]>;

/** The inbox statements of one transaction, through its query function. */
export function postgresInbox(q: Query): InboxTx {
  const rows = async (text: string, values: unknown[]) => (await q<DbInbox>({ text }, values)).map(fromDb);
  return {
    waitingEvents: (runId, name, limit) =>
      rows("SELECT * FROM inbox WHERE run_id = $1 AND name = $2 AND delivered_at IS NULL ORDER BY seq LIMIT $3", [
        runId,
        name,
        limit,
      ]),
    inboxSize: async (runId) => {
      // Rows written before migration 015 have no size: their payload's is measured.
      const [row] = await q<{ events: number; bytes: number }>(
        {
          name: "skein_inbox_size",
          text: `SELECT count(*)::int AS events, coalesce(sum(coalesce(size, octet_length(payload::text))), 0)::bigint AS bytes
                   FROM inbox WHERE run_id = $1 AND delivered_at IS NULL`,
        },
        [runId],
      );
      return { events: row?.events ?? 0, bytes: Number(row?.bytes ?? 0) };
    },
    keyedEvents: (name, key, since) =>
      rows("SELECT * FROM inbox WHERE run_id IS NULL AND name = $1 AND key = $2 AND created_at >= $3 ORDER BY seq", [
        name,
        key,
        since,
      ]),
    inboxByIdempotencyKey: async (scope, idempotencyKey) => {
      const [row] =
        scope.run_id === null
          ? await rows("SELECT * FROM inbox WHERE run_id IS NULL AND name = $1 AND key = $2 AND idempotency_key = $3", [
              scope.name,
              scope.key,
              idempotencyKey,
            ])
          : await rows("SELECT * FROM inbox WHERE run_id = $1 AND idempotency_key = $2", [
              scope.run_id,
              idempotencyKey,
            ]);
      return row ?? null;
    },
    writeInbox: async (events) => {
      for (const e of events) {
        const payload = JSON.stringify(e.payload);
        await q({ name: "skein_inbox_upsert", text: UPSERT }, [
          e.event_id,
          e.run_id,
          e.name,
          e.key,
          payload,
          e.idempotency_key,
          e.created_at,
          e.delivered_to?.node_id ?? null,
          e.delivered_to?.visit ?? null,
          e.delivered_at,
          Buffer.byteLength(payload),
          e.scope ? JSON.stringify(e.scope) : null,
        ]);
      }
    },
    pruneKeyed: async (before) => {
      await q({ text: "DELETE FROM inbox WHERE run_id IS NULL AND created_at < $1" }, [before]);
    },
  };
}
