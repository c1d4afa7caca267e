/**
 * The engines table on SQLite. One engine per file: the file's engine lock (engine-lock.ts), not
 * a heartbeat, says who is alive, so no transaction takes a dead engine over (registerEngine does).
 */
import type Database from "better-sqlite3";
import type { EngineRow, EnginesTx } from "../engines.js";

/** An engine as a refusal or a takeover names it. */
export type Holder = Pick<EngineRow, "engine_id" | "pid" | "host">;

/** The engine not stopped that started last: the file's engine, as its rows say. */
export const CURRENT_ENGINE =
  "SELECT engine_id, pid, host FROM engines WHERE stopped_at IS NULL ORDER BY started_at DESC, rowid DESC LIMIT 1";

export type EngineRowStatements = Record<
  "stopAll" | "insert" | "holdingAttempts" | "heartbeat" | "stop" | "stopped" | "current",
  Database.Statement
>;

/** The statements of the store's own engine row (SqliteStore: register, heartbeat, stop, ownership), on the write connection. */
export function engineRows(db: Database.Database): EngineRowStatements {
  return {
    stopAll: db.prepare("UPDATE engines SET stopped_at = ? WHERE stopped_at IS NULL"),
    insert: db.prepare(
      "INSERT INTO engines (engine_id, host, pid, started_at, heartbeat_at, served_types) VALUES (@engine_id, @host, @pid, @started_at, @heartbeat_at, @served_types)",
    ),
    // Every other engine is gone; those still holding attempts (killed, or closed before their
    // attempts returned) are the ones to recover. External workers are not engines.
    holdingAttempts: db.prepare(
      `SELECT engine_id FROM engines WHERE engine_id <> ?
             AND engine_id IN (SELECT holder FROM visits WHERE state = 'RUNNING'
                               UNION SELECT holder FROM compensations WHERE state = 'RUNNING'
                               UNION SELECT holder FROM map_items WHERE state = 'RUNNING' AND agent_type IS NOT NULL
                               UNION SELECT v.holder FROM runs r JOIN visits v ON v.run_id = r.run_id
                                 WHERE r.status = 'COMPENSATING' AND v.state = 'CANCELLED' AND v.holder IS NOT NULL)`,
    ),
    heartbeat: db.prepare(
      "UPDATE engines SET heartbeat_at = ?, served_types = coalesce(?, served_types) WHERE engine_id = ?",
    ),
    stop: db.prepare("UPDATE engines SET stopped_at = ? WHERE engine_id = ?"),
    stopped: db.prepare("SELECT stopped_at FROM engines WHERE engine_id = ?"),
    current: db.prepare(CURRENT_ENGINE),
  };
}

export function sqliteEngines(db: Database.Database): EnginesTx {
  return {
    takeDeadEngines: async () => [],
    // As many placeholders as engines: prepared per call (a takeover, rare).
    lastHeartbeats: async (engineIds) => {
      const rows = db
        .prepare(
          `SELECT engine_id, heartbeat_at FROM engines WHERE engine_id IN (${engineIds.map(() => "?").join(",")})`,
        )
        .all(...engineIds) as { engine_id: string; heartbeat_at: number }[];
      return new Map(rows.map((r) => [r.engine_id, r.heartbeat_at]));
    },
  };
}
