/**
 * The map_items table on PostgreSQL (migration 006): the items of `map` visits (DESIGN §11.1).
 * Every method is one statement whatever the number of items: a list of 10,000 is one bound
 * parameter, expanded by the server.
 */
import type { MapItem, MapItemState } from "../../core/types.js";
import { type ItemKey, type MapItemUpdate, type MapTx, missingMapItem } from "../map-items.js";

export type DbMapItem = Omit<MapItem, "index" | "state"> & { idx: number; state: string };

export const mapItemFromDb = ({ idx, state, ...r }: DbMapItem): MapItem => ({
  ...r,
  index: idx,
  state: state as MapItemState,
});

const COLUMNS =
  "run_id, node_id, visit, idx, item, state, child_run_id, output, error, started_at, ended_at, " +
  "agent_type, attempt, failures, interruptions, ready_at, deadline_at, lease_expires_at, holder, priority";
const OF_VISIT = "run_id = $1 AND node_id = $2 AND visit = $3";
/** COLUMNS of `map_items m`. */
const COLUMNS_OF_M = COLUMNS.split(", ")
  .map((c) => `m.${c}`)
  .join(", ");
const ITEM_KEYS = 'SELECT run_id, node_id, visit, idx AS "index" FROM map_items';

/** A visit's items after an index, by index (Store.listMapItems). */
export const LIST_MAP_ITEMS = {
  name: "skein_list_map_items",
  text: `SELECT ${COLUMNS} FROM map_items WHERE ${OF_VISIT} AND idx > $4 ORDER BY idx LIMIT $5`,
};

