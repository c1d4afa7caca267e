/**
 * Several engines on one PostgreSQL schema: a visit one engine makes ready and has no handler
 * for is started by another at once, woken by the first one's NOTIFY, which names the runs (the
 * second locks and reads them as its transaction begins). The manual clock never advances, so
 * no sweep can stand in for the notification.
 */
import pg from "pg";
import { describe, expect, it } from "vitest";
import { createClient } from "../../src/index.js";
import { capturedLogger, onPostgres, PG_URL, testEngine } from "../helpers.js";

const HANDOFF = {
  id: "handoff",
  nodes: [
    { node_id: "first", agent_type: "first_type" },
    { node_id: "second", agent_type: "second_type", depends_on: ["first"] },
  ],
};

describe.skipIf(!onPostgres)("engines sharing a PostgreSQL database", () => {
  it("start a visit another engine made ready, told by its notification", async () => {
    const seen: string[] = [];
    const a = await testEngine({ agents: { first_type: () => ({ by: "a" }) } });
    const b = await testEngine({
      database: a.database,
      agents: {
        second_type: (task) => {
          seen.push(task.run_id);
          return { by: "b", first: task.deps.first?.output ?? null };
        },
      },
    });
    await a.engine.registerWorkflow(HANDOFF);
    const runs = await Promise.all(Array.from({ length: 20 }, () => a.engine.startRun(HANDOFF.id)));
    const ended = await Promise.all(runs.map((run) => b.engine.waitForRun(run.run_id)));

    expect(ended.map((r) => r.status)).toEqual(runs.map(() => "SUCCEEDED"));
    expect(ended.map((r) => r.nodes.find((n) => n.node_id === "second")?.output)).toEqual(
      runs.map(() => ({ by: "b", first: { by: "a" } })),
    );
    expect([...seen].sort()).toEqual(runs.map((r) => r.run_id).sort());
  });

  it("start a visit it hears of while a transaction of its own waits for a lock", async () => {
    // The notice comes while a flush runs, which took the hints it had before it began: the
    // flush loop runs once more for it, or the visit would wait for a sweep (never: the clock stands).
    const b = await testEngine({ agents: { second_type: () => ({ by: "b" }) } });
    await b.engine.registerWorkflow(HANDOFF);
    await b.engine.registerWorkflow({ id: "lone", nodes: [{ node_id: "second", agent_type: "second_type" }] });
    const client = await createClient({ database: b.database, clock: b.clock });
    const schema = new URL(b.database).searchParams.get("schema");
    const held = await b.engine.startRun(HANDOFF.id); // waits at `first`: no engine serves first_type
    const holder = new pg.Client({ connectionString: PG_URL });
    const listener = new pg.Client({ connectionString: PG_URL });
    await Promise.all([holder.connect(), listener.connect()]);
    try {
      await holder.query("BEGIN");
      await holder.query(`SELECT 1 FROM "${schema}".runs WHERE run_id = $1 FOR UPDATE`, [held.run_id]);
      const cancelled = b.engine.cancelRun(held.run_id); // its flush waits for the holder
      await until(async () => {
        const { rows } = await holder.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))",
        );
        return rows[0].n > 0;
      });
      // A client starts a run whose visit b serves: its NOTIFY reaches b while b's flush waits.
      const heard = new Promise((resolve) => listener.on("notification", resolve));
      await listener.query(`LISTEN "skein_ready_${schema}"`);
      const run = await client.startRun("lone");
      await heard;
      await holder.query("ROLLBACK");
      await cancelled;
      const done = await b.engine.waitForRun(run.run_id);
      expect(done.status).toBe("SUCCEEDED");
      expect(done.nodes[0]?.output).toEqual({ by: "b" });
    } finally {
      await Promise.all([holder.end(), listener.end()]);
      await client.close();
    }
  });

  it("start each visit once when several engines hear of it", async () => {
    const a = await testEngine({ agents: { first_type: () => ({ by: "a" }) } });
    let started = 0;
    const b = await testEngine({
      database: a.database,
      agents: {
        second_type: () => {
          started += 1;
          return { by: "b" };
        },
      },
    });
    const c = await testEngine({ database: a.database, agents: { second_type: () => ({ by: "c" }) } });
    await a.engine.registerWorkflow(HANDOFF);
    // b and c both hear of every ready `second`: each visit runs once, by one of them.
    const runs = await Promise.all(Array.from({ length: 20 }, () => a.engine.startRun(HANDOFF.id)));
    // The engine that ran `second` ends the run and hears of it (the clock stands still: no polling).
    const ended = await Promise.all(
      runs.map((run) => Promise.race([b.engine.waitForRun(run.run_id), c.engine.waitForRun(run.run_id)])),
    );
    const second = ended.map((r) => r.nodes.find((n) => n.node_id === "second"));
    expect(second.map((n) => [n?.state, n?.attempt])).toEqual(runs.map(() => ["SUCCEEDED", 1]));
    expect(second.filter((n) => (n?.output as { by?: string } | null)?.by === "b")).toHaveLength(started);
  });

  it("read a run again when another engine changed it while this one held it in memory: nothing it wrote is lost", async () => {
    // Engine a keeps the run in memory between its transactions and trusts it in the next one,
    // sent in one round trip with a check of its revision. Engine b cancels the run while a's
    // attempt runs: a's result then finds the run changed, writes nothing, reads it and is fenced
    // off. Trusting blindly, a would have written its old copy back over the cancel.
    const { logger, lines, logged } = capturedLogger("debug");
    const readAgain = logged("reading it again");
    const flow = {
      id: "trust",
      nodes: [
        { node_id: "start", agent_type: "first_type" },
        { node_id: "work", agent_type: "work_type", depends_on: ["start"] },
        { node_id: "after", agent_type: "first_type", depends_on: ["work"] },
      ],
    };
    let b: Awaited<ReturnType<typeof testEngine>> | null = null;
    const ran: string[] = [];
    let afterRan = () => {};
    const lostUpdate = new Promise<void>((resolve) => {
      afterRan = resolve;
    });
    const a = await testEngine({
      logger,
      sweepIntervalMs: 3_600_000,
      agents: {
        first_type: (task) => {
          ran.push(task.node_id);
          if (task.node_id === "after") afterRan();
          return {};
        },
        work_type: async (task) => {
          ran.push(task.node_id);
          await b?.engine.cancelRun(task.run_id, { reason: "changed elsewhere" });
          return { stale: true };
        },
      },
    });
    b = await testEngine({ database: a.database, sweepIntervalMs: 3_600_000 });
    await a.engine.registerWorkflow(flow);
    const run = await a.engine.startRun(flow.id);
    const ended = await b.engine.waitForRun(run.run_id);
    expect(ended.status).toBe("CANCELLED");
    // a's result found the run changed; once a is closed (its transactions done), the result was
    // fenced off: the visit stays cancelled without output, `after` never ran.
    await Promise.race([readAgain, lostUpdate]);
    await a.engine.close();
    const nodes = (await b.engine.getRun(run.run_id)).nodes;
    expect(nodes.find((n) => n.node_id === "work")?.state).toBe("CANCELLED");
    expect(nodes.find((n) => n.node_id === "work")?.output).toBeNull();
    expect(ran).toEqual(["start", "work"]);
    expect(lines.filter((l) => l.msg.includes("reading it again"))).toHaveLength(1);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
  });
});

/** Polls `check` every 20 ms, at most 10 s. */
async function until(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("the engine's transaction never waited for the lock");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
