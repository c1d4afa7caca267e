import { describe, expect, it } from "vitest";
import { ManualClock, type RunEvent, ValidationError } from "../../../src/index.js";
import { nextEvent, testEngine } from "../../helpers.js";

const DAY = 24 * 3600 * 1000;
const waiting = (e: RunEvent) => e.type === "node.waiting";

const sleepFlow = (payload: Record<string, unknown>, timeout = 90 * 24 * 3600) => ({
  id: "nap",
  timeout,
  nodes: [
    { node_id: "nap", agent_type: "sleep", payload, next_on_success: "after" },
    { node_id: "after", agent_type: "echo" },
  ],
});
const agents = { echo: () => ({ woke: true }) };
// The periodic sweep and heartbeat every 7 hours (not a divisor of the sleeps below): waking
// exactly at the due time is the wake-up timer's doing, and a month of manual time is not
// millions of timer callbacks.
const HOURS_7 = 7 * 3600 * 1000;
const options = { agents, sweepIntervalMs: HOURS_7, heartbeatIntervalMs: HOURS_7, engineTimeoutMs: 3 * HOURS_7 };

describe("sleep", () => {
  it("waits 30 days WAITING, survives an engine restart, and wakes at its due time", async () => {
    const first = await testEngine(options);
    await first.engine.registerWorkflow(sleepFlow({ seconds: 30 * 24 * 3600 }));
    const parked = nextEvent(first.engine, waiting);
    const t0 = first.clock.now();
    const run = await first.engine.startRun("nap");
    expect((await parked).data).toMatchObject({ until: t0 + 30 * DAY });
    expect(await first.engine.getRun(run.run_id)).toMatchObject({
      status: "RUNNING",
      nodes: [
        expect.objectContaining({ node_id: "nap", state: "WAITING" }),
        expect.objectContaining({ state: "PENDING" }),
      ],
    });
    await first.engine.close();

    // A new engine on the same database, days later by its own clock.
    const clock = new ManualClock(t0 + 10 * DAY);
    const second = await testEngine({ ...options, clock, database: first.database });
    await clock.advance(20 * DAY - 1);
    expect((await second.engine.getRun(run.run_id)).nodes[0]).toMatchObject({ state: "WAITING" });
    const done = second.engine.waitForRun(run.run_id);
    await clock.advance(1);
    const finished = await done;
    expect(finished.status).toBe("SUCCEEDED");
    expect(finished.nodes[0]).toMatchObject({
      state: "SUCCEEDED",
      output: { slept_until: new Date(t0 + 30 * DAY).toISOString() },
    });
    expect(finished.output).toEqual({ after: { woke: true } });
  });

  it("finishes at once when until is in the past (ISO 8601 or epoch ms)", async () => {
    const { engine, clock } = await testEngine(options);
    for (const until of [new Date(clock.now() - 1000).toISOString(), clock.now() - 5]) {
      await engine.registerWorkflow(sleepFlow({ until }));
      const run = await engine.startRun("nap");
      const finished = await engine.waitForRun(run.run_id);
      expect(finished.status).toBe("SUCCEEDED");
      expect(finished.nodes[0]?.output).toEqual({ slept_until: new Date(until).toISOString() });
    }
  });

  it("wakes at an until in the future, from a template", async () => {
    const { engine, clock } = await testEngine(options);
    const at = clock.now() + 3 * 3600 * 1000;
    await engine.registerWorkflow(sleepFlow({ until: "{{ input.at }}" }));
    const parked = nextEvent(engine, waiting);
    const run = await engine.startRun("nap", { input: { at: new Date(at).toISOString() } });
    expect((await parked).data).toMatchObject({ until: at });
    const done = engine.waitForRun(run.run_id);
    await clock.advance(3 * 3600 * 1000);
    expect((await done).status).toBe("SUCCEEDED");
  });

  it("cancels like any active visit: the run is CANCELLED and the time passing changes nothing", async () => {
    const { engine, clock } = await testEngine(options);
    await engine.registerWorkflow(sleepFlow({ seconds: 3600 }));
    const parked = nextEvent(engine, waiting);
    const run = await engine.startRun("nap");
    await parked;
    expect(await engine.cancelRun(run.run_id)).toMatchObject({ status: "CANCELLED" });
    await clock.advance(2 * 3600 * 1000);
    const after = await engine.getRun(run.run_id);
    expect(after.status).toBe("CANCELLED");
    expect(after.nodes.map((n) => n.state)).toEqual(["CANCELLED", "SKIPPED"]);
  });

  it("ends with the run's TTL when the run expires first", async () => {
    const { engine, clock } = await testEngine(options);
    await engine.registerWorkflow(sleepFlow({ seconds: 3600 }, 60));
    const parked = nextEvent(engine, waiting);
    const run = await engine.startRun("nap");
    await parked;
    const done = engine.waitForRun(run.run_id);
    await clock.advance(60_000);
    const finished = await done;
    expect(finished).toMatchObject({ status: "FAILED", end_cause: "ttl" });
    expect(finished.nodes[0]).toMatchObject({ state: "CANCELLED", reason: "run_ttl" });
  });

  it("refuses a payload without a valid seconds or until, with its path", async () => {
    const { engine } = await testEngine(options);
    const refused = async (payload: Record<string, unknown>) => {
      const e = await engine.registerWorkflow(sleepFlow(payload)).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ValidationError);
      return (e as ValidationError).problems;
    };
    expect(await refused({})).toEqual([
      expect.objectContaining({ path: "nodes[0].payload", message: expect.stringContaining("needs seconds") }),
    ]);
    expect(await refused({ seconds: 1, until: 2 })).toEqual([
      expect.objectContaining({ path: "nodes[0].payload", message: expect.stringContaining("both") }),
    ]);
    expect(await refused({ seconds: -1 })).toEqual([
      expect.objectContaining({ message: expect.stringContaining("seconds must be") }),
    ]);
    expect(await refused({ until: "next tuesday" })).toEqual([
      expect.objectContaining({ message: expect.stringContaining("ISO 8601") }),
    ]);
    expect(await refused({ until: "2030-01-01T09:00:00" })).toEqual([
      expect.objectContaining({ message: expect.stringContaining("time zone") }),
    ]);
  });

  it("fails the visit (template_error) when a template gives no valid time", async () => {
    const { engine } = await testEngine(options);
    await engine.registerWorkflow(sleepFlow({ seconds: "{{ input.delay }}" }));
    const run = await engine.startRun("nap", { input: { delay: "soon" } });
    const finished = await engine.waitForRun(run.run_id);
    expect(finished.status).toBe("FAILED");
    expect(finished.nodes[0]).toMatchObject({
      state: "FAILED",
      reason: "template_error",
      error: expect.objectContaining({ message: expect.stringContaining("seconds must be") }),
    });
  });

  it("warns at registration about a sleep that wakes after the run's TTL, until a fixed time judged by the engine's clock", async () => {
    const clock = new ManualClock(Date.parse("2030-01-01T00:00:00Z"));
    const { engine } = await testEngine({ ...options, clock });
    const long = await engine.registerWorkflow(sleepFlow({ seconds: 7200 }, 3600));
    expect(long.warnings).toEqual([
      { path: "nodes[0].payload.seconds", message: expect.stringContaining("raise the workflow's timeout") },
    ]);
    const until = { ...sleepFlow({ until: "2030-01-01T02:00:00Z" }, 3600), id: "until" };
    expect((await engine.registerWorkflow(until)).warnings).toEqual([
      { path: "nodes[0].payload.until", message: expect.stringContaining("a run started now expires before it wakes") },
    ]);
    expect((await engine.checkWorkflow(until)).warnings).toHaveLength(1);
    await clock.advance(3600 * 1000 + 1); // now within the TTL of a run started now
    expect((await engine.checkWorkflow(until)).warnings).toEqual([]);
  });
});