const SQL = {
  // $4: the items, one JSON array, $5 the index of its first, $6 the priority of the map's run. The visit before this one ($3 - 1) did not succeed (a
  // redrive): its SUCCEEDED items of the same index and value (jsonb equality: key order aside)
  // are carried over. The texts are compared first, so equal items are never parsed as jsonb.
  insert: {
    name: "skein_insert_map_items",
    text: `WITH redriven AS (
             SELECT EXISTS (SELECT 1 FROM visits WHERE run_id = $1 AND node_id = $2 AND visit = $3 - 1
                             AND state <> 'SUCCEEDED') AS yes),
           listed AS (
             SELECT (t.n - 1 + $5::int)::int AS idx, t.item FROM json_array_elements($4::json) WITH ORDINALITY AS t(item, n)),
           matched AS (
             SELECT l.idx, l.item, d.child_run_id, d.output, d.started_at, d.ended_at,
                    CASE WHEN d.idx IS NULL THEN false
                         WHEN d.item::text = l.item::text THEN true
                         -- jsonb cannot hold a NUL (\\u0000): such an item, written differently, runs again.
                         WHEN strpos(d.item::text || l.item::text, '\\u0000') > 0 THEN false
                         ELSE d.item::jsonb = l.item::jsonb END AS carried
               FROM listed l LEFT JOIN map_items d
                 ON (SELECT yes FROM redriven) AND d.run_id = $1 AND d.node_id = $2 AND d.visit = $3 - 1
                AND d.idx = l.idx AND d.state = 'SUCCEEDED'),
           inserted AS (
             INSERT INTO map_items (run_id, node_id, visit, idx, item, state, child_run_id, output, started_at, ended_at, priority)
             SELECT $1, $2, $3, idx, item, CASE WHEN carried THEN 'SUCCEEDED' ELSE 'PENDING' END,
                    CASE WHEN carried THEN child_run_id END, CASE WHEN carried THEN output END,
                    CASE WHEN carried THEN started_at END, CASE WHEN carried THEN ended_at END, $6::int
               FROM matched
             RETURNING state)
           SELECT count(*)::int AS total, (count(*) FILTER (WHERE state = 'SUCCEEDED'))::int AS carried FROM inserted`,
  },
  pending: {
    name: "skein_pending_map_items",
    text: `SELECT idx, item FROM map_items WHERE ${OF_VISIT} AND state = 'PENDING' AND idx >= $4 ORDER BY idx LIMIT $5`,
  },
  // One row per update; a field whose flag is false keeps its value.
  update: {
    name: "skein_update_map_items",
    text: `WITH u AS (
             SELECT * FROM unnest($1::text[], $2::text[], $3::integer[], $4::integer[], $5::text[],
                                  $6::boolean[], $7::text[], $8::boolean[], $9::json[], $10::boolean[], $11::json[],
                                  $12::boolean[], $13::bigint[], $14::boolean[], $15::bigint[])
               AS u(run_id, node_id, visit, idx, state, set_child_run_id, child_run_id, set_output, output,
                    set_error, error, set_started_at, started_at, set_ended_at, ended_at)),
           changed AS (
             UPDATE map_items m SET state = u.state,
               child_run_id = CASE WHEN u.set_child_run_id THEN u.child_run_id ELSE m.child_run_id END,
               output = CASE WHEN u.set_output THEN u.output ELSE m.output END,
               error = CASE WHEN u.set_error THEN u.error ELSE m.error END,
               started_at = CASE WHEN u.set_started_at THEN u.started_at ELSE m.started_at END,
               ended_at = CASE WHEN u.set_ended_at THEN u.ended_at ELSE m.ended_at END
             FROM u WHERE m.run_id = u.run_id AND m.node_id = u.node_id AND m.visit = u.visit AND m.idx = u.idx
             RETURNING m.run_id, m.node_id, m.visit, m.idx)
           SELECT u.run_id, u.node_id, u.visit, u.idx FROM u
            WHERE NOT EXISTS (SELECT 1 FROM changed c WHERE c.run_id = u.run_id AND c.node_id = u.node_id
                                AND c.visit = u.visit AND c.idx = u.idx)
            LIMIT 1`,
  },
  running: {
    name: "skein_running_map_items",
    text: `SELECT child_run_id FROM map_items
            WHERE ${OF_VISIT} AND state = 'RUNNING' AND child_run_id IS NOT NULL ORDER BY idx LIMIT $4`,
  },
  failed: {
    name: "skein_failed_map_items",
    text: `SELECT idx, child_run_id, error FROM map_items
            WHERE ${OF_VISIT} AND state IN ('FAILED', 'CANCELLED') ORDER BY idx LIMIT $4`,
  },
  held: {
    name: "skein_held_maps",
    text: `SELECT execution_id FROM visits WHERE holder = 'map' AND state IN ('RUNNING', 'CANCELLED')
            ORDER BY run_id LIMIT $1`,
  },
  newestSucceeded: {
    name: "skein_newest_succeeded_map_item",
    text: `SELECT child_run_id FROM map_items
            WHERE ${OF_VISIT} AND state = 'SUCCEEDED' AND child_run_id IS NOT NULL ORDER BY ended_at DESC, idx DESC LIMIT 1`,
  },
  // The exact size of the text in UTF-8 bytes (brackets, commas, each slot) first; the text
  // only when it fits (a subquery in a CASE branch runs only when that branch is taken). The
  // outputs' texts are kept as written (json), so they are joined, not rebuilt.
  output: {
    name: "skein_map_output",
    text: `WITH size AS (
             SELECT 2 + greatest(count(*) - 1, 0) + coalesce(sum(CASE WHEN state = 'SUCCEEDED' AND output IS NOT NULL
                      THEN octet_length(output::text) ELSE 4 END), 0) AS bytes
               FROM map_items WHERE ${OF_VISIT})
           SELECT bytes::bigint AS bytes, CASE WHEN bytes <= $4 THEN (
               SELECT '[' || coalesce(string_agg(CASE WHEN state = 'SUCCEEDED' THEN coalesce(output::text, 'null')
                        ELSE 'null' END, ',' ORDER BY idx), '') || ']'
                 FROM map_items WHERE ${OF_VISIT}) END AS text
             FROM size`,
  },
  // The rows of a list of keys (those that exist), one statement whatever their number.
  load: {
    name: "skein_load_map_items",
    text: `SELECT ${COLUMNS_OF_M}
             FROM unnest($1::text[], $2::text[], $3::integer[], $4::integer[]) AS k(run_id, node_id, visit, idx)
             JOIN map_items m ON m.run_id = k.run_id AND m.node_id = k.node_id AND m.visit = k.visit AND m.idx = k.idx`,
  },
  // Whole rows, one per item (written in order: `written` keeps a key's last row); the first
  // row (in the list's order) without an item to write is returned.
  write: {
    name: "skein_write_map_items",
    text: `WITH u AS (
             SELECT * FROM unnest($1::text[], $2::text[], $3::integer[], $4::integer[], $5::text[], $6::text[],
                                  $7::json[], $8::json[], $9::bigint[], $10::bigint[], $11::text[], $12::integer[],
                                  $13::integer[], $14::integer[], $15::bigint[], $16::bigint[], $17::bigint[], $18::text[])
               WITH ORDINALITY
               AS u(run_id, node_id, visit, idx, state, child_run_id, output, error, started_at, ended_at, agent_type,
                    attempt, failures, interruptions, ready_at, deadline_at, lease_expires_at, holder, n)),
           changed AS (
             UPDATE map_items m SET state = u.state, child_run_id = u.child_run_id, output = u.output, error = u.error,
               started_at = u.started_at, ended_at = u.ended_at, agent_type = u.agent_type, attempt = u.attempt,
               failures = u.failures, interruptions = u.interruptions, ready_at = u.ready_at,
               deadline_at = u.deadline_at, lease_expires_at = u.lease_expires_at, holder = u.holder
             FROM u WHERE m.run_id = u.run_id AND m.node_id = u.node_id AND m.visit = u.visit AND m.idx = u.idx
             RETURNING m.run_id, m.node_id, m.visit, m.idx)
           SELECT u.run_id, u.node_id, u.visit, u.idx FROM u
            WHERE NOT EXISTS (SELECT 1 FROM changed c WHERE c.run_id = u.run_id AND c.node_id = u.node_id
                                AND c.visit = u.visit AND c.idx = u.idx)
            ORDER BY u.n LIMIT 1`,
  },
  active: {
    name: "skein_active_map_items",
    text: `SELECT ${COLUMNS} FROM map_items WHERE ${OF_VISIT} AND agent_type IS NOT NULL
              AND (state IN ('RUNNING', 'RETRYING') OR (state = 'PENDING' AND ready_at IS NOT NULL))
            ORDER BY idx LIMIT $4`,
  },
  // The item's run is locked, as a visit's claim locks it (claims.ts `claimable`): SKIP LOCKED
  // leaves a run another engine holds to it, and MATERIALIZED keeps the LIMIT with the locking scan.
  claimable: {
    name: "skein_claimable_map_items",
    text: `WITH c AS MATERIALIZED (
             SELECT m.run_id, m.node_id, m.visit, m.idx FROM map_items m JOIN runs r ON r.run_id = m.run_id
              WHERE m.agent_type = $1 AND m.ready_at IS NOT NULL AND m.ready_at <= $2 AND r.paused IS NULL
              ORDER BY m.priority, m.ready_at LIMIT $3
                FOR UPDATE OF r SKIP LOCKED)
           SELECT run_id, node_id, visit, idx AS "index" FROM c`,
  },
  expired: {
    name: "skein_expired_map_items",
    text: `${ITEM_KEYS} WHERE state = 'RUNNING' AND agent_type IS NOT NULL AND lease_expires_at <= $1
            ORDER BY lease_expires_at LIMIT $2`,
  },
  heldBy: {
    name: "skein_map_items_held_by",
    text: `${ITEM_KEYS} WHERE state = 'RUNNING' AND agent_type IS NOT NULL AND holder = ANY($1::text[]) LIMIT $2`,
  },
  toSettle: {
    name: "skein_map_items_to_settle",
    text: `SELECT m.child_run_id FROM map_items m JOIN runs c ON c.run_id = m.child_run_id
            WHERE m.state = 'RUNNING' AND c.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED') LIMIT $1`,
  },
} as const;

