import pg from "pg";
import { describe, expect, it } from "vitest";
import type { NodeInput, WorkflowInput } from "../../../src/index.js";
import { NonRetryableError, type Task } from "../../../src/index.js";
import { nextEvent, onPostgres, PG_URL, testEngine } from "../../helpers.js";

const child: WorkflowInput = {
  id: "child",
  nodes: [{ node_id: "work", agent_type: "doubler", payload: { n: "{{ input.n }}" } }],
};
const parent = (payload: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({
  id: "parent",
  nodes: [
    {
      node_id: "sub",
      agent_type: "workflow",
      payload: { workflow_id: "child", input: { n: "{{ input.n }}" }, ...payload },
      next_on_success: "after",
      ...extra,
    },
    { node_id: "after", agent_type: "echo", payload: { got: "{{ nodes.sub.output }}" } },
  ],
});
const agents = {
  doubler: (t: { payload: unknown }) => ({ doubled: ((t.payload as { n: number }).n ?? 0) * 2 }),
  echo: (t: { payload: unknown }) => t.payload as Record<string, unknown>,
};

describe("workflow nodes (child runs)", () => {
  it("runs the child once and succeeds with its output; parent and child name each other", async () => {
    const { engine } = await testEngine({ agents });
    await engine.registerWorkflow(child);
    await engine.registerWorkflow(parent());
    const run = await engine.startRun("parent", { input: { n: 21 } });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[0]).toMatchObject({ node_id: "sub", state: "SUCCEEDED", output: { work: { doubled: 42 } } });
    expect(done.children).toHaveLength(1);
    const ref = done.children[0];
    expect(ref).toMatchObject({ node_id: "sub", visit: 1, attempt: 1, status: "SUCCEEDED" });
    const kid = await engine.getRun(ref?.run_id ?? "");
    expect(kid.parent).toMatchObject({ run_id: run.run_id, node_id: "sub", visit: 1, attempt: 1 });
    expect(kid.trace_id).toBe(run.trace_id);
  });

  it("a failed child fails the attempt (child_failed); the retry starts a new child run", async () => {
    let calls = 0;
    const flaky = () => {
      calls += 1;
      if (calls === 1) throw new Error("model overloaded");
      return { ok: calls };
    };
    const { engine } = await testEngine({ agents: { ...agents, doubler: flaky } });
    await engine.registerWorkflow({ ...child, nodes: [{ ...(child.nodes[0] as NodeInput), retry_count: 0 }] });
    await engine.registerWorkflow(parent({}, { retry_count: 1, retry_interval: 0 }));
    const run = await engine.startRun("parent", { input: { n: 1 } });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[0]).toMatchObject({ state: "SUCCEEDED", attempt: 2, output: { work: { ok: 2 } } });
    expect(done.children.map((c) => [c.attempt, c.status])).toEqual([
      [1, "FAILED"],
      [2, "SUCCEEDED"],
    ]);
    const retrying = (await engine.listEvents(run.run_id)).find((e) => e.type === "node.retrying");
    expect(retrying?.data.error).toMatchObject({ reason: "child_failed" });
    expect(JSON.stringify(retrying?.data.error)).toContain("model overloaded");
  });

  it("a child that keeps failing fails the node for good, with the child's error", async () => {
    const { engine } = await testEngine({
      agents: {
        ...agents,
        doubler: () => {
          throw new Error("no such page");
        },
      },
    });
    await engine.registerWorkflow({ ...child, nodes: [{ ...(child.nodes[0] as NodeInput), retry_count: 0 }] });
    await engine.registerWorkflow(parent({}, { retry_count: 0 }));
    const run = await engine.startRun("parent", { input: { n: 1 } });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(done.nodes[0]).toMatchObject({ state: "FAILED", error: { reason: "child_failed" } });
    expect(done.nodes[0]?.error?.message).toContain("no such page");
  });

  it("the node's timeout caps the child's whole run: the child is cancelled, the attempt times out", async () => {
    const hang = (t: { signal: AbortSignal }) =>
      new Promise((_, reject) => t.signal.addEventListener("abort", () => reject(new Error("aborted"))));
    const { engine, clock } = await testEngine({ agents: { ...agents, doubler: hang } });
    await engine.registerWorkflow(child);
    await engine.registerWorkflow(parent({}, { retry_count: 0, timeout: 60 }));
    const working = nextEvent(engine, (e) => e.type === "node.started" && e.node_id === "work");
    const run = await engine.startRun("parent", { input: { n: 1 } });
    await working;
    await clock.advance(60_000);
    const finished = await engine.waitForRun(run.run_id);
    expect(finished.status).toBe("FAILED");
    expect(finished.nodes[0]).toMatchObject({ state: "FAILED", error: { reason: "timeout" } });
    const kid = await engine.waitForRun(finished.children[0]?.run_id ?? "");
    expect(kid.status).toBe("CANCELLED");
  });

  it("registering warns of a workflow not registered yet, and refuses a payload without workflow_id", async () => {
    const { engine } = await testEngine({ agents });
    const registered = await engine.registerWorkflow(parent());
    expect(registered.warnings).toContainEqual({
      path: "nodes[0].payload.workflow_id",
      message: expect.stringContaining('workflow "child" is not registered yet'),
    });
    await expect(
      engine.registerWorkflow({ id: "bad", nodes: [{ node_id: "sub", agent_type: "workflow", payload: {} }] }),
    ).rejects.toThrow(/nodes\[0\]\.payload: needs workflow_id/);
  });

  it("an unknown workflow at run time fails the visit with a clear reason", async () => {
    const { engine } = await testEngine({ agents });
    const registered = await engine.registerWorkflow(parent({ workflow_id: "{{ input.which }}" }));
    expect(registered).toBeDefined();
    const run = await engine.startRun("parent", { input: { n: 1, which: "nope" } });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(done.nodes[0]).toMatchObject({ state: "FAILED", reason: "unknown_workflow" });
    expect(done.nodes[0]?.error?.message).toContain('workflow "nope" is not registered');
    expect(done.children).toEqual([]);
  });
});

