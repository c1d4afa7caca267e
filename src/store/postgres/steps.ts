/** The steps table on PostgreSQL (migration 022): durable steps inside a visit (DESIGN §14.1). */
import { executionId } from "../../core/run-state.js";
import type { StepReads, StepRow, StepsTx } from "../steps.js";
import type { Read } from "./reads.js";

type Query = <R extends object>(config: { name?: string; text: string }, values: unknown[]) => Promise<R[]>;

const COLUMNS = "execution_id, name, run_id, node_id, visit, attempt, output, size, recorded_at";

/**
 * Inserts the rows (arrays of their columns) whose key is free, then answers the row recorded
 * under each key, in the order given: one round trip for a flush's steps.
 */
const RECORD = `WITH given AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[], $7::text[], $8::int[], $9::bigint[])
      WITH ORDINALITY AS g(execution_id, name, run_id, node_id, visit, attempt, output, size, recorded_at, n)),
  inserted AS (
    INSERT INTO steps (${COLUMNS})
    SELECT execution_id, name, run_id, node_id, visit, attempt, output::json, size, recorded_at FROM given ORDER BY n
    ON CONFLICT (execution_id, name) DO NOTHING
    RETURNING execution_id, name)
  SELECT g.n, (i.name IS NOT NULL) AS inserted, s.execution_id, s.name, s.run_id, s.node_id, s.visit, s.attempt,
         s.output, s.size, s.recorded_at
    FROM given g
    LEFT JOIN inserted i ON i.execution_id = g.execution_id AND i.name = g.name
    LEFT JOIN steps s ON s.execution_id = g.execution_id AND s.name = g.name
   ORDER BY g.n`;

const COPY = `INSERT INTO steps (${COLUMNS})
  SELECT $2, name, $4, node_id, $3, attempt, output, size, recorded_at FROM steps WHERE execution_id = $1 ORDER BY seq
  ON CONFLICT (execution_id, name) DO NOTHING`;

type Recorded = StepRow & { n: number; inserted: boolean };

export function postgresSteps(q: Query): StepsTx {
  return {
    recordSteps: async (rows) => {
      if (rows.length === 0) return [];
      const column = <K extends keyof StepRow>(k: K) => rows.map((r) => r[k]);
      const found = await q<Recorded>({ name: "skein_record_steps", text: RECORD }, [
        column("execution_id"),
        column("name"),
        column("run_id"),
        column("node_id"),
        column("visit"),
        column("attempt"),
        rows.map((r) => JSON.stringify(r.output)),
        column("size"),
        column("recorded_at"),
      ]);
      // A row inserted by this statement is not in its snapshot of `steps`: it is the one given.
      return found.map(({ n, inserted, ...row }) => (inserted ? (rows[Number(n) - 1] as StepRow) : row));
    },
    copySteps: async (from, to) => {
      await q({ name: "skein_copy_steps", text: COPY }, [
        executionId(from.run_id, from.node_id, from.visit),
        executionId(to.run_id, to.node_id, to.visit),
        to.visit,
        to.run_id,
      ]);
    },
  };
}

export function postgresStepReads(read: Read): StepReads {
  return {
    stepsOf: async (executionIds) => {
      if (executionIds.length === 0) return [];
      return read<StepRow>({
        name: "skein_steps_of",
        text: `SELECT ${COLUMNS} FROM steps WHERE execution_id = ANY($1::text[]) ORDER BY seq`,
        values: [executionIds],
      });
    },
    runSteps: async (runId, nodeId) =>
      read<StepRow>({
        name: "skein_run_steps",
        text: `SELECT ${COLUMNS} FROM steps WHERE run_id = $1 AND ($2::text IS NULL OR node_id = $2)
                ORDER BY node_id, visit, seq`,
        values: [runId, nodeId ?? null],
      }),
    threadSteps: async (name) =>
      read<StepRow>({
        name: "skein_thread_steps",
        text: `SELECT ${COLUMNS} FROM steps WHERE name = $1 AND name LIKE 'thread:%' ORDER BY seq`,
        values: [name],
      }),
  };
}
