import type Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import {
  ConflictError,
  createEngine,
  DatabaseError,
  EngineClosedError,
  NonRetryableError,
  NotFoundError,
  type RunEvent,
  ValidationError,
} from "../../src/index.js";
import { onPostgres, tempDb, testEngine } from "../helpers.js";

describe("library API", () => {
  it("lists runs newest first, filtered by status and workflow, page by page", async () => {
    const { engine, clock } = await testEngine({
      agents: {
        ok: () => "ok",
        bad: () => {
          throw new NonRetryableError("no");
        },
      },
    });
    await engine.registerWorkflow({ id: "good", nodes: [{ node_id: "a", agent_type: "ok" }] });
    await engine.registerWorkflow({ id: "bad", nodes: [{ node_id: "a", agent_type: "bad" }] });
    const ids: string[] = [];
    for (const wf of ["good", "bad", "good", "good"]) {
      const run = await engine.startRun(wf);
      await engine.waitForRun(run.run_id);
      ids.push(run.run_id);
      await clock.advance(1_000); // distinct creation times
    }
    expect((await engine.listRuns()).map((r) => r.run_id)).toEqual([...ids].reverse());
    expect((await engine.listRuns({ status: "FAILED" })).map((r) => r.run_id)).toEqual([ids[1]]);
    expect((await engine.listRuns({ workflow_id: "good" })).map((r) => r.run_id)).toEqual([ids[3], ids[2], ids[0]]);
    const page1 = await engine.listRuns({ limit: 2 });
    const page2 = await engine.listRuns({ limit: 2, before: page1[1]?.run_id });
    expect([...page1, ...page2].map((r) => r.run_id)).toEqual([...ids].reverse());
  });

  it("delivers committed events live, in order, filtered by run", async () => {
    const { engine } = await testEngine({ agents: { ok: () => "ok" } });
    await engine.registerWorkflow({
      id: "chain",
      nodes: [
        { node_id: "a", agent_type: "ok" },
        { node_id: "b", agent_type: "ok", depends_on: ["a"] },
      ],
    });
    const all: RunEvent[] = [];
    engine.subscribe((e) => e.type !== "node.progress" && all.push(e));
    const first = await engine.startRun("chain");
    const mine: RunEvent[] = [];
    const second = await engine.startRun("chain");
    engine.subscribe((e) => e.type !== "node.progress" && mine.push(e), { run_id: second.run_id });
    await engine.waitForRun(first.run_id);
    await engine.waitForRun(second.run_id);
    expect(all.map((e) => e.seq)).toEqual([...all.map((e) => e.seq)].sort((x, y) => x - y));
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((e) => e.run_id === second.run_id)).toBe(true);
    expect(mine.at(-1)?.type).toBe("run.succeeded");
    // What was delivered live is what the log holds.
    const stored = await engine.listEvents(first.run_id);
    expect(all.filter((e) => e.run_id === first.run_id)).toEqual(stored);
    expect(stored.map((e) => [e.type, e.node_id])).toEqual([
      ["run.started", null],
      ["node.ready", "a"],
      ["node.started", "a"],
      ["node.succeeded", "a"],
      ["node.ready", "b"],
      ["node.started", "b"],
      ["node.succeeded", "b"],
      ["run.succeeded", null],
    ]);
  });

  it("gives every error a stable code and a message that says what to do", async () => {
    const { engine } = await testEngine();
    const errors = [
      new ValidationError("x", [{ path: "nodes[0]", message: "bad" }]),
      new NotFoundError("x"),
      new ConflictError("x"),
      new DatabaseError("x"),
      new EngineClosedError("x"),
      new NonRetryableError("x"),
    ];
    expect(errors.map((e) => [e.name, e.code])).toEqual([
      ["ValidationError", "validation"],
      ["NotFoundError", "not_found"],
      ["ConflictError", "conflict"],
      ["DatabaseError", "database"],
      ["EngineClosedError", "engine_closed"],
      ["NonRetryableError", "non_retryable"],
    ]);
    expect(errors[0]?.message).toBe("x:\n  nodes[0]: bad");
    const notFound = await engine.startRun("missing").catch((e: unknown) => e);
    expect((notFound as NotFoundError).message).toMatch(/register it first/);
    await expect(createEngine({ database: "mysql://x" })).rejects.toThrow(
      /use sqlite:<path>, sqlite::memory: or postgres:\/\//,
    );
  });

  it.skipIf(onPostgres)("sets SQLite durability from the synchronous option", async () => {
    for (const [option, expected] of [
      ["normal", 1],
      ["full", 2],
    ] as const) {
      const database = tempDb();
      const engine = await createEngine({ database, synchronous: option });
      try {
        // The setting is per connection: read it from the engine's own write connection.
        const store = (engine as unknown as { store: { writer: Database.Database } }).store;
        expect(store.writer.pragma("synchronous", { simple: true })).toBe(expected);
        expect(store.writer.pragma("journal_mode", { simple: true })).toBe("wal");
      } finally {
        await engine.close();
      }
    }
  });
});
