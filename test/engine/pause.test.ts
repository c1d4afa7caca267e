/**
 * Pausing runs (DESIGN §16), on both stores: a paused run starts no attempt (a running one
 * finishes and is recorded), due times keep counting and take effect on resume, and a node with
 * `on_exhausted: "pause"` pauses its run when its retries run out, for an operator to resume
 * (one more attempt) or fail (its failure path).
 */
import { describe, expect, it } from "vitest";
import { ConflictError, type Engine, NotFoundError, RetryableError, type RunEvent } from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";

/** An agent whose calls wait until the test lets each one go. */
function gate() {
  const waiting: (() => void)[] = [];
  let calls = 0;
  return {
    handler: async () => {
      calls++;
      await new Promise<void>((resolve) => waiting.push(resolve));
      return { ok: true };
    },
    calls: () => calls,
    release: () => waiting.shift()?.(),
  };
}

const started = (events: RunEvent[], nodeId: string) =>
  events.filter((e) => e.type === "node.started" && e.node_id === nodeId).length;

/** Until the engine has taken in every input given so far: a flush ran after the call returned. */
async function flushed(engine: Engine): Promise<void> {
  const probe = await engine.startRun("probe");
  await engine.waitForRun(probe.run_id);
}

describe("pauseRun and resumeRun", () => {
  it("holds a node that became ready unstarted while the running one finishes, and resume starts it", async () => {
    const first = gate();
    let secondCalls = 0;
    const { engine } = await testEngine({
      agents: { first: first.handler, second: () => ({ n: ++secondCalls }), probe: () => ({}) },
    });
    await engine.registerWorkflow({ id: "probe", nodes: [{ node_id: "p", agent_type: "probe" }] });
    await engine.registerWorkflow({
      id: "two",
      nodes: [
        { node_id: "a", agent_type: "first", next_on_success: "b" },
        { node_id: "b", agent_type: "second" },
      ],
    });
    const aStarted = nextEvent(engine, (e) => e.type === "node.started" && e.node_id === "a");
    const run = await engine.startRun("two");
    await aStarted;

    const paused = await engine.pauseRun(run.run_id, { reason: "provider outage", by: "ops" });
    expect(paused.status).toBe("RUNNING");
    expect(paused.paused).toMatchObject({ by: "ops", reason: "provider outage" });
    expect((await engine.listRuns({ paused: true })).map((r) => r.run_id)).toEqual([run.run_id]);
    // Pausing again changes nothing (the first pause's record stays).
    expect((await engine.pauseRun(run.run_id, { by: "someone else" })).paused).toEqual(paused.paused);

    // The running attempt finishes and is recorded; b is ready but does not start.
    const aDone = nextEvent(engine, (e) => e.type === "node.succeeded" && e.node_id === "a");
    first.release();
    await aDone;
    await flushed(engine);
    await flushed(engine);
    const held = await engine.getRun(run.run_id);
    expect(held.status).toBe("RUNNING");
    expect(held.nodes.find((n) => n.node_id === "b")?.state).toBe("PENDING");
    const events = await engine.listEvents(run.run_id);
    expect(events.some((e) => e.type === "node.ready" && e.node_id === "b")).toBe(true);
    expect(started(events, "b")).toBe(0);
    expect(secondCalls).toBe(0);

    const resumed = await engine.resumeRun(run.run_id, { by: "ops" });
    expect(resumed.paused).toBeNull();
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(secondCalls).toBe(1);
    const history = (await engine.listEvents(run.run_id)).map((e) => e.type);
    expect(history).toContain("run.paused");
    expect(history.indexOf("run.resumed")).toBeLessThan(history.lastIndexOf("node.started"));
    expect(await engine.listRuns({ paused: true })).toEqual([]);
  });

  it("lets a retry time pass while paused and starts that attempt at once on resume", async () => {
    let calls = 0;
    const { engine, clock } = await testEngine({
      agents: {
        flaky: () => {
          calls++;
          if (calls === 1) throw new RetryableError("503 from the provider");
          return { calls };
        },
        probe: () => ({}),
      },
    });
    await engine.registerWorkflow({ id: "probe", nodes: [{ node_id: "p", agent_type: "probe" }] });
    await engine.registerWorkflow({
      id: "flaky",
      nodes: [{ node_id: "call", agent_type: "flaky", retry_count: 3, retry_interval: 30 }],
    });
    const retrying = nextEvent(engine, (e) => e.type === "node.retrying");
    const run = await engine.startRun("flaky");
    await retrying;
    await engine.pauseRun(run.run_id);

    await clock.advance(60_000); // the retry came due while paused
    await flushed(engine);
    expect(calls).toBe(1);
    expect((await engine.getRun(run.run_id)).nodes[0]?.state).toBe("RETRYING");

    await engine.resumeRun(run.run_id); // no clock move: it is due already
    expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
    expect(calls).toBe(2);
  });

  it("refuses a run that ended, and an unknown run", async () => {
    const { engine } = await testEngine({ agents: { quick: () => ({}) } });
    await engine.registerWorkflow({ id: "quick", nodes: [{ node_id: "q", agent_type: "quick" }] });
    const run = await engine.startRun("quick");
    await engine.waitForRun(run.run_id);
    await expect(engine.pauseRun(run.run_id)).rejects.toThrow(ConflictError);
    await expect(engine.pauseRun(run.run_id)).rejects.toThrow(/already ended SUCCEEDED/);
    await expect(engine.resumeRun("nope")).rejects.toThrow(NotFoundError);
  });
});