type Query = <R extends object>(config: { name?: string; text: string }, values: unknown[]) => Promise<R[]>;

const OPTIONAL_FIELDS = ["child_run_id", "output", "error", "started_at", "ended_at"] as const;

/**
 * One change per item: later updates of the same item in the list add to the earlier ones
 * (one statement may not change a row twice).
 */
function merged(updates: MapItemUpdate[]): MapItemUpdate[] {
  const byItem = new Map<string, MapItemUpdate>();
  for (const u of updates) {
    const id = `${u.key.run_id}\0${u.key.node_id}\0${u.key.visit}\0${u.index}`;
    const before = byItem.get(id);
    if (!before) {
      byItem.set(id, { ...u });
      continue;
    }
    before.state = u.state;
    for (const field of OPTIONAL_FIELDS) {
      if (u[field] !== undefined) (before as unknown as Record<string, unknown>)[field] = u[field];
    }
  }
  return [...byItem.values()];
}

const itemId = (r: ItemKey) => `${r.run_id}\0${r.node_id}\0${r.visit}\0${r.index}`;

/** One row per item, the last given of each (one statement may not change a row twice), in the list's order. */
function written(rows: MapItem[]): MapItem[] {
  const byItem = new Map<string, MapItem>();
  for (const r of rows) byItem.set(itemId(r), r);
  return [...byItem.values()];
}

const jsonText = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));

