/**
 * The machine's own floors, measured in the same run as the engine's figures (issue 35): machines
 * differ by 2–3×, the engine's ratio to its floor does not.
 *
 * - `commit_floor_us` (SQLite): a bare better-sqlite3 transaction writing one 200-byte row, WAL,
 *   `synchronous=normal`, on a fresh file; the median of 5,000 commits. What one engine
 *   transaction costs at least.
 * - `roundtrip_floor_ms` (PostgreSQL): a bare one-row INSERT committed on its own, over a pool
 *   made as the store makes its own (pipeline mode), on a fresh table in a schema of its own; the median of 500. One round
 *   trip and one WAL flush: what one step costs at least.
 */
import Database from "better-sqlite3";
import pg from "pg";
import { percentile, tempDb } from "./lib.js";
import { PG_URL, tempSchema } from "./postgres.js";

const ROW = "x".repeat(200);

export function sqliteCommitFloorUs(commits = 5000): number {
  const db = tempDb("commit-floor");
  const sqlite = new Database(db.path);
  try {
    sqlite.pragma("journal_mode = WAL");
    sqlite.pragma("synchronous = NORMAL");
    sqlite.exec("CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT NOT NULL)");
    const insert = sqlite.prepare("INSERT INTO rows (body) VALUES (?)");
    const commit = sqlite.transaction(() => insert.run(ROW));
    const samples: number[] = [];
    for (let i = 0; i < commits + 500; i++) {
      const t0 = performance.now();
      commit();
      if (i >= 500) samples.push((performance.now() - t0) * 1000);
    }
    return percentile(samples, 50);
  } finally {
    sqlite.close();
    db.cleanup();
  }
}

export async function postgresRoundtripFloorMs(inserts = 500): Promise<number> {
  // A schema of the bench's own: dropped after, or by the bench's clean-up if this is abandoned.
  const db = tempSchema("roundtrip_floor");
  const table = `${pg.escapeIdentifier(db.schema)}.rows`;
  const pool = new pg.Pool({ connectionString: PG_URL, max: 2, pipeline: true });
  try {
    await pool.query(`CREATE SCHEMA ${pg.escapeIdentifier(db.schema)}`);
    await pool.query(`CREATE TABLE ${table} (id bigserial PRIMARY KEY, body text NOT NULL)`);
    const samples: number[] = [];
    for (let i = 0; i < inserts + 50; i++) {
      const t0 = performance.now();
      await pool.query(`INSERT INTO ${table} (body) VALUES ($1)`, [ROW]);
      if (i >= 50) samples.push(performance.now() - t0);
    }
    return percentile(samples, 50);
  } finally {
    await pool.end();
    await db.cleanup();
  }
}
