/** The steps table on SQLite (migration 022): durable steps inside a visit (DESIGN §14.1). */
import type Database from "better-sqlite3";
import { executionId } from "../../core/run-state.js";
import type { Json } from "../../core/types.js";
import type { StepReads, StepRow, StepsTx } from "../steps.js";
import type { Read } from "./reads.js";

type DbStep = Omit<StepRow, "output"> & { output: string };

const COLUMNS = "execution_id, name, run_id, node_id, visit, attempt, output, size, recorded_at";
const fromDb = (r: DbStep): StepRow => ({
  execution_id: r.execution_id,
  name: r.name,
  run_id: r.run_id,
  node_id: r.node_id,
  visit: r.visit,
  attempt: r.attempt,
  output: JSON.parse(r.output) as Json,
  size: r.size,
  recorded_at: r.recorded_at,
});

export function sqliteSteps(db: Database.Database): StepsTx {
  const s = {
    insert: db.prepare(
      `INSERT INTO steps (${COLUMNS}) VALUES (@execution_id, @name, @run_id, @node_id, @visit, @attempt, @output, @size, @recorded_at)
       ON CONFLICT (execution_id, name) DO NOTHING`,
    ),
    one: db.prepare(`SELECT ${COLUMNS} FROM steps WHERE execution_id = ? AND name = ?`),
    copy: db.prepare(
      `INSERT INTO steps (${COLUMNS})
       SELECT @to, name, @run_id, node_id, @visit, attempt, output, size, recorded_at FROM steps
        WHERE execution_id = @from ORDER BY seq
       ON CONFLICT (execution_id, name) DO NOTHING`,
    ),
  };
  return {
    recordSteps: async (rows) =>
      rows.map((row) => {
        const inserted = s.insert.run({ ...row, output: JSON.stringify(row.output) }).changes > 0;
        return inserted ? row : fromDb(s.one.get(row.execution_id, row.name) as DbStep);
      }),
    copySteps: async (from, to) => {
      s.copy.run({
        from: executionId(from.run_id, from.node_id, from.visit),
        to: executionId(to.run_id, to.node_id, to.visit),
        run_id: to.run_id,
        visit: to.visit,
      });
    },
  };
}

export function sqliteStepReads(read: Read): StepReads {
  return {
    stepsOf: async (executionIds) => {
      if (executionIds.length === 0) return [];
      const sql = `SELECT ${COLUMNS} FROM steps WHERE execution_id IN (SELECT value FROM json_each(?)) ORDER BY seq`;
      return (read(sql).all(JSON.stringify(executionIds)) as DbStep[]).map(fromDb);
    },
    runSteps: async (runId, nodeId) => {
      const sql = `SELECT ${COLUMNS} FROM steps WHERE run_id = ? AND (? IS NULL OR node_id = ?) ORDER BY node_id, visit, seq`;
      return (read(sql).all(runId, nodeId ?? null, nodeId ?? null) as DbStep[]).map(fromDb);
    },
    threadSteps: async (name) => {
      // The LIKE term is the partial index's own: SQLite uses the index only when the query repeats it.
      const sql = `SELECT ${COLUMNS} FROM steps WHERE name = ? AND name LIKE 'thread:%' ORDER BY seq`;
      return (read(sql).all(name) as DbStep[]).map(fromDb);
    },
  };
}
