import { describe, expect, it } from "vitest";
import { createEngine, DatabaseError, EngineClosedError, type RunEvent, type Task } from "../../src/index.js";
import { nextEvent, onPostgres, tempDb } from "../helpers.js";

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
});
