/**
 * Compensation, cancel with compensation, and redrive (DESIGN §6), on a real SQLite file with
 * the injected clock. Agents record what they are asked to undo, so order and inputs are checked
 * as the agents saw them.
 */
import { describe, expect, it } from "vitest";
import { ConflictError, NonRetryableError, NotFoundError, type Notification, type Task } from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";

const undo = (what: string) => ({
  agent_type: "undo",
  payload: { what, of: "{{ self.execution_id }}", output: "{{ self.output }}", error: "{{ self.error.message }}" },
});

/** reserve → charge → ship; each declares how to undo it. */
const SAGA = {
  id: "saga",
  nodes: [
    { node_id: "reserve", agent_type: "step", compensation: undo("release") },
    { node_id: "charge", agent_type: "step", depends_on: ["reserve"], compensation: undo("refund") },
    { node_id: "ship", agent_type: "ship", depends_on: ["charge"], compensation: undo("unship") },
    { node_id: "notify", agent_type: "step", depends_on: ["ship"] },
  ],
};

type Undone = { execution_id: string; node_id: string; visit: number; payload: unknown; compensates: unknown };

function recorder() {
  const undone: Undone[] = [];
  const undoAgent = (t: Task) => {
    undone.push({
      execution_id: t.execution_id,
      node_id: t.node_id,
      visit: t.visit,
      payload: t.payload,
      compensates: t.compensates,
    });
    return { undone: t.node_id };
  };
  return { undone, undoAgent };
}

