/** The map_items table on SQLite (migration 006): the items of `map` visits (DESIGN §11.1). */
import type Database from "better-sqlite3";
import type { Json, MapItem, MapItemState, VisitError } from "../../core/types.js";
import { type ItemKey, type MapItemUpdate, type MapTx, missingMapItem } from "../map-items.js";
import type { VisitKey } from "../runs.js";
import { PAUSED_RUNS } from "./claims.js";

/** A map_items row as SQLite gives it: JSON as text, the state as a string, the index as `idx`. */
export type DbMapItem = Omit<MapItem, "index" | "item" | "state" | "output" | "error"> & {
  idx: number;
  item: string;
  state: string;
  output: string | null;
  error: string | null;
};

export function mapItemFromDb({ idx, ...r }: DbMapItem): MapItem {
  return {
    ...r,
    index: idx,
    item: JSON.parse(r.item) as Json,
    state: r.state as MapItemState,
    output: r.output === null ? null : (JSON.parse(r.output) as Json),
    error: r.error === null ? null : (JSON.parse(r.error) as VisitError),
  };
}

const OF_VISIT = "run_id = ? AND node_id = ? AND visit = ?";

/** A visit's items after an index, by index (Store.listMapItems, on the read connection). */
export const LIST_MAP_ITEMS = `SELECT * FROM map_items WHERE ${OF_VISIT} AND idx > ? ORDER BY idx LIMIT ?`;

/**
 * The value's JSON text with every object's keys sorted: two items are the same value when
 * their canonical texts are equal (PostgreSQL's jsonb equality, which ignores key order).
 */
export function canonicalJson(value: Json): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k] as Json)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

const keyParams = (key: VisitKey) => [key.run_id, key.node_id, key.visit];

/** What `writeMapItems` writes of a row, in the order of its statement's parameters. */
function writtenParams(r: MapItem): unknown[] {
  return [
    r.state,
    r.child_run_id,
    r.output === null ? null : JSON.stringify(r.output),
    r.error === null ? null : JSON.stringify(r.error),
    r.started_at,
    r.ended_at,
    r.agent_type,
    r.attempt,
    r.failures,
    r.interruptions,
    r.ready_at,
    r.deadline_at,
    r.lease_expires_at,
    r.holder,
    r.run_id,
    r.node_id,
    r.visit,
    r.index,
  ];
}

const ITEM_KEYS = 'SELECT run_id, node_id, visit, idx AS "index" FROM map_items';

/** An update's optional fields: for each, whether it is given (1/0) and its value as stored. */
function optional(value: unknown, json: boolean): [number, unknown] {
  if (value === undefined) return [0, null];
  if (value === null) return [1, null];
  return [1, json ? JSON.stringify(value) : value];
}