/** The map item statements of one transaction, through its query function. */
export function postgresMapItems(q: Query): MapTx {
  return {
    loadMapItems: async (keys) => {
      if (keys.length === 0) return [];
      const rows = await q<DbMapItem>(SQL.load, [
        keys.map((k) => k.run_id),
        keys.map((k) => k.node_id),
        keys.map((k) => k.visit),
        keys.map((k) => k.index),
      ]);
      return rows.map(mapItemFromDb);
    },
    writeMapItems: async (given) => {
      if (given.length === 0) return;
      const rows = written(given);
      const column = <K extends keyof MapItem>(field: K) => rows.map((r) => r[field]);
      const [missing] = await q<{ run_id: string; node_id: string; visit: number; idx: number }>(SQL.write, [
        column("run_id"),
        column("node_id"),
        column("visit"),
        column("index"),
        column("state"),
        column("child_run_id"),
        rows.map((r) => jsonText(r.output)),
        rows.map((r) => jsonText(r.error)),
        column("started_at"),
        column("ended_at"),
        column("agent_type"),
        column("attempt"),
        column("failures"),
        column("interruptions"),
        column("ready_at"),
        column("deadline_at"),
        column("lease_expires_at"),
        column("holder"),
      ]);
      if (missing) throw missingMapItem({ key: missing, index: missing.idx });
    },
    activeMapItems: async (key, limit) =>
      (await q<DbMapItem>(SQL.active, [key.run_id, key.node_id, key.visit, limit])).map(mapItemFromDb),
    claimableMapItems: (agentType, now, limit) => q<ItemKey>(SQL.claimable, [agentType, now, limit]),
    expiredMapItems: (now, limit) => q<ItemKey>(SQL.expired, [now, limit]),
    mapItemsHeldBy: async (holders, limit) => (holders.length === 0 ? [] : q<ItemKey>(SQL.heldBy, [holders, limit])),
    insertMapItems: async (key, items, _now, priority, offset = 0) => {
      const [row] = await q<{ total: number; carried: number }>(SQL.insert, [
        key.run_id,
        key.node_id,
        key.visit,
        JSON.stringify(items),
        offset,
        priority,
      ]);
      return { total: row?.total ?? 0, carried: row?.carried ?? 0 };
    },
    pendingMapItems: async (key, from, limit) => {
      const rows = await q<Pick<DbMapItem, "idx" | "item">>(SQL.pending, [
        key.run_id,
        key.node_id,
        key.visit,
        from,
        limit,
      ]);
      return rows.map((r) => ({ index: r.idx, item: r.item }));
    },
    updateMapItems: async (updates) => {
      if (updates.length === 0) return;
      const rows = merged(updates);
      const flag = (field: (typeof OPTIONAL_FIELDS)[number]) => rows.map((u) => u[field] !== undefined);
      const value = (field: (typeof OPTIONAL_FIELDS)[number], json = false) =>
        rows.map((u) => {
          const v = u[field];
          if (v === undefined || v === null) return null;
          return json ? JSON.stringify(v) : v;
        });
      const [missing] = await q<{ run_id: string; node_id: string; visit: number; idx: number }>(SQL.update, [
        rows.map((u) => u.key.run_id),
        rows.map((u) => u.key.node_id),
        rows.map((u) => u.key.visit),
        rows.map((u) => u.index),
        rows.map((u) => u.state),
        flag("child_run_id"),
        value("child_run_id"),
        flag("output"),
        value("output", true),
        flag("error"),
        value("error", true),
        flag("started_at"),
        value("started_at"),
        flag("ended_at"),
        value("ended_at"),
      ]);
      if (missing) throw missingMapItem({ key: missing, index: missing.idx });
    },
    newestSucceededMapItem: async (key) => {
      const [row] = await q<{ child_run_id: string }>(SQL.newestSucceeded, [key.run_id, key.node_id, key.visit]);
      return row?.child_run_id ?? null;
    },
    failedMapItems: async (key, limit) => {
      const rows = await q<Pick<DbMapItem, "idx" | "child_run_id" | "error">>(SQL.failed, [
        key.run_id,
        key.node_id,
        key.visit,
        limit,
      ]);
      return rows.map((r) => ({ index: r.idx, child_run_id: r.child_run_id, error: r.error }));
    },
    runningMapItems: async (key, limit) => {
      const rows = await q<{ child_run_id: string }>(SQL.running, [key.run_id, key.node_id, key.visit, limit]);
      return rows.map((r) => r.child_run_id);
    },
    heldMaps: async (limit) => (await q<{ execution_id: string }>(SQL.held, [limit])).map((r) => r.execution_id),
    mapOutput: async (key, maxBytes) => {
      const [row] = await q<{ bytes: number; text: string | null }>(SQL.output, [
        key.run_id,
        key.node_id,
        key.visit,
        maxBytes,
      ]);
      if (!row) throw new Error("skein: the map output statement returned no row");
      return row.text === null ? { tooLarge: Number(row.bytes) } : { text: row.text };
    },
    mapItemsToSettle: async (limit) => {
      const rows = await q<{ child_run_id: string }>(SQL.toSettle, [limit]);
      return rows.map((r) => r.child_run_id);
    },
  };
}