describe("compensation", () => {
  it("undoes the failing visit, then the successes newest first, each with self in its templates", async () => {
    const { undone, undoAgent } = recorder();
    const { engine } = await testEngine({
      agents: {
        step: (t: Task) => ({ id: `${t.node_id}-1` }),
        ship: () => {
          throw new NonRetryableError("carrier refused");
        },
        undo: undoAgent,
      },
    });
    await engine.registerWorkflow(SAGA);
    const seen: string[] = [];
    engine.subscribe((e) => {
      if (e.type.startsWith("compensation.") || e.type.startsWith("run.")) seen.push(e.type);
    });
    const run = await engine.startRun("saga");
    const done = await engine.waitForRun(run.run_id);

    expect(done).toMatchObject({ status: "FAILED", end_cause: "failed", needs_attention: false });
    expect(undone.map((u) => [u.node_id, (u.payload as { what: string }).what])).toEqual([
      ["ship", "unship"],
      ["charge", "refund"],
      ["reserve", "release"],
    ]);
    const [ship, charge] = undone;
    expect(ship).toMatchObject({
      execution_id: `${run.run_id}:ship:1:compensate`,
      payload: { of: `${run.run_id}:ship:1`, output: null, error: "carrier refused" },
      compensates: { execution_id: `${run.run_id}:ship:1`, output: null, error: { message: "carrier refused" } },
    });
    expect(charge?.payload).toMatchObject({ of: `${run.run_id}:charge:1`, output: { id: "charge-1" } });
    expect(done.compensations.map((c) => [c.seq, c.node_id, c.state])).toEqual([
      [1, "ship", "SUCCEEDED"],
      [2, "charge", "SUCCEEDED"],
      [3, "reserve", "SUCCEEDED"],
    ]);
    // The run is COMPENSATING until the last row ends; only then does it fail.
    expect(seen[0]).toBe("run.started");
    expect(seen.slice(1, 2)).toEqual(["compensation.planned"]);
    expect(seen.at(-1)).toBe("run.failed");
    expect(seen.filter((t) => t === "compensation.succeeded")).toHaveLength(3);
  });

  it("runs one compensation at a time and retries a failed one with the node's backoff", async () => {
    const { undone, undoAgent } = recorder();
    let refundFailures = 1;
    let release!: () => void;
    let unshipCalled!: () => void;
    const unship = new Promise<void>((resolve) => {
      unshipCalled = resolve;
    });
    const { engine, clock } = await testEngine({
      agents: {
        step: () => ({}),
        ship: () => {
          throw new NonRetryableError("no");
        },
        undo: (t: Task) => {
          if ((t.payload as { what: string }).what === "refund" && refundFailures-- > 0) throw new Error("bank down");
          if ((t.payload as { what: string }).what === "unship") {
            return new Promise((resolve) => {
              release = () => resolve(undoAgent(t));
              unshipCalled();
            });
          }
          return undoAgent(t);
        },
      },
    });
    await engine.registerWorkflow({ ...SAGA, defaults: { retry_interval: 10 } });
    const run = await engine.startRun("saga");
    await unship;
    // While unship runs, nothing else has started.
    const during = await engine.getRun(run.run_id);
    expect(during.status).toBe("COMPENSATING");
    expect(during.compensations.map((c) => c.state)).toEqual(["RUNNING", "PENDING", "PENDING"]);

    const retrying = nextEvent(engine, (e) => e.type === "compensation.retrying");
    release();
    const r = await retrying;
    expect(r.data).toMatchObject({ error: { message: "bank down" }, retry_at: clock.now() + 10_000 });
    expect((await engine.getRun(run.run_id)).compensations.map((c) => c.state)).toEqual([
      "SUCCEEDED",
      "RETRYING",
      "PENDING",
    ]);
    await clock.advance(10_000);
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(undone.map((u) => u.node_id)).toEqual(["ship", "charge", "reserve"]);
    expect(done.compensations[1]).toMatchObject({ state: "SUCCEEDED", attempt: 2, failures: 1 });
  });

  it("undoes every round of a loop, newest success first", async () => {
    const { undone, undoAgent } = recorder();
    let checks = 0;
    const { engine } = await testEngine({
      agents: {
        write: (t: Task) => ({ draft: t.visit }),
        check: () => ({ round: ++checks }),
        publish: () => {
          throw new NonRetryableError("publisher down");
        },
        undo: undoAgent,
      },
    });
    await engine.registerWorkflow({
      id: "rounds",
      nodes: [
        { node_id: "write", agent_type: "write", compensation: undo("delete draft") },
        {
          node_id: "check",
          agent_type: "check",
          depends_on: ["write"],
          next_on_success: [{ when: "output.round < 3", to: "write" }, { to: "publish" }],
        },
        { node_id: "publish", agent_type: "publish" },
      ],
    });
    const run = await engine.startRun("rounds");
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(undone.map((u) => [u.node_id, u.visit, (u.payload as { output: unknown }).output])).toEqual([
      ["write", 3, { draft: 3 }],
      ["write", 2, { draft: 2 }],
      ["write", 1, { draft: 1 }],
    ]);
  });

  it("waits for a cancelled attempt to return, then undoes the failing visit before the cancelled one", async () => {
    const { undone, undoAgent } = recorder();
    let finishSlow!: () => void;
    const { engine } = await testEngine({
      agents: {
        slow: (t: Task) =>
          new Promise((resolve) => {
            finishSlow = () => resolve({ slow: t.node_id });
          }),
        bad: () => {
          throw new NonRetryableError("bad");
        },
        undo: undoAgent,
      },
    });
    await engine.registerWorkflow({
      id: "fan",
      nodes: [
        { node_id: "slow", agent_type: "slow", compensation: undo("undo slow") },
        { node_id: "bad", agent_type: "bad", compensation: undo("undo bad") },
      ],
    });
    const planned = nextEvent(engine, (e) => e.type === "compensation.planned");
    const run = await engine.startRun("fan");
    await planned;
    const waiting = await engine.getRun(run.run_id);
    expect(waiting.status).toBe("COMPENSATING");
    expect(waiting.nodes.find((n) => n.node_id === "slow")).toMatchObject({ state: "CANCELLED" });
    expect(waiting.compensations.map((c) => [c.node_id, c.state, c.attempt])).toEqual([
      ["bad", "PENDING", 0],
      ["slow", "PENDING", 0],
    ]);
    expect(undone).toEqual([]);

    finishSlow(); // its late result is fenced and releases the attempt
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(undone.map((u) => u.node_id)).toEqual(["bad", "slow"]);
  });

  it("starts compensation at the deadline of a cancelled attempt that never returns", async () => {
    const { undone, undoAgent } = recorder();
    const { engine, clock } = await testEngine({
      agents: {
        hang: () => new Promise(() => {}),
        bad: () => {
          throw new NonRetryableError("bad");
        },
        undo: undoAgent,
      },
    });
    await engine.registerWorkflow({
      id: "hang",
      nodes: [
        { node_id: "hang", agent_type: "hang", timeout: 60, compensation: undo("undo hang") },
        { node_id: "bad", agent_type: "bad" },
      ],
    });
    const planned = nextEvent(engine, (e) => e.type === "compensation.planned");
    const run = await engine.startRun("hang");
    await planned;
    const waiting = await engine.getRun(run.run_id);
    expect(waiting.compensations[0]?.ready_at).toBe(waiting.nodes[0]?.deadline_at);
    await clock.advance(59_000);
    expect((await engine.getRun(run.run_id)).compensations[0]?.state).toBe("PENDING");
    await clock.advance(1_000);
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(undone.map((u) => u.node_id)).toEqual(["hang"]);
  });

  it("stops at a compensation that fails for good: needs_attention, an event, the notifier, the rest skipped", async () => {
    const { undone, undoAgent } = recorder();
    const notified: Notification[] = [];
    const { engine } = await testEngine({
      agents: {
        step: () => ({}),
        ship: () => {
          throw new NonRetryableError("no");
        },
        undo: (t: Task) => {
          if ((t.payload as { what: string }).what === "refund") throw new NonRetryableError("refund rejected");
          return undoAgent(t);
        },
      },
      notify: { hook: (n) => void notified.push(n) },
    });
    await engine.registerWorkflow(SAGA);
    const attention = nextEvent(engine, (e) => e.type === "run.needs_attention");
    const run = await engine.startRun("saga");
    const done = await engine.waitForRun(run.run_id);
    const event = await attention;
    expect(event.data).toMatchObject({ execution_id: `${run.run_id}:charge:1:compensate`, reason: "non_retryable" });
    expect(done).toMatchObject({ status: "FAILED", needs_attention: true });
    expect(done.compensations.map((c) => [c.node_id, c.state, c.reason])).toEqual([
      ["ship", "SUCCEEDED", null],
      ["charge", "FAILED", "non_retryable"],
      ["reserve", "SKIPPED", "compensation_failed"],
    ]);
    expect(undone.map((u) => u.node_id)).toEqual(["ship"]);
    await expect.poll(() => notified.map((n) => n.type)).toContain("run.needs_attention");
    expect(notified.find((n) => n.type === "run.needs_attention")).toMatchObject({
      run_id: run.run_id,
      trace_id: run.trace_id,
    });
  });

  it("compensates on TTL expiry; the compensation itself is not bound by the TTL", async () => {
    const { undone, undoAgent } = recorder();
    const { engine, clock } = await testEngine({
      agents: { step: () => ({ ok: true }), ship: () => new Promise(() => {}), undo: undoAgent },
    });
    await engine.registerWorkflow({ ...SAGA, timeout: 100, defaults: { timeout: 300 } });
    const shipping = nextEvent(engine, (e) => e.type === "node.started" && e.node_id === "ship");
    const run = await engine.startRun("saga");
    await shipping;
    const planned = nextEvent(engine, (e) => e.type === "compensation.planned");
    await clock.advance(100_000);
    await planned;
    const expired = await engine.getRun(run.run_id);
    expect(expired).toMatchObject({ status: "COMPENSATING", end_cause: "ttl", error: { reason: "run_timeout" } });
    // ship was cancelled mid-attempt: compensation waits for its deadline, past the TTL.
    await clock.advance(200_000);
    const done = await engine.waitForRun(run.run_id);
    expect(done).toMatchObject({ status: "FAILED", end_cause: "ttl" });
    expect(undone.map((u) => u.node_id)).toEqual(["ship", "charge", "reserve"]);
  });

  it("fences a compensation's result from an attempt that lost its lease", async () => {
    let calls = 0;
    let first!: (v: unknown) => void;
    const { engine, clock } = await testEngine({
      agents: {
        step: () => ({}),
        ship: () => {
          throw new NonRetryableError("no");
        },
        undo: () => {
          calls += 1;
          if (calls === 1) return new Promise((resolve) => (first = resolve));
          return { second: true };
        },
      },
    });
    await engine.registerWorkflow({
      id: "lease",
      defaults: { timeout: 30, retry_interval: 1 },
      nodes: [{ node_id: "ship", agent_type: "ship", compensation: { agent_type: "undo" } }],
    });
    const started = nextEvent(engine, (e) => e.type === "compensation.started");
    const run = await engine.startRun("lease");
    await started;
    const retried = nextEvent(engine, (e) => e.type === "compensation.retrying");
    await clock.advance(30_000);
    expect((await retried).data).toMatchObject({ error: { reason: "timeout" } });
    await clock.advance(1_000);
    const done = await engine.waitForRun(run.run_id);
    expect(done.compensations[0]).toMatchObject({ state: "SUCCEEDED", attempt: 2, output: { second: true } });
    const fenced = nextEvent(engine, (e) => e.type === "result.fenced");
    first({ late: true });
    expect((await fenced).data).toMatchObject({ execution_id: `${run.run_id}:ship:1:compensate`, attempt: 1 });
    expect((await engine.getRun(run.run_id)).compensations[0]?.output).toEqual({ second: true });
  });
});