export function sqliteMapItems(db: Database.Database): MapTx {
  const s = {
    visitState: db.prepare(`SELECT state FROM visits WHERE ${OF_VISIT}`).pluck(),
    succeededItem: db.prepare(
      `SELECT item, child_run_id, output, started_at, ended_at FROM map_items
        WHERE ${OF_VISIT} AND idx = ? AND state = 'SUCCEEDED'`,
    ),
    insert: db.prepare(
      `INSERT INTO map_items (run_id, node_id, visit, idx, item, state, child_run_id, output, started_at, ended_at, priority)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    pending: db.prepare(
      `SELECT idx, item FROM map_items WHERE ${OF_VISIT} AND state = 'PENDING' AND idx >= ? ORDER BY idx LIMIT ?`,
    ),
    // A field whose flag is 0 keeps its value.
    update: db.prepare(
      `UPDATE map_items SET state = ?,
         child_run_id = CASE WHEN ? THEN ? ELSE child_run_id END,
         output = CASE WHEN ? THEN ? ELSE output END,
         error = CASE WHEN ? THEN ? ELSE error END,
         started_at = CASE WHEN ? THEN ? ELSE started_at END,
         ended_at = CASE WHEN ? THEN ? ELSE ended_at END
       WHERE ${OF_VISIT} AND idx = ?`,
    ),
    failed: db.prepare(
      `SELECT idx, child_run_id, error FROM map_items
        WHERE ${OF_VISIT} AND state IN ('FAILED', 'CANCELLED') ORDER BY idx LIMIT ?`,
    ),
    running: db
      .prepare(
        `SELECT child_run_id FROM map_items
          WHERE ${OF_VISIT} AND state = 'RUNNING' AND child_run_id IS NOT NULL ORDER BY idx LIMIT ?`,
      )
      .pluck(),
    held: db
      .prepare(
        "SELECT execution_id FROM visits WHERE holder = 'map' AND state IN ('RUNNING', 'CANCELLED') ORDER BY run_id LIMIT ?",
      )
      .pluck(),
    newestSucceeded: db
      .prepare(
        `SELECT child_run_id FROM map_items
          WHERE ${OF_VISIT} AND state = 'SUCCEEDED' AND child_run_id IS NOT NULL ORDER BY ended_at DESC, idx DESC LIMIT 1`,
      )
      .pluck(),
    // The exact size of the text below, in UTF-8 bytes: brackets, commas, and each slot.
    outputBytes: db
      .prepare(
        `SELECT 2 + max(count(*) - 1, 0) + coalesce(sum(CASE WHEN state = 'SUCCEEDED' AND output IS NOT NULL
                  THEN length(CAST(output AS BLOB)) ELSE 4 END), 0)
           FROM map_items WHERE ${OF_VISIT}`,
      )
      .pluck(),
    // The outputs are JSON texts already (written by JSON.stringify): joined, not parsed again.
    outputText: db
      .prepare(
        `SELECT '[' || coalesce(group_concat(CASE WHEN state = 'SUCCEEDED' THEN coalesce(output, 'null') ELSE 'null' END,
                  ',' ORDER BY idx), '') || ']'
           FROM map_items WHERE ${OF_VISIT}`,
      )
      .pluck(),
    // From the running items to their runs (CROSS JOIN keeps that order), never from every run
    // that ever ended.
    toSettle: db
      .prepare(
        `SELECT m.child_run_id FROM map_items m INDEXED BY map_items_running_children
           CROSS JOIN runs c ON c.run_id = m.child_run_id
          WHERE m.state = 'RUNNING' AND c.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED') LIMIT ?`,
      )
      .pluck(),
  };
  const attempts = {
    load: db.prepare(`SELECT * FROM map_items WHERE ${OF_VISIT} AND idx = ?`),
    write: db.prepare(
      `UPDATE map_items SET state = ?, child_run_id = ?, output = ?, error = ?, started_at = ?, ended_at = ?,
         agent_type = ?, attempt = ?, failures = ?, interruptions = ?, ready_at = ?, deadline_at = ?,
         lease_expires_at = ?, holder = ?
       WHERE ${OF_VISIT} AND idx = ?`,
    ),
    active: db.prepare(
      `SELECT * FROM map_items WHERE ${OF_VISIT} AND agent_type IS NOT NULL
          AND (state IN ('RUNNING', 'RETRYING') OR (state = 'PENDING' AND ready_at IS NOT NULL))
        ORDER BY idx LIMIT ?`,
    ),
    // Ordered as the index is (migration 027): no sort however many items wait.
    claimable: db.prepare(
      `${ITEM_KEYS} INDEXED BY map_items_ready WHERE agent_type = ? AND ready_at IS NOT NULL AND ready_at <= ?
          AND run_id NOT IN (${PAUSED_RUNS})
        ORDER BY priority, ready_at LIMIT ?`,
    ),
    expired: db.prepare(
      `${ITEM_KEYS} INDEXED BY map_items_leased
        WHERE state = 'RUNNING' AND agent_type IS NOT NULL AND lease_expires_at <= ? ORDER BY lease_expires_at LIMIT ?`,
    ),
    heldBy: db.prepare(
      `${ITEM_KEYS} INDEXED BY map_items_leased
        WHERE state = 'RUNNING' AND agent_type IS NOT NULL AND holder IN (SELECT value FROM json_each(?)) LIMIT ?`,
    ),
  };
  return {
    loadMapItems: async (keys) => {
      const out: MapItem[] = [];
      for (const k of keys) {
        const row = attempts.load.get(...keyParams(k), k.index) as DbMapItem | undefined;
        if (row) out.push(mapItemFromDb(row));
      }
      return out;
    },
    writeMapItems: async (rows) => {
      for (const r of rows) {
        if (attempts.write.run(writtenParams(r)).changes === 0) throw missingMapItem({ key: r, index: r.index });
      }
    },
    activeMapItems: async (key, limit) =>
      (attempts.active.all(...keyParams(key), limit) as DbMapItem[]).map(mapItemFromDb),
    claimableMapItems: async (agentType, now, limit) => attempts.claimable.all(agentType, now, limit) as ItemKey[],
    expiredMapItems: async (now, limit) => attempts.expired.all(now, limit) as ItemKey[],
    mapItemsHeldBy: async (holders, limit) =>
      holders.length === 0 ? [] : (attempts.heldBy.all(JSON.stringify(holders), limit) as ItemKey[]),
    insertMapItems: async (key, items, _now, priority, offset = 0) => {
      const [runId, nodeId, visit] = keyParams(key);
      // A redrive's new visit keeps what the visit before it (which did not succeed) finished.
      const previousState = s.visitState.get(runId, nodeId, key.visit - 1) as string | undefined;
      const carryOver = previousState !== undefined && previousState !== "SUCCEEDED";
      let carried = 0;
      items.forEach((item, i) => {
        const idx = offset + i;
        const text = JSON.stringify(item);
        const done = carryOver
          ? (s.succeededItem.get(runId, nodeId, key.visit - 1, idx) as
              | Pick<DbMapItem, "item" | "child_run_id" | "output" | "started_at" | "ended_at">
              | undefined)
          : undefined;
        if (done && (done.item === text || canonicalJson(JSON.parse(done.item) as Json) === canonicalJson(item))) {
          carried++;
          s.insert.run(
            runId,
            nodeId,
            visit,
            idx,
            text,
            "SUCCEEDED",
            done.child_run_id,
            done.output,
            done.started_at,
            done.ended_at,
            priority,
          );
        } else {
          s.insert.run(runId, nodeId, visit, idx, text, "PENDING", null, null, null, null, priority);
        }
      });
      return { total: items.length, carried };
    },
    pendingMapItems: async (key, from, limit) =>
      (s.pending.all(...keyParams(key), from, limit) as { idx: number; item: string }[]).map((r) => ({
        index: r.idx,
        item: JSON.parse(r.item) as Json,
      })),
    updateMapItems: async (updates: MapItemUpdate[]) => {
      for (const u of updates) {
        const { changes } = s.update.run(
          u.state,
          ...optional(u.child_run_id, false),
          ...optional(u.output, true),
          ...optional(u.error, true),
          ...optional(u.started_at, false),
          ...optional(u.ended_at, false),
          ...keyParams(u.key),
          u.index,
        );
        if (changes === 0) throw missingMapItem(u);
      }
    },
    failedMapItems: async (key, limit) =>
      (s.failed.all(...keyParams(key), limit) as Pick<DbMapItem, "idx" | "child_run_id" | "error">[]).map((r) => ({
        index: r.idx,
        child_run_id: r.child_run_id,
        error: r.error === null ? null : (JSON.parse(r.error) as VisitError),
      })),
    runningMapItems: async (key, limit) => s.running.all(...keyParams(key), limit) as string[],
    heldMaps: async (limit) => s.held.all(limit) as string[],
    newestSucceededMapItem: async (key) => (s.newestSucceeded.get(...keyParams(key)) as string | undefined) ?? null,
    mapOutput: async (key, maxBytes) => {
      const bytes = s.outputBytes.get(...keyParams(key)) as number;
      if (bytes > maxBytes) return { tooLarge: bytes };
      return { text: s.outputText.get(...keyParams(key)) as string };
    },
    mapItemsToSettle: async (limit) => s.toSettle.all(limit) as string[],
  };
}
