/**
 * A statement error fails only the input that caused it (issue 14 item 4): when the database
 * refuses one row of a group commit, the engine applies the batch again in halves, so only that
 * input's caller hears the error and everyone else's work commits. The refusal is real: a
 * constraint the test adds to the database (a trigger on SQLite, a CHECK on PostgreSQL).
 */
import Database from "better-sqlite3";
import pg from "pg";
import { describe, expect, it } from "vitest";
import type { Task } from "../../src/index.js";
import { onPostgres, testEngine } from "../helpers.js";

/** Makes the database refuse runs whose input, and visits whose output, contain "poison". */
async function refusePoison(database: string): Promise<void> {
  if (onPostgres) {
    const url = new URL(database);
    const schema = url.searchParams.get("schema") as string;
    url.searchParams.delete("schema");
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    try {
      await client.query(
        `ALTER TABLE "${schema}".runs ADD CONSTRAINT no_poison CHECK (input::text NOT LIKE '%poison%')`,
      );
      await client.query(
        `ALTER TABLE "${schema}".visits ADD CONSTRAINT no_poison CHECK (output IS NULL OR output::text NOT LIKE '%poison%')`,
      );
    } finally {
      await client.end();
    }
    return;
  }
  const db = new Database(database.slice("sqlite:".length));
  try {
    db.exec(`
      CREATE TRIGGER no_poison_run BEFORE INSERT ON runs WHEN NEW.input LIKE '%poison%'
        BEGIN SELECT RAISE(ABORT, 'no poison in runs'); END;
      CREATE TRIGGER no_poison_visit BEFORE UPDATE ON visits WHEN NEW.output LIKE '%poison%'
        BEGIN SELECT RAISE(ABORT, 'no poison in visits'); END;`);
  } finally {
    db.close();
  }
}

const ONE = { id: "one", nodes: [{ node_id: "a", agent_type: "work" }] };

describe("an input the database refuses", () => {
  it("fails only its own start: the 19 other starts of the group commit succeed", async () => {
    const { engine, database } = await testEngine({
      agents: { work: (t: Task) => ({ i: (t.input as { i: number }).i }) },
    });
    await engine.registerWorkflow(ONE);
    await refusePoison(database);
    const inputs = Array.from({ length: 20 }, (_, i) => (i === 7 ? { i, note: "poison" } : { i }));
    const starts = await Promise.allSettled(inputs.map((input) => engine.startRun("one", { input })));

    const refused = starts.filter((s) => s.status === "rejected");
    expect(refused).toHaveLength(1);
    expect(starts[7]?.status).toBe("rejected");
    const started = starts.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
    expect(started).toHaveLength(19);
    for (const run of started) expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
    // Nothing of the refused start was written; the engine goes on serving.
    expect(
      (await engine.listRuns({ limit: 100 })).map((r) => (r.input as { i: number }).i).sort((a, b) => a - b),
    ).toEqual(inputs.map((x) => x.i).filter((i) => i !== 7));
    const after = await engine.startRun("one", { input: { i: 99 } });
    expect((await engine.waitForRun(after.run_id)).status).toBe("SUCCEEDED");
  });

  it("fails only the attempt whose result it refuses, at once; the other results of the flush commit", async () => {
    // Every run's attempt returns at the same moment, so their results share one flush.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    let started = 0;
    const { engine, database } = await testEngine({
      agents: {
        work: async (t: Task) => {
          if (++started === 10) open();
          await gate;
          const i = (t.input as { i: number }).i;
          return i === 3 ? { text: "poison" } : { i };
        },
      },
    });
    await engine.registerWorkflow({ ...ONE, defaults: { retry_count: 0 } });
    await refusePoison(database);
    const runs = await Promise.all(Array.from({ length: 10 }, (_, i) => engine.startRun("one", { input: { i } })));
    const done = await Promise.all(runs.map((r) => engine.waitForRun(r.run_id)));
    for (const [i, run] of done.entries()) {
      if (i === 3) {
        // Failed by the refusal itself, not by its attempt's timeout (the manual clock never moved).
        expect(run.status).toBe("FAILED");
        expect(run.nodes[0]?.error).toMatchObject({ reason: "invalid_output" });
        expect(run.nodes[0]?.error?.message).toMatch(/could not be recorded: the database refused to store it/);
      } else {
        expect(run.status).toBe("SUCCEEDED");
        expect(run.nodes[0]?.output).toEqual({ i });
      }
    }
  });
});