describe("cancelling a parent", () => {
  const saga = {
    id: "child",
    nodes: [
      { node_id: "book", agent_type: "book", compensation: { agent_type: "undo" } },
      { node_id: "hold", agent_type: "hang", depends_on: ["book"] },
    ],
  };
  const setup = async () => {
    const undone: string[] = [];
    let held: () => void = () => {};
    const holdStarted = new Promise<void>((resolve) => {
      held = resolve;
    });
    const hang = (t: { signal: AbortSignal }) =>
      new Promise((_, reject) => t.signal.addEventListener("abort", () => reject(new Error("aborted"))));
    const t = await testEngine({
      agents: {
        ...agents,
        book: () => ({ booked: true }),
        hang: (t: { signal: AbortSignal }) => {
          held();
          return hang(t);
        },
        late: async (t: Task) => {
          await holdStarted;
          return t.route("$end", { fin: true });
        },
        undo: (task: { compensates?: { execution_id: string } }) => {
          undone.push(task.compensates?.execution_id ?? "?");
          return {};
        },
      },
    });
    await t.engine.registerWorkflow(saga);
    await t.engine.registerWorkflow(parent());
    const holding = nextEvent(t.engine, (e) => e.type === "node.started" && e.node_id === "hold");
    const run = await t.engine.startRun("parent", { input: { n: 1 } });
    await holding;
    return { ...t, run, undone };
  };

  it("cancels its active child run", async () => {
    const { engine, run, undone } = await setup();
    await engine.cancelRun(run.run_id);
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("CANCELLED");
    const kid = await engine.waitForRun(done.children[0]?.run_id ?? "");
    expect(kid.status).toBe("CANCELLED");
    expect(undone).toEqual([]);
  });

  it("with compensation: the child undoes what it did", async () => {
    const { engine, run, undone } = await setup();
    await engine.cancelRun(run.run_id, { compensate: true });
    const done = await engine.waitForRun(run.run_id);
    const kid = await engine.waitForRun(done.children[0]?.run_id ?? "");
    expect(kid.status).toBe("CANCELLED");
    expect(kid.compensations).toMatchObject([{ node_id: "book", state: "SUCCEEDED" }]);
    expect(undone).toEqual([`${kid.run_id}:book:1`]);
    expect(done.status).toBe("CANCELLED");
  });

  it("$end in the parent cancels its active child, without compensation", async () => {
    const { engine, undone } = await setup();
    await engine.registerWorkflow({
      id: "quick-exit",
      nodes: [
        { node_id: "sub", agent_type: "workflow", payload: { workflow_id: "child" } },
        { node_id: "fin", agent_type: "late", next_on_success: "after" },
        { node_id: "after", agent_type: "echo" },
      ],
    });
    const run = await engine.startRun("quick-exit");
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[0]).toMatchObject({ node_id: "sub", state: "CANCELLED" });
    const kid = await engine.waitForRun(done.children[0]?.run_id ?? "");
    expect(kid.status).toBe("CANCELLED");
    expect(undone).toEqual([]);
  });

  it("a failure elsewhere in the parent cancels the child, which compensates as the parent's failure does", async () => {
    const undone: string[] = [];
    let started: () => void = () => {};
    const holdStarted = new Promise<void>((resolve) => {
      started = resolve;
    });
    const { engine } = await testEngine({
      agents: {
        book: () => ({ booked: true }),
        hang: (t: { signal: AbortSignal }) => {
          started();
          return new Promise((_, reject) => t.signal.addEventListener("abort", () => reject(new Error("aborted"))));
        },
        boom: async () => {
          await holdStarted;
          throw new NonRetryableError("card declined");
        },
        undo: (task: { compensates?: { execution_id: string } }) => {
          undone.push(task.compensates?.execution_id ?? "?");
          return {};
        },
      },
    });
    await engine.registerWorkflow(saga);
    await engine.registerWorkflow({
      id: "parent",
      nodes: [
        { node_id: "sub", agent_type: "workflow", payload: { workflow_id: "child" } },
        { node_id: "pay", agent_type: "boom", retry_count: 0 },
      ],
    });
    const run = await engine.startRun("parent");
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(done.nodes[0]).toMatchObject({ node_id: "sub", state: "CANCELLED" });
    const kid = await engine.waitForRun(done.children[0]?.run_id ?? "");
    expect(kid.status).toBe("CANCELLED");
    expect(undone).toEqual([`${kid.run_id}:book:1`]);
  });
});

