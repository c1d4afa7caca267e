/** The engines table: who serves the database, and who died holding attempts (DESIGN §8). */

export interface EngineRow {
  engine_id: string;
  host: string;
  pid: number;
  started_at: number;
  heartbeat_at: number;
  /** The agent types it serves (engine/served-types.ts): written at registration and with every heartbeat. Default: none known. */
  served_types?: string[];
}

/** The engine's own row, outside the caller's transactions (each member commits its own). */
export interface EngineStore {
  /** Records the engine and returns dead engines' ids whose attempts to recover; SQLite throws DatabaseError when another process holds the file. */
  registerEngine(engine: EngineRow, staleBefore: number): Promise<string[]>;
  /** Renews the engine's heartbeat and, when given, what it serves now. Idempotent; DatabaseError on a failure. */
  heartbeat(engineId: string, now: number, servedTypes?: string[]): Promise<void>;
  /** The agent types live engines serve (heartbeat at most `freshMs` old at `now`, PostgreSQL: its time). Reads only. */
  servedTypes(now: number, freshMs: number): Promise<string[]>;
  /** Marks the engine stopped as it closes; never throws for the database's failure (a row left is taken as a dead engine's). */
  stopEngine(engineId: string, now: number): Promise<void>;
}

/** Taking over dead engines, inside a write transaction. */
export interface EnginesTx {
  /** Marks dead engines but `self` stopped (stale heartbeat, PostgreSQL: or a lock free past its grace), one taker each; those holding attempts. */
  takeDeadEngines(self: string, staleBefore: number): Promise<string[]>;
  /** The last heartbeat of these engines' rows for the takeover's log (0: stopped holding attempts); no row, left out. No lock. */
  lastHeartbeats(engineIds: string[]): Promise<Map<string, number>>;
}
