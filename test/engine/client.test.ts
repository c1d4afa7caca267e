import { describe, expect, it } from "vitest";
import { createClient, type Task } from "../../src/index.js";
import { nextEvent, onPostgres, testEngine } from "../helpers.js";

describe("createClient", () => {
  it("registers and starts runs beside the database's engine, which picks them up", async () => {
    const { engine, clock, database } = await testEngine({ agents: { echo: (t: Task) => t.input } });
    const client = await createClient({ database, clock });
    try {
      await client.registerWorkflow({ id: "echo", nodes: [{ node_id: "a", agent_type: "echo" }] });
      const ended = nextEvent(engine, (e) => e.type === "run.succeeded");
      const run = await client.startRun("echo", { input: { hello: "world" } });
      if (!onPostgres) {
        // SQLite: the engine finds it on its periodic sweep (PostgreSQL: at once, by NOTIFY).
        expect((await client.getRun(run.run_id)).nodes[0]?.state).toBe("PENDING");
      }
      await clock.advance(1_000);
      await ended;
      const done = await client.getRun(run.run_id);
      expect(done.status).toBe("SUCCEEDED");
      expect(done.output).toEqual({ a: { hello: "world" } });
    } finally {
      await client.close();
    }
  });

  it("decides a review and cancels a run beside the engine, whose in-memory runs then follow the file", async () => {
    let finishSlow!: () => void;
    const { engine, clock, database } = await testEngine({
      agents: {
        step: (t: Task) => ({ node: t.node_id }),
        slow: () =>
          new Promise((resolve) => {
            finishSlow = () => resolve({ late: true });
          }),
      },
    });
    await engine.registerWorkflow({
      id: "approve",
      nodes: [
        { node_id: "draft", agent_type: "step" },
        { node_id: "ok", agent_type: "human_review", depends_on: ["draft"], payload: { title: "ok?" } },
        { node_id: "publish", agent_type: "step", depends_on: ["ok"] },
      ],
    });
    await engine.registerWorkflow({ id: "slow", nodes: [{ node_id: "s", agent_type: "slow" }] });
    const asked = nextEvent(engine, (e) => e.type === "review.requested");
    const run = await engine.startRun("approve");
    await asked;
    const slowStarted = nextEvent(engine, (e) => e.type === "node.started" && e.node_id === "s");
    const slow = await engine.startRun("slow");
    await slowStarted;

    const client = await createClient({ database, clock });
    try {
      // The engine holds both runs in memory; the client changes them in the file. (On
      // PostgreSQL the client's NOTIFY may wake the engine before the sweep: listen first.)
      const ended = nextEvent(engine, (e) => e.type === "run.succeeded" && e.run_id === run.run_id);
      await client.review(run.run_id, "ok", { decision: "approve", by: "me" });
      await client.cancelRun(slow.run_id, { reason: "from another process" });
      await clock.advance(1_000); // the sweep claims publish, made ready by the client's decision
      await ended;
      expect((await engine.getRun(run.run_id)).nodes.map((n) => [n.node_id, n.state])).toEqual([
        ["draft", "SUCCEEDED"],
        ["ok", "SUCCEEDED"],
        ["publish", "SUCCEEDED"],
      ]);
      // The slow attempt's late result is fenced against the cancel the client wrote.
      const fenced = nextEvent(engine, (e) => e.type === "result.fenced" && e.run_id === slow.run_id);
      finishSlow();
      await fenced;
      const after = await engine.getRun(slow.run_id);
      expect(after).toMatchObject({ status: "CANCELLED", error: { message: "from another process" } });
      expect(after.nodes[0]).toMatchObject({ state: "CANCELLED", output: null });
    } finally {
      await client.close();
    }
  });

  it("sees a client's write even when another transaction of the engine (a heartbeat) comes first", async () => {
    const { engine, clock, database } = await testEngine({
      agents: { step: () => ({}) },
      heartbeatIntervalMs: 1_000,
      sweepIntervalMs: 10_000,
    });
    await engine.registerWorkflow({
      id: "approve",
      nodes: [
        { node_id: "ok", agent_type: "human_review", payload: { title: "ok?" } },
        { node_id: "publish", agent_type: "step", depends_on: ["ok"] },
      ],
    });
    const asked = nextEvent(engine, (e) => e.type === "review.requested");
    const run = await engine.startRun("approve");
    await asked;
    const client = await createClient({ database, clock });
    try {
      const ended = nextEvent(engine, (e) => e.type === "run.succeeded" && e.run_id === run.run_id);
      await client.review(run.run_id, "ok", { decision: "approve", by: "me" });
      await clock.advance(1_000); // the heartbeat's transaction runs first
      await clock.advance(9_000); // then the sweep, which must not trust its stale copy of the run
      await ended;
    } finally {
      await client.close();
    }
  });
});