describe("cancelRun", () => {
  async function parked() {
    const { undone, undoAgent } = recorder();
    const t = await testEngine({
      agents: { step: () => ({ done: true }), ship: () => new Promise(() => {}), undo: undoAgent },
    });
    await t.engine.registerWorkflow({ ...SAGA, defaults: { timeout: 60 } });
    const shipping = nextEvent(t.engine, (e) => e.type === "node.started" && e.node_id === "ship");
    const run = await t.engine.startRun("saga");
    await shipping;
    return { ...t, run, undone };
  }

  it("without compensate: CANCELLED at once, nothing undone", async () => {
    const { engine, run, undone } = await parked();
    const cancelled = await engine.cancelRun(run.run_id, { reason: "customer left" });
    expect(cancelled).toMatchObject({ status: "CANCELLED", end_cause: "cancelled" });
    const after = await engine.getRun(run.run_id);
    expect(after.compensations).toEqual([]);
    expect(undone).toEqual([]);
  });

  it("with compensate: COMPENSATING, then CANCELLED once the cancelled attempt's deadline passed and all is undone", async () => {
    const { engine, clock, run, undone } = await parked();
    const cancelled = await engine.cancelRun(run.run_id, { compensate: true });
    expect(cancelled.status).toBe("COMPENSATING");
    await expect(engine.cancelRun(run.run_id)).rejects.toThrow(/is compensating/);
    await clock.advance(60_000); // ship's attempt never returns: compensation starts at its deadline
    const done = await engine.waitForRun(run.run_id);
    expect(done).toMatchObject({ status: "CANCELLED", needs_attention: false });
    expect(undone.map((u) => u.node_id)).toEqual(["ship", "charge", "reserve"]);
  });
});