describe('on_exhausted: "pause" and failVisit', () => {
  it("pauses the run when the node's retries run out; resume gives one more attempt; failVisit takes the failure path", async () => {
    let calls = 0;
    let fallbacks = 0;
    const { engine, clock } = await testEngine({
      agents: {
        down: () => {
          calls++;
          throw new RetryableError(`provider down (call ${calls})`);
        },
        fallback: () => ({ fallback: ++fallbacks }),
      },
    });
    await engine.registerWorkflow({
      id: "outage",
      defaults: { on_exhausted: "pause" },
      nodes: [
        { node_id: "call", agent_type: "down", retry_count: 1, retry_interval: 10, next_on_failure: "plan_b" },
        { node_id: "plan_b", agent_type: "fallback" },
      ],
    });
    const pausedEvent = nextEvent(engine, (e) => e.type === "run.paused");
    const run = await engine.startRun("outage");
    await clock.advance(10_000); // the one retry
    const event = await pausedEvent;
    expect(event).toMatchObject({ node_id: "call", data: { by: "engine", attempt: 2 } });
    expect(calls).toBe(2);

    const paused = await engine.getRun(run.run_id);
    expect(paused.status).toBe("RUNNING");
    expect(paused.paused).toMatchObject({ by: "engine", node_id: "call", visit: 1 });
    expect(paused.paused?.reason).toMatch(/node call failed 2 attempts, its last: provider down \(call 2\)/);
    const call = paused.nodes.find((n) => n.node_id === "call");
    expect(call).toMatchObject({ state: "RETRYING", error: { message: "provider down (call 2)" } });
    const types = (await engine.listEvents(run.run_id)).map((e) => e.type);
    expect(types).toContain("run.needs_attention");
    expect(types).not.toContain("node.failed");

    // Resume: one more attempt, which fails too, and the run pauses again.
    const pausedAgain = nextEvent(engine, (e) => e.type === "run.paused" && e.data.attempt === 3);
    await engine.resumeRun(run.run_id, { by: "ops" });
    await pausedAgain;
    expect(calls).toBe(3);
    expect((await engine.getRun(run.run_id)).paused).toMatchObject({ node_id: "call" });

    // The operator gives up on it: the failure edge fires and the run finishes by plan_b.
    const failed = await engine.failVisit(run.run_id, "call", { by: "ops", reason: "provider gone for the day" });
    expect(failed.paused).toBeNull();
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(fallbacks).toBe(1);
    expect(calls).toBe(3);
    const failedCall = done.nodes.find((n) => n.node_id === "call");
    expect(failedCall).toMatchObject({ state: "FAILED", reason: "retries_exhausted" });
    expect(failedCall?.error?.message).toBe("provider down (call 3) (failed by ops: provider gone for the day)");
  });

  it("fails the run when the failed node has no failure path, and refuses a node that is not waiting", async () => {
    const { engine } = await testEngine({
      agents: {
        down: () => {
          throw new RetryableError("down");
        },
        never: () => ({}),
      },
    });
    await engine.registerWorkflow({
      id: "alone",
      nodes: [
        { node_id: "call", agent_type: "down", retry_count: 0, on_exhausted: "pause", next_on_success: "after" },
        { node_id: "after", agent_type: "never" },
      ],
    });
    const pausedEvent = nextEvent(engine, (e) => e.type === "run.paused");
    const run = await engine.startRun("alone");
    await pausedEvent;
    await expect(engine.failVisit(run.run_id, "after")).rejects.toThrow(
      /not waiting for an attempt \(it has not been reached yet\)/,
    );
    await expect(engine.failVisit(run.run_id, "nope")).rejects.toThrow(NotFoundError);
    await engine.failVisit(run.run_id, "call");
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(done.paused).toBeNull();
    expect(done.error?.message).toMatch(/node call failed \(retries_exhausted\)/);
  });

  it("leaves a node without on_exhausted to fail as before", async () => {
    const { engine } = await testEngine({
      agents: {
        down: () => {
          throw new RetryableError("down");
        },
      },
    });
    await engine.registerWorkflow({ id: "plain", nodes: [{ node_id: "call", agent_type: "down", retry_count: 0 }] });
    const done = await engine.waitForRun((await engine.startRun("plain")).run_id);
    expect(done).toMatchObject({ status: "FAILED", paused: null });
  });
});
