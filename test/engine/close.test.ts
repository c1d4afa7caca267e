import { symlinkSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { describe, expect, it } from "vitest";
import {
  createEngine,
  DatabaseError,
  EngineClosedError,
  ManualClock,
  type RunEvent,
  type Task,
  UnavailableError,
} from "../../src/index.js";
import { nextEvent, onPostgres, stallResults, tempDb, tempDir } from "../helpers.js";

const isStarted = (e: RunEvent) => e.type === "node.started";

describe("close", () => {
  it("stops claiming, waits for attempts in flight, and records their results", async () => {
    const database = tempDb();
    let release!: () => void;
    const engine = await createEngine({
      database,
      agents: { work: () => new Promise((resolve) => (release = () => resolve("done"))) },
    });
    await engine.registerWorkflow({
      id: "two",
      nodes: [
        { node_id: "a", agent_type: "work" },
        { node_id: "b", agent_type: "work", depends_on: ["a"] },
      ],
    });
    const started = nextEvent(engine, isStarted);
    const run = await engine.startRun("two");
    await started;
    const closing = engine.close({ timeoutMs: 60_000 });
    release();
    await closing;
    await expect(engine.startRun("two")).rejects.toBeInstanceOf(EngineClosedError);

    const after = await createEngine({ database });
    try {
      const nodes = (await after.getRun(run.run_id)).nodes;
      // a's result was recorded; b became ready but was not claimed by the closing engine.
      expect(nodes.map((n) => [n.node_id, n.state, n.attempt])).toEqual([
        ["a", "SUCCEEDED", 1],
        ["b", "PENDING", 0],
      ]);
    } finally {
      await after.close();
    }
  });

  it("leaves an attempt that outlives the limit to the next engine, which re-runs it with the same execution_id", async () => {
    const database = tempDb();
    const first = await createEngine({ database, agents: { work: () => new Promise(() => undefined) } });
    await first.registerWorkflow({ id: "one", nodes: [{ node_id: "a", agent_type: "work" }] });
    const started = nextEvent(first, isStarted);
    const run = await first.startRun("one");
    await started;
    await first.close({ timeoutMs: 10 });

    const seen: Task[] = [];
    const second = await createEngine({
      database,
      agents: {
        work: (t: Task) => {
          seen.push(t);
          return "ok";
        },
      },
    });
    try {
      const done = await second.waitForRun(run.run_id);
      expect(done.status).toBe("SUCCEEDED");
      expect(seen.map((t) => [t.execution_id, t.attempt])).toEqual([[`${run.run_id}:a:1`, 2]]);
      expect(done.nodes[0]).toMatchObject({ failures: 0, interruptions: 1 });
    } finally {
      await second.close();
    }
  });

  it("says which engine it took over, how many attempts, and how long after its last heartbeat", async () => {
    const database = tempDb();
    const t0 = Date.parse("2030-01-01T00:00:00Z");
    const first = await createEngine({
      database,
      engineId: "gone-1",
      clock: new ManualClock(t0),
      agents: { work: () => new Promise(() => undefined) },
    });
    await first.registerWorkflow({
      id: "two-nodes",
      nodes: [
        { node_id: "a", agent_type: "work" },
        { node_id: "b", agent_type: "work" },
      ],
    });
    const started = [
      nextEvent(first, (e) => isStarted(e) && e.node_id === "a"),
      nextEvent(first, (e) => isStarted(e) && e.node_id === "b"),
    ];
    await first.startRun("two-nodes");
    await Promise.all(started);
    await first.close({ timeoutMs: 10 });

    const lines: { msg: string; engine_id?: string; attempts?: number; silent_ms?: number | null }[] = [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const clock = new ManualClock(t0 + 40_000);
    const second = await createEngine({ database, clock, logger, agents: { work: () => "ok" } });
    try {
      const retried = nextEvent(second, isStarted);
      await retried;
      const taken = lines.filter((l) => l.msg.includes("took over"));
      // PostgreSQL: an engine that closes with attempts running makes its heartbeat stale at once.
      const since = onPostgres ? "it stopped while they still ran" : "its last heartbeat was 40 s ago";
      expect(taken).toEqual([
        expect.objectContaining({
          msg: `skein: took over dead engine gone-1: 2 attempts back to RETRYING (${since})`,
          engine_id: "gone-1",
          attempts: 2,
          silent_ms: onPostgres ? null : 40_000,
        }),
      ]);
    } finally {
      await second.close();
    }
  });

  it.skipIf(onPostgres)("refuses a second engine on the same file in the same process", async () => {
    const database = tempDb();
    const first = await createEngine({ database });
    try {
      await expect(createEngine({ database })).rejects.toThrow(DatabaseError);
      await expect(createEngine({ database })).rejects.toThrow(/in use by engine/);
    } finally {
      await first.close();
    }
    const again = await createEngine({ database });
    await again.close();
  });

  it.skipIf(onPostgres)("refuses a second engine that names the file through a symlink", async () => {
    // The lock beside the file named by the link would be another file: the second engine
    // would take the database over and the first, still running, would be cut off.
    const dir = tempDir();
    const first = await createEngine({ database: `sqlite:${join(dir, "skein.db")}` });
    symlinkSync(join(dir, "skein.db"), join(dir, "link.db"));
    try {
      await expect(createEngine({ database: `sqlite:${join(dir, "link.db")}` })).rejects.toThrow(/in use by engine/);
      await first.registerWorkflow({ id: "still-mine", nodes: [{ node_id: "a", agent_type: "x" }] });
    } finally {
      await first.close();
    }
  });
});

describe("close while every transaction fails for a passing reason", () => {
  // A real transient failure on PostgreSQL: a trigger that aborts with serialization_failure
  // (40001) whenever a result says "stall", so the dispatcher retries that result for ever.
  it.skipIf(!onPostgres)("ends within its timeout; the next engine re-runs the attempt", async () => {
    const database = tempDb();
    const first = await createEngine({ database, agents: { work: () => ({ text: "stall" }) } });
    await first.registerWorkflow({ id: "one", nodes: [{ node_id: "a", agent_type: "work" }] });
    const unstall = await stallResults(database);
    const run = await first.startRun("one");
    await new Promise<void>((resolve) => {
      const check = () => (first.unavailable ? resolve() : setImmediate(check));
      check();
    });
    await expect(first.startRun("one")).rejects.toBeInstanceOf(UnavailableError);
    // Bounded by the test's own timeout: before, close drained for ever.
    await first.close({ timeoutMs: 100 });
    await unstall();

    const next = await createEngine({ database, agents: { work: () => ({ text: "fine" }) } });
    try {
      const done = await next.waitForRun(run.run_id);
      expect(done.status).toBe("SUCCEEDED");
      expect(done.nodes[0]).toMatchObject({ attempt: 2, output: { text: "fine" } });
    } finally {
      await next.close();
    }
  });
});
