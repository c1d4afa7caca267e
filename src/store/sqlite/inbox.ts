/** The inbox table on SQLite (migration 005): events sent to runs and published by key. */
import type Database from "better-sqlite3";
import type { InboxEvent, Json } from "../../core/types.js";
import type { InboxTx } from "../inbox.js";

interface DbInbox {
  size?: number | null;
  scope?: string | null;
  event_id: string;
  run_id: string | null;
  name: string;
  key: string | null;
  payload: string;
  idempotency_key: string;
  created_at: number;
  delivered_node_id: string | null;
  delivered_visit: number | null;
  delivered_at: number | null;
}

const fromDb = (r: DbInbox): InboxEvent => ({
  event_id: r.event_id,
  run_id: r.run_id,
  name: r.name,
  key: r.key,
  payload: JSON.parse(r.payload) as Json,
  idempotency_key: r.idempotency_key,
  created_at: r.created_at,
  delivered_to:
    r.delivered_node_id === null ? null : { node_id: r.delivered_node_id, visit: r.delivered_visit as number },
  delivered_at: r.delivered_at,
  ...(r.scope ? { scope: JSON.parse(r.scope) as string[] } : {}),
});

/** Runs waiting on (name, key): the payload of a WAITING wait_event visit is resolved, so it names both. */
export const RUNS_WAITING_ON_KEY = `SELECT DISTINCT run_id FROM visits
  WHERE state = 'WAITING' AND agent_type = 'wait_event'
    AND json_extract(payload, '$.event') = ? AND json_extract(payload, '$.key') = ? LIMIT ?`;

export function sqliteInbox(db: Database.Database): InboxTx {
  const s = {
    waiting: db.prepare(
      "SELECT * FROM inbox WHERE run_id = ? AND name = ? AND delivered_at IS NULL ORDER BY seq LIMIT ?",
    ),
    // Rows written before migration 015 have no size: their payload's is measured.
    size: db.prepare(
      `SELECT count(*) AS events, coalesce(sum(coalesce(size, length(CAST(payload AS BLOB)))), 0) AS bytes
         FROM inbox WHERE run_id = ? AND delivered_at IS NULL`,
    ),
    keyed: db.prepare(
      "SELECT * FROM inbox WHERE run_id IS NULL AND name = ? AND key = ? AND created_at >= ? ORDER BY seq",
    ),
    byRunKey: db.prepare("SELECT * FROM inbox WHERE run_id = ? AND idempotency_key = ?"),
    byKeyKey: db.prepare("SELECT * FROM inbox WHERE run_id IS NULL AND name = ? AND key = ? AND idempotency_key = ?"),
    upsert: db.prepare(
      `INSERT INTO inbox (event_id, run_id, name, key, payload, idempotency_key, created_at,
                          delivered_node_id, delivered_visit, delivered_at, size, scope)
       VALUES (@event_id, @run_id, @name, @key, @payload, @idempotency_key, @created_at,
               @delivered_node_id, @delivered_visit, @delivered_at, @size, @scope)
       ON CONFLICT (event_id) DO UPDATE SET delivered_node_id = excluded.delivered_node_id,
         delivered_visit = excluded.delivered_visit, delivered_at = excluded.delivered_at`,
    ),
    prune: db.prepare("DELETE FROM inbox WHERE run_id IS NULL AND created_at < ?"),
  };
  const rows = (r: unknown[]) => (r as DbInbox[]).map(fromDb);
  return {
    waitingEvents: async (runId, name, limit) => rows(s.waiting.all(runId, name, limit)),
    inboxSize: async (runId) => s.size.get(runId) as { events: number; bytes: number },
    keyedEvents: async (name, key, since) => rows(s.keyed.all(name, key, since)),
    inboxByIdempotencyKey: async (scope, idempotencyKey) => {
      const row = (
        scope.run_id === null
          ? s.byKeyKey.get(scope.name, scope.key, idempotencyKey)
          : s.byRunKey.get(scope.run_id, idempotencyKey)
      ) as DbInbox | undefined;
      return row ? fromDb(row) : null;
    },
    writeInbox: async (events) => {
      for (const e of events) {
        const payload = JSON.stringify(e.payload);
        s.upsert.run({
          event_id: e.event_id,
          run_id: e.run_id,
          name: e.name,
          key: e.key,
          payload,
          size: Buffer.byteLength(payload),
          scope: e.scope ? JSON.stringify(e.scope) : null,
          idempotency_key: e.idempotency_key,
          created_at: e.created_at,
          delivered_node_id: e.delivered_to?.node_id ?? null,
          delivered_visit: e.delivered_to?.visit ?? null,
          delivered_at: e.delivered_at,
        });
      }
    },
    pruneKeyed: async (before) => {
      s.prune.run(before);
    },
  };
}