describe("retryRun", () => {
  it("redrives from the failed node: new visits for it and what follows, earlier successes kept, a fresh TTL", async () => {
    let shipCalls = 0;
    const { engine, clock } = await testEngine({
      agents: {
        step: (t: Task) => ({ node: t.node_id, visit: t.visit }),
        ship: () => {
          if (++shipCalls === 1) throw new NonRetryableError("carrier down");
          return { shipped: true };
        },
      },
    });
    await engine.registerWorkflow({ id: "plain", nodes: SAGA.nodes.map(({ compensation: _, ...n }) => n) });
    const run = await engine.startRun("plain");
    const failed = await engine.waitForRun(run.run_id);
    expect(failed.status).toBe("FAILED");
    await expect(engine.retryRun(run.run_id, { from: "nope" })).rejects.toBeInstanceOf(NotFoundError);

    await clock.advance(5_000);
    const retried = await engine.retryRun(run.run_id);
    expect(retried).toMatchObject({ status: "RUNNING", end_cause: null, error: null, ended_at: null });
    expect(retried.deadline_at).toBe(clock.now() + 86_400_000);
    await expect(engine.retryRun(run.run_id)).rejects.toBeInstanceOf(ConflictError);
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.map((n) => [n.node_id, n.visit, n.state])).toEqual([
      ["reserve", 1, "SUCCEEDED"],
      ["charge", 1, "SUCCEEDED"],
      ["ship", 2, "SUCCEEDED"],
      ["notify", 2, "SUCCEEDED"],
    ]);
    const events = await engine.listEvents(run.run_id);
    expect(events.find((e) => e.type === "run.retried")?.data).toEqual({
      from: null,
      force: false,
      nodes: ["ship", "notify"],
    });
    await expect(engine.retryRun(run.run_id)).rejects.toThrow(/SUCCEEDED; only a FAILED or CANCELLED run/);
  });

  it("redrives from an earlier node, and redoes the successes a compensation undid", async () => {
    let shipCalls = 0;
    const { undone, undoAgent } = recorder();
    const { engine } = await testEngine({
      agents: {
        step: (t: Task) => ({ node: t.node_id, visit: t.visit }),
        ship: () => {
          if (++shipCalls === 1) throw new NonRetryableError("carrier down");
          return { shipped: true };
        },
        undo: undoAgent,
      },
    });
    await engine.registerWorkflow({
      ...SAGA,
      // only charge can be undone: reserve's success stays, charge runs again
      nodes: SAGA.nodes.map((n) => (n.node_id === "charge" ? n : { ...n, compensation: undefined })),
    });
    const run = await engine.startRun("saga");
    expect((await engine.waitForRun(run.run_id)).status).toBe("FAILED");
    expect(undone.map((u) => u.node_id)).toEqual(["charge"]);

    await engine.retryRun(run.run_id);
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.map((n) => [n.node_id, n.visit])).toEqual([
      ["reserve", 1],
      ["charge", 2],
      ["ship", 2],
      ["notify", 2],
    ]);

    // A finished run cannot be redriven, but a failed one can from any earlier node.
    shipCalls = 0;
    const second = await engine.startRun("saga");
    expect((await engine.waitForRun(second.run_id)).status).toBe("FAILED");
    await engine.retryRun(second.run_id, { from: "reserve" });
    const again = await engine.waitForRun(second.run_id);
    expect(again.status).toBe("SUCCEEDED");
    expect(again.nodes.map((n) => [n.node_id, n.visit])).toEqual([
      ["reserve", 2],
      ["charge", 2],
      ["ship", 2],
      ["notify", 2],
    ]);
  });

  it("needs force when a compensation failed for good; a cancelled run can be redriven", async () => {
    const { engine } = await testEngine({
      agents: {
        step: () => ({}),
        ship: () => {
          throw new NonRetryableError("no");
        },
        undo: () => {
          throw new NonRetryableError("cannot undo");
        },
      },
    });
    await engine.registerWorkflow(SAGA);
    const run = await engine.startRun("saga");
    expect(await engine.waitForRun(run.run_id)).toMatchObject({ status: "FAILED", needs_attention: true });
    await expect(engine.retryRun(run.run_id)).rejects.toThrow(/needs attention.*force/);
    const forced = await engine.retryRun(run.run_id, { force: true });
    expect(forced).toMatchObject({ status: "RUNNING", needs_attention: false });
    const events = await engine.listEvents(run.run_id);
    expect(events.find((e) => e.type === "run.retried")?.data).toMatchObject({ force: true });
  });

  it("redrives a cancelled run: what the cancel stopped runs again", async () => {
    let hold = true;
    let started!: () => void;
    const { engine } = await testEngine({
      agents: {
        step: () => ({}),
        ship: () => {
          if (hold) return new Promise(() => started());
          return { shipped: true };
        },
      },
    });
    await engine.registerWorkflow({ id: "plain", nodes: SAGA.nodes.map(({ compensation: _, ...n }) => n) });
    const shipping = new Promise<void>((resolve) => (started = resolve));
    const run = await engine.startRun("plain");
    await shipping;
    await engine.cancelRun(run.run_id);
    hold = false;
    await engine.retryRun(run.run_id);
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.map((n) => [n.node_id, n.visit])).toEqual([
      ["reserve", 1],
      ["charge", 1],
      ["ship", 2],
      ["notify", 2],
    ]);
  });
});

