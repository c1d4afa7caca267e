import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { NodeInput, WorkflowInput } from "../../src/index.js";
import {
  ConflictError,
  createClient,
  createEngine,
  DatabaseError,
  NotFoundError,
  type Task,
  ValidationError,
} from "../../src/index.js";
import { onPostgres, tempDb, tempDir, testEngine } from "../helpers.js";

const echo: WorkflowInput = {
  id: "echo",
  input_schema: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
  nodes: [
    { node_id: "a", agent_type: "echo", payload: { topic: "{{ input.topic }}", note: "about {{ input.topic }}" } },
  ],
};

describe("runs", () => {
  it("resolves payload templates once per visit and passes input, trace and execution ids", async () => {
    const tasks: Task[] = [];
    const { engine } = await testEngine({
      agents: {
        echo: (t: Task) => {
          tasks.push(t);
          if (t.attempt === 1) throw new Error("transient");
          return t.payload;
        },
      },
    });
    await engine.registerWorkflow({ ...echo, nodes: [{ ...(echo.nodes[0] as NodeInput), retry_interval: 0 }] });
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const run = await engine.startRun("echo", { input: { topic: "cats" }, traceparent });
    const done = await engine.waitForRun(run.run_id);
    expect(done.output).toEqual({ a: { topic: "cats", note: "about cats" } });
    expect(done.trace_id).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
    expect(tasks.map((t) => t.attempt)).toEqual([1, 2]);
    expect(tasks[0]?.execution_id).toBe(tasks[1]?.execution_id);
    expect(tasks[0]?.payload).toEqual(tasks[1]?.payload);
    expect(tasks[0]?.traceparent).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    expect(tasks[0]?.input).toEqual({ topic: "cats" });
    const events = await engine.listEvents(run.run_id);
    expect(events.every((e) => e.trace_id === "4bf92f3577b34da6a3ce929d0e0e4736")).toBe(true);
  });

  it("returns the same run for the same idempotency key, and refuses the key with another input", async () => {
    const { engine } = await testEngine({ agents: { echo: (t: Task) => t.payload } });
    await engine.registerWorkflow(echo);
    const [first, second] = await Promise.all([
      engine.startRun("echo", { input: { topic: "x" }, idempotency_key: "k1" }),
      engine.startRun("echo", { input: { topic: "x" }, idempotency_key: "k1" }),
    ]);
    expect(second.run_id).toBe(first.run_id);
    const third = await engine.startRun("echo", { input: { topic: "x" }, idempotency_key: "k1" });
    expect(third.run_id).toBe(first.run_id);
    await expect(engine.startRun("echo", { input: { topic: "y" }, idempotency_key: "k1" })).rejects.toBeInstanceOf(
      ConflictError,
    );
    expect(await engine.listRuns()).toHaveLength(1);
  });

  it("checks the input against input_schema, listing every problem, and stores nothing", async () => {
    const { engine } = await testEngine({ agents: { echo: () => null } });
    await engine.registerWorkflow(echo);
    const error = await engine.startRun("echo", { input: { topic: 3 } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).problems).toEqual([{ path: "input.topic", message: "must be string" }]);
    await expect(engine.startRun("echo", { input: { fn: () => 1 } as never })).rejects.toThrow(/not a JSON value/);
    expect(await engine.listRuns()).toHaveLength(0);
  });

  it("refuses an oversized input with the size and the limit", async () => {
    const { engine } = await testEngine({ agents: { echo: () => null }, maxPayloadBytes: 100 });
    await engine.registerWorkflow({ id: "big", nodes: [{ node_id: "a", agent_type: "echo" }] });
    await expect(engine.startRun("big", { input: { text: "x".repeat(200) } })).rejects.toThrow(/over the limit of 100/);
  });

  it("refuses an invalid definition with every problem and stores nothing", async () => {
    const { engine } = await testEngine();
    const bad = {
      id: "bad",
      nodes: [
        { node_id: "a", agent_type: "x", depends_on: ["nope"] },
        { node_id: "a", agent_type: "x", retry_count: -1 },
      ],
    };
    const error = await engine.registerWorkflow(bad).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).problems.length).toBeGreaterThanOrEqual(1);
    expect((error as ValidationError).message).toContain("nodes[1].retry_count");
    expect(await engine.listWorkflows()).toEqual([]);
    await expect(engine.startRun("bad")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("versions workflows by content and pins a run to the version it started with", async () => {
    const seen: string[] = [];
    const { engine } = await testEngine({
      agents: { echo: (t: Task) => seen.push(String((t.payload as { v: string }).v)) },
    });
    const v1 = { id: "ver", nodes: [{ node_id: "a", agent_type: "echo", payload: { v: "one" } }] };
    const v2 = { id: "ver", nodes: [{ node_id: "a", agent_type: "echo", payload: { v: "two" } }] };
    expect(await engine.registerWorkflow(v1)).toMatchObject({ version: 1, created: true });
    expect(await engine.registerWorkflow(structuredClone(v1))).toMatchObject({ version: 1, created: false });
    expect(await engine.registerWorkflow(v2)).toMatchObject({ version: 2, created: true });
    const old = await engine.startRun("ver", { version: 1 });
    const latest = await engine.startRun("ver");
    expect((await engine.waitForRun(old.run_id)).workflow_version).toBe(1);
    expect((await engine.waitForRun(latest.run_id)).workflow_version).toBe(2);
    expect(seen.sort()).toEqual(["one", "two"]);
    expect(await engine.listWorkflows()).toEqual([expect.objectContaining({ id: "ver", version: 2 })]);
  });

  it("keeps a definition in its author's key order; the same content in another order is the same version", async () => {
    const { engine, database } = await testEngine({ agents: { echo: (t: Task) => t.payload } });
    // Keys as an author writes them: not alphabetical, in the workflow and in a node.
    const written = {
      nodes: [{ node_id: "b", agent_type: "echo", payload: { zeta: 1, alpha: 2 } }],
      id: "ordered",
      description: "read top to bottom",
    };
    expect(await engine.registerWorkflow(written)).toMatchObject({ version: 1, created: true });
    const keysOf = (d: unknown) => JSON.stringify(d);
    const asWritten = keysOf({ ...written, version: 1 });
    expect(keysOf((await engine.getWorkflow("ordered")).definition)).toBe(asWritten);
    // Reordered, the content is the same: the first text stays, as a new client reading the store sees.
    const reordered = { id: "ordered", description: "read top to bottom", nodes: written.nodes };
    expect(await engine.registerWorkflow(reordered)).toMatchObject({ version: 1, created: false });
    const client = await createClient({ database });
    try {
      expect(keysOf((await client.getWorkflow("ordered")).definition)).toBe(asWritten);
    } finally {
      await client.close();
    }
    expect(keysOf((await engine.getWorkflow("ordered")).definition)).toBe(asWritten);
  });

  it("fails the attempt, not the engine, when a handler returns garbage or a template fails", async () => {
    const { engine } = await testEngine({
      agents: {
        garbage: () => ({ when: new Date(0), fn: () => 1 }),
        ok: () => "fine",
      },
    });
    await engine.registerWorkflow({ id: "garbage", nodes: [{ node_id: "a", agent_type: "garbage" }] });
    const run = await engine.waitForRun((await engine.startRun("garbage")).run_id);
    // An output that cannot be stored fails the visit invalid_output, as its error says.
    expect(run.nodes[0]).toMatchObject({ state: "FAILED", reason: "invalid_output" });
    expect(run.nodes[0]?.error?.message).toContain("output.when is a Date");

    await engine.registerWorkflow({
      id: "tpl",
      nodes: [{ node_id: "a", agent_type: "ok", payload: { x: "{{ $error('no topic') }}" } }],
    });
    const tpl = await engine.waitForRun((await engine.startRun("tpl")).run_id);
    expect(tpl.nodes[0]).toMatchObject({ state: "FAILED", reason: "template_error", attempt: 0 });

    await engine.registerWorkflow({ id: "fine", nodes: [{ node_id: "a", agent_type: "ok" }] });
    expect((await engine.waitForRun((await engine.startRun("fine")).run_id)).status).toBe("SUCCEEDED");
  });

  it("keeps excess ready nodes in the database under the per agent_type limit", async () => {
    let inFlight = 0;
    let peak = 0;
    const release: (() => void)[] = [];
    const { engine } = await testEngine({
      agentConcurrency: { chat: 2 },
      agents: {
        chat: () =>
          new Promise<string>((resolve) => {
            inFlight += 1;
            peak = Math.max(peak, inFlight);
            release.push(() => {
              inFlight -= 1;
              resolve("ok");
            });
          }),
      },
    });
    await engine.registerWorkflow({
      id: "limit",
      nodes: ["a", "b", "c", "d", "e"].map((id) => ({ node_id: id, agent_type: "chat" })),
    });
    const run = await engine.startRun("limit");
    const done = engine.waitForRun(run.run_id);
    let released = 0;
    while (released < 5) {
      await new Promise((r) => setImmediate(r));
      const next = release.shift();
      if (next) {
        expect(inFlight).toBeLessThanOrEqual(2);
        // The engine may claim the next node while the read is on its way: the count matches
        // the attempts in flight before or after it.
        const before = inFlight;
        const ready = (await engine.getRun(run.run_id)).nodes.filter(
          (n) => n.state === "PENDING" && n.ready_at !== null,
        );
        expect([5 - released - before, 5 - released - inFlight]).toContain(ready.length);
        next();
        released += 1;
      }
    }
    expect((await done).status).toBe("SUCCEEDED");
    expect(peak).toBe(2);
  });

  it("gives NotFoundError for unknown runs and workflows", async () => {
    const { engine } = await testEngine();
    await expect(engine.getRun("nope")).rejects.toBeInstanceOf(NotFoundError);
    await expect(engine.waitForRun("nope")).rejects.toBeInstanceOf(NotFoundError);
    await expect(engine.startRun("nope")).rejects.toThrow(/not registered/);
  });
});

describe("database files", () => {
  it("refuses a file that is not a SQLite database", async () => {
    const path = join(tempDir(), "junk.db");
    writeFileSync(path, "this is not a database, just some text that happens to be long enough ".repeat(100));
    const error = await createEngine({ database: `sqlite:${path}` }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseError);
    expect((error as Error).message).toMatch(/not a SQLite database or is corrupt/);
  });

  it("refuses a SQLite database that belongs to something else, and leaves it untouched", async () => {
    const path = join(tempDir(), "other.db");
    const Database = (await import("better-sqlite3")).default;
    const db = new Database(path);
    db.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY); INSERT INTO customers VALUES (1)");
    db.close();
    const error = await createEngine({ database: `sqlite:${path}` }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseError);
    expect((error as Error).message).toMatch(/not a Skein one/);
    const again = new Database(path, { readonly: true });
    const tables = again.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all();
    again.close();
    expect(tables).toEqual([{ name: "customers" }]);
  });

  it("keeps runs across engine restarts", async () => {
    const database = tempDb();
    const first = await createEngine({ database, agents: { echo: () => "hi" } });
    await first.registerWorkflow({ id: "keep", nodes: [{ node_id: "a", agent_type: "echo" }] });
    const run = await first.startRun("keep");
    await first.waitForRun(run.run_id);
    await first.close();
    const second = await createEngine({ database });
    try {
      expect((await second.getRun(run.run_id)).output).toEqual({ a: "hi" });
    } finally {
      await second.close();
    }
  });
});

describe("a locked database", () => {
  it.skipIf(onPostgres)(
    "refuses writes with a clear error while another process holds the lock, and loses nothing",
    async () => {
      const { engine, database } = await testEngine({ agents: { echo: () => "hi" }, busyTimeoutMs: 50 });
      await engine.registerWorkflow({ id: "lock", nodes: [{ node_id: "a", agent_type: "echo" }] });
      const first = await engine.waitForRun((await engine.startRun("lock")).run_id);

      const Database = (await import("better-sqlite3")).default;
      const other = new Database(database.slice("sqlite:".length));
      other.exec("BEGIN IMMEDIATE");
      try {
        const error = await engine.startRun("lock").catch((e: unknown) => e);
        expect(error).toBeInstanceOf(DatabaseError);
        expect((error as Error).message).toMatch(/locked by another process/);
      } finally {
        other.exec("ROLLBACK");
        other.close();
      }
      const second = await engine.waitForRun((await engine.startRun("lock")).run_id);
      expect(second.status).toBe("SUCCEEDED");
      expect((await engine.getRun(first.run_id)).status).toBe("SUCCEEDED");
      expect(await engine.listRuns()).toHaveLength(2);
    },
  );
});
