/**
 * Failover on PostgreSQL (DESIGN §7–8): an engine holds an advisory lock on its listener
 * connection, which the server releases when the process dies. A SIGKILLed engine's in-flight
 * attempts are re-run by another engine at the sweep that finds its lock still free after a
 * short grace (FREE_LOCK_GRACE_MS), although the dead engine's heartbeat
 * is far from expired (engineTimeoutMs is left at its default, 30 s); a live engine, busy with
 * an attempt that never returns, is never taken for dead. Real processes on a fresh schema;
 * every wait is bounded and synchronised by what the processes print or commit.
 */
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createEngine, type Engine, type RunEvent } from "../../src/index.js";
import { Child, within } from "../fixtures/child.js";
import { PG_URL } from "../helpers.js";

const SCRIPT = fileURLToPath(new URL("../fixtures/pg-failover-child.ts", import.meta.url));
const RUNS = 4;

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A fresh schema (dropped after the test), its URL, and a client to read it with. */
async function freshSchema(): Promise<{ url: string; db: pg.Client; schema: string }> {
  const schema = `skein_fo_${randomBytes(4).toString("hex")}`;
  const db = new pg.Client({ connectionString: PG_URL });
  await db.connect();
  cleanup.push(async () => {
    await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await db.end();
  });
  return { url: `${PG_URL}?schema=${schema}`, db, schema };
}

/** An engine process whose agent of `agentType` never returns, with `runs` runs started; waits until all are in flight. */
async function engineProcess(
  url: string,
  agentType: string,
  runs: number,
): Promise<{ child: Child; engineId: string }> {
  const child = new Child(SCRIPT, [url, agentType, String(runs)]);
  cleanup.push(() => child.kill());
  const ready = await child.waitFor("ready", (m) => m.type === "ready");
  await within(25_000, `${runs} attempts in flight`, inFlight(child, runs));
  return { child, engineId: ready.engine_id as string };
}

function inFlight(child: Child, n: number): Promise<unknown> {
  return child.waitFor(`${n} agent calls`, () => child.messages.filter((m) => m.type === "agent").length >= n);
}

interface EngineRow {
  engine_id: string;
  heartbeat_at: number;
  stopped_at: number | null;
}

async function engineRow(db: pg.Client, schema: string, engineId: string): Promise<EngineRow> {
  const { rows } = await db.query<EngineRow>(
    `SELECT engine_id, heartbeat_at::float8 AS heartbeat_at, stopped_at::float8 AS stopped_at FROM "${schema}".engines WHERE engine_id = $1`,
    [engineId],
  );
  if (!rows[0]) throw new Error(`no engines row for ${engineId}`);
  return rows[0];
}

async function heldBy(db: pg.Client, schema: string, engineId: string): Promise<{ state: string; attempt: number }[]> {
  const { rows } = await db.query<{ state: string; attempt: number }>(
    `SELECT state, attempt FROM "${schema}".visits WHERE holder = $1 ORDER BY execution_id`,
    [engineId],
  );
  return rows;
}

async function openEngine(url: string, options: Parameters<typeof createEngine>[0]): Promise<Engine> {
  // Defaults throughout (engineTimeoutMs 30 s, sweepIntervalMs 1 s) unless a test says otherwise.
  const engine = await createEngine({ ...options, database: url });
  cleanup.push(() => engine.close({ timeoutMs: 100 }));
  return engine;
}

describe("PostgreSQL failover by the dead engine's lock", () => {
  it("re-runs a SIGKILLed engine's attempts on another engine long before its heartbeat expires", async () => {
    const { url, db, schema } = await freshSchema();
    const dead = await engineProcess(url, "work", RUNS);
    const before = new Map(
      dead.child.messages.filter((m) => m.type === "agent").map((m) => [m.execution_id as string, m.attempt as number]),
    );

    // The survivor serves the same agent type; it opens after the runs were claimed, so it
    // finds them only by recovering them.
    const reruns = new Map<string, number>();
    let all: () => void = () => {};
    const allRerun = new Promise<void>((resolve) => {
      all = resolve;
    });
    const survivor = await openEngine(url, {
      agents: {
        work: (task) => {
          reruns.set(task.execution_id, task.attempt);
          if (reruns.size === RUNS) all();
          return { rerun: true };
        },
      },
    });
    await dead.child.kill();
    await within(20_000, "the survivor re-running every interrupted attempt", allRerun);

    // The same executions, each at its next attempt, and nothing else.
    expect(new Map([...reruns].map(([id, attempt]) => [id, attempt - 1]))).toEqual(before);
    // The dead engine was taken (by the survivor's sweep, marking it stopped) while its last
    // heartbeat was still fresh: well inside engineTimeoutMs, by the database's clock.
    const row = await engineRow(db, schema, dead.engineId);
    expect(row.stopped_at).not.toBeNull();
    expect(row.stopped_at as number).toBeLessThan(row.heartbeat_at + 30_000);
    for (const run of await survivor.listRuns({ workflow_id: "one-work" })) {
      const done = await within(10_000, "the run's end", survivor.waitForRun(run.run_id));
      expect(done.status).toBe("SUCCEEDED");
      const events = await survivor.listEvents(run.run_id);
      const interrupted = events.filter((e: RunEvent) => e.type === "node.interrupted");
      expect(interrupted).toHaveLength(1);
      expect(interrupted[0]?.data).toMatchObject({ interruptions: 1 });
      expect((interrupted[0] as RunEvent).at).toBeLessThan(row.heartbeat_at + 30_000);
      expect(events.filter((e) => e.type === "node.started").map((e) => e.data.attempt)).toEqual([1, 2]);
    }
  });

  it("never takes a live engine for dead while it holds its lock, across many sweeps of another", async () => {
    const { url, db, schema } = await freshSchema();
    const live = await engineProcess(url, "hold", 1);
    expect(await heldBy(db, schema, live.engineId)).toEqual([{ state: "RUNNING", attempt: 1 }]);

    // Another engine sweeping often: each sleep node's wake-up is one more sweep (a flush that
    // looks for dead engines), and the periodic sweep runs every 20 ms besides.
    const other = await openEngine(url, { sweepIntervalMs: 20, agents: {} });
    const sleeps = 10;
    await other.registerWorkflow({
      id: "ticks",
      nodes: Array.from({ length: sleeps }, (_, i) => ({
        node_id: `t${i}`,
        agent_type: "sleep",
        payload: { seconds: 0.05 },
        ...(i > 0 ? { depends_on: [`t${i - 1}`] } : {}),
      })),
    });
    const run = await other.startRun("ticks");
    const done = await within(20_000, "the sleeps", other.waitForRun(run.run_id));
    expect(done.status).toBe("SUCCEEDED");

    // The live engine's attempt is still its own, at attempt 1, and its row not stopped.
    expect(await heldBy(db, schema, live.engineId)).toEqual([{ state: "RUNNING", attempt: 1 }]);
    expect((await engineRow(db, schema, live.engineId)).stopped_at).toBeNull();
    expect(live.child.messages.filter((m) => m.type === "agent")).toHaveLength(1);
  });
});