describe("redrive and nesting", () => {
  it("redriving the parent starts new children only for the visits that did not succeed", async () => {
    let failing = true;
    const { engine } = await testEngine({
      agents: {
        ...agents,
        doubler: (t: { payload: unknown }) => {
          const n = (t.payload as { n: number }).n;
          if (n === 2 && failing) throw new Error("not yet");
          return { n };
        },
      },
    });
    await engine.registerWorkflow({ ...child, nodes: [{ ...(child.nodes[0] as NodeInput), retry_count: 0 }] });
    await engine.registerWorkflow({
      id: "parent",
      nodes: [
        { node_id: "one", agent_type: "workflow", retry_count: 0, payload: { workflow_id: "child", input: { n: 1 } } },
        {
          node_id: "two",
          agent_type: "workflow",
          retry_count: 0,
          depends_on: ["one"],
          payload: { workflow_id: "child", input: { n: 2 } },
        },
      ],
    });
    const run = await engine.startRun("parent");
    expect((await engine.waitForRun(run.run_id)).status).toBe("FAILED");
    failing = false;
    await engine.retryRun(run.run_id);
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.output).toEqual({ two: { work: { n: 2 } } });
    const byNode = (id: string) => done.children.filter((c) => c.node_id === id).map((c) => c.status);
    expect(byNode("one")).toEqual(["SUCCEEDED"]);
    expect(byNode("two")).toEqual(["FAILED", "SUCCEEDED"]);
    // A failed child is redriven through its parent, never by itself.
    const failed = done.children.find((c) => c.status === "FAILED")?.run_id ?? "";
    await expect(engine.retryRun(failed)).rejects.toThrow(/is a child run of run .*; retry the parent run/);
  });

  it("nested children work: a child may have children of its own", async () => {
    const { engine } = await testEngine({ agents });
    await engine.registerWorkflow(child);
    await engine.registerWorkflow({
      id: "middle",
      nodes: [{ node_id: "inner", agent_type: "workflow", payload: { workflow_id: "child", input: "{{ input }}" } }],
    });
    await engine.registerWorkflow(parent({ workflow_id: "middle" }));
    const run = await engine.startRun("parent", { input: { n: 5 } });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[1]?.output).toEqual({ got: { inner: { work: { doubled: 10 } } } });
    const middle = await engine.getRun(done.children[0]?.run_id ?? "");
    expect(middle.parent).toMatchObject({ run_id: run.run_id, depth: 1 });
    const inner = await engine.getRun(middle.children[0]?.run_id ?? "");
    expect(inner.parent).toMatchObject({ run_id: middle.run_id, node_id: "inner", depth: 2 });
  });

  it("a workflow that calls itself stops at the depth limit (child_depth_exceeded)", async () => {
    const { engine } = await testEngine({ agents });
    await engine.registerWorkflow({
      id: "forever",
      nodes: [{ node_id: "again", agent_type: "workflow", payload: { workflow_id: "forever" } }],
    });
    const run = await engine.startRun("forever");
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(done.nodes[0]?.error?.message).toContain("past depth 10");
    let deepest = done;
    for (let depth = 1; depth <= 10; depth++) deepest = await engine.getRun(deepest.children[0]?.run_id ?? "");
    expect(deepest.parent?.depth).toBe(10);
    expect(deepest.nodes[0]).toMatchObject({ state: "FAILED", reason: "child_depth_exceeded" });
    expect(deepest.children).toEqual([]);
  });
});