describe("review with compensation", () => {
  it("an unrouted rejection fails the run and undoes what ran before it", async () => {
    const { undone, undoAgent } = recorder();
    const { engine } = await testEngine({ agents: { step: () => ({ id: 7 }), undo: undoAgent } });
    await engine.registerWorkflow({
      id: "approve-order",
      nodes: [
        { node_id: "charge", agent_type: "step", compensation: undo("refund") },
        {
          node_id: "approve",
          agent_type: "human_review",
          depends_on: ["charge"],
          payload: { title: "Ship order?", assignees: ["ops"] },
        },
        { node_id: "ship", agent_type: "step", depends_on: ["approve"] },
      ],
    });
    const asked = nextEvent(engine, (e) => e.type === "review.requested");
    const run = await engine.startRun("approve-order");
    await asked;
    await engine.review(run.run_id, "approve", { decision: "reject", by: "ops", comment: "fraud" });
    const done = await engine.waitForRun(run.run_id);
    expect(done).toMatchObject({ status: "FAILED", error: { reason: "rejected" } });
    expect(undone.map((u) => [u.node_id, u.payload])).toEqual([
      ["charge", expect.objectContaining({ what: "refund", output: { id: 7 } })],
    ]);
  });
});

describe("a failure and a sibling's result in one group commit", () => {
  it("compensates: the cancelled sibling's result does not finish the run before its rows exist", async () => {
    const { undone, undoAgent } = recorder();
    // Both parallel steps of a run return at the same moment: both results go into one flush.
    const gates = new Map<string, { started: number; open: () => void; opened: Promise<void> }>();
    const arrive = async (t: Task) => {
      let g = gates.get(t.run_id);
      if (!g) {
        let open!: () => void;
        const opened = new Promise<void>((resolve) => {
          open = resolve;
        });
        g = { started: 0, open, opened };
        gates.set(t.run_id, g);
      }
      if (++g.started === 2) g.open();
      await g.opened;
    };
    const { engine } = await testEngine({
      agents: {
        step: () => ({ reserved: true }),
        bad: async (t: Task) => {
          await arrive(t);
          throw new NonRetryableError("card declined");
        },
        good: async (t: Task) => {
          await arrive(t);
          return { packed: true };
        },
        undo: undoAgent,
      },
    });
    await engine.registerWorkflow({
      id: "split",
      nodes: [
        { node_id: "reserve", agent_type: "step", compensation: undo("release") },
        { node_id: "charge", agent_type: "bad", depends_on: ["reserve"] },
        { node_id: "pack", agent_type: "good", depends_on: ["reserve"], compensation: undo("unpack") },
      ],
    });
    const runs = await Promise.all(Array.from({ length: 5 }, () => engine.startRun("split")));
    for (const run of runs) {
      const done = await engine.waitForRun(run.run_id);
      expect(done).toMatchObject({ status: "FAILED", end_cause: "failed", needs_attention: false });
      expect(done.compensations.map((c) => [c.node_id, c.state])).toEqual([
        ["pack", "SUCCEEDED"],
        ["reserve", "SUCCEEDED"],
      ]);
    }
    expect(undone).toHaveLength(10);
  });
});