/** Tests of what only PostgreSQL has: another process may hold a run's row while the engine works. */
const describePostgres: typeof describe = onPostgres ? describe : (describe.skip as typeof describe);

describePostgres("a parent or child held by another transaction", () => {
  const SWEEP = 60_000;
  /** Holds the row of run `runId` in an open transaction until `release`. */
  async function holdRow(database: string, runId: string): Promise<{ release(): Promise<void> }> {
    const schema = new URL(database).searchParams.get("schema") ?? "";
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    await client.query("BEGIN");
    await client.query(`SELECT 1 FROM ${pg.escapeIdentifier(schema)}.runs WHERE run_id = $1 FOR UPDATE`, [runId]);
    return {
      release: async () => {
        await client.query("ROLLBACK");
        await client.end();
      },
    };
  }
  const gated = () => {
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const work = async () => {
      await gate;
      return { done: true };
    };
    return { open: () => open(), work };
  };

  it("a child's end that its busy parent missed is given to it by the sweep", async () => {
    const g = gated();
    const { engine, clock, database } = await testEngine({
      agents: { doubler: g.work, echo: agents.echo },
      sweepIntervalMs: SWEEP,
    });
    await engine.registerWorkflow(child);
    await engine.registerWorkflow(parent());
    const working = nextEvent(engine, (e) => e.type === "node.started" && e.node_id === "work");
    const run = await engine.startRun("parent", { input: { n: 1 } });
    const kidId = (await working).run_id;
    const lock = await holdRow(database, run.run_id);
    const kidDone = nextEvent(engine, (e) => e.type === "run.succeeded" && e.run_id === kidId);
    g.open();
    await kidDone;
    expect((await engine.getRun(run.run_id)).nodes[0]).toMatchObject({ state: "RUNNING" });
    await lock.release();
    await clock.advance(SWEEP);
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[0]).toMatchObject({ state: "SUCCEEDED", output: { work: { done: true } } });
  });

  it("a child its parent could not cancel (the child was busy) is cancelled by the sweep", async () => {
    const hang = (t: { signal: AbortSignal }) =>
      new Promise((_, reject) => t.signal.addEventListener("abort", () => reject(new Error("aborted"))));
    const { engine, clock, database } = await testEngine({
      agents: { doubler: hang, echo: agents.echo },
      sweepIntervalMs: SWEEP,
    });
    await engine.registerWorkflow(child);
    await engine.registerWorkflow(parent());
    const working = nextEvent(engine, (e) => e.type === "node.started" && e.node_id === "work");
    const run = await engine.startRun("parent", { input: { n: 1 } });
    const kidId = (await working).run_id;
    const lock = await holdRow(database, kidId);
    await engine.cancelRun(run.run_id);
    expect((await engine.getRun(kidId)).status).toBe("RUNNING");
    await lock.release();
    await clock.advance(SWEEP);
    expect((await engine.waitForRun(kidId)).status).toBe("CANCELLED");
  });
});
