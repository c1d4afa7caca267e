/**
 * Why work waits (DESIGN §17, issue 40 item 6), on both stores: getRun's `waiting` on a ready
 * node held back by its type's rate limit or by more urgent ready work, the run report's note
 * (the CLI), and the `skein_waiting` gauge by reason, which counts QUEUED runs (behind an active
 * run of their key, debounced) and ready work (no agent, rate-limited, behind priority). Work is
 * claimed by an external worker, so the test decides when; the clock is a manual one.
 */
import { describe, expect, it } from "vitest";
import { runReport } from "../../src/cli/summary.js";
import { prometheusMetrics, prometheusText } from "../../src/http/metrics.js";
import type { Engine, EngineOptions } from "../../src/index.js";
import { testEngine } from "../helpers.js";

const ONE = { id: "one", nodes: [{ node_id: "n", agent_type: "t" }] };
const TYPO = { id: "typo", nodes: [{ node_id: "n", agent_type: "nobody" }] };
/** No sweep: nothing but the test moves the work. */
const NO_SWEEP = { sweepIntervalMs: 3_600_000 };

async function engineWith(options: EngineOptions) {
  const metrics = prometheusMetrics();
  const { engine, clock } = await testEngine({ ...NO_SWEEP, meterProvider: metrics.meterProvider, ...options });
  for (const wf of [ONE, TYPO]) await engine.registerWorkflow(wf);
  const claim = () => engine.claimTasks({ agent_types: ["t"], worker_id: "w", max_tasks: 10 });
  /** The `skein_waiting` gauge by reason. */
  const waiting = async () => {
    const text = await prometheusText(metrics.reader);
    return Object.fromEntries(
      [...text.matchAll(/^skein_waiting\{reason="(\w+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]),
    );
  };
  return { engine, clock, claim, waiting };
}

const waitingOf = async (engine: Engine, runId: string) => (await engine.getRun(runId)).nodes[0]?.waiting;

describe("a ready node says why it waits", () => {
  it("behind more urgent ready work of its type, with how much is ahead; the most urgent says nothing", async () => {
    const { engine, clock, claim, waiting } = await engineWith({ agentConcurrency: { t: 1 } });
    await engine.startRun(ONE.id);
    expect(await claim()).toHaveLength(1); // the one slot is taken: the rest wait ready
    const urgent = await engine.startRun(ONE.id, { priority: 1 });
    const middle = await engine.startRun(ONE.id);
    const low = await engine.startRun(ONE.id, { priority: 8 });
    expect(await claim()).toEqual([]);

    expect(await waitingOf(engine, urgent.run_id)).toBeUndefined();
    expect(await waitingOf(engine, middle.run_id)).toEqual({
      reason: "priority",
      ahead: 1,
      message: `behind 1 ready visit of agent type "t" of a more urgent priority (this run's is 5; 0 is claimed first)`,
    });
    expect(await waitingOf(engine, low.run_id)).toMatchObject({ reason: "priority", ahead: 2 });
    const report = runReport(await engine.getRun(low.run_id), await engine.listVisits(low.run_id), clock.now());
    expect(report).toMatch(/\nn +PENDING .*behind 2 ready visits of agent type "t" of a more urgent priority/);
    // Of the three waiting, two wait behind the most urgent.
    expect(await waiting()).toMatchObject({ priority: 2, rate_limited: 0, no_agent: 0 });
  });

  it("rate-limited until its type's window has room again, as the rate limits' state says", async () => {
    const { engine, claim, waiting } = await engineWith({ rateLimits: { t: { per_minute: 1 } } });
    await engine.startRun(ONE.id);
    expect(await claim()).toHaveLength(1);
    const next = await engine.startRun(ONE.id, { priority: 9 });
    expect(await claim()).toEqual([]);
    const [state] = await engine.rateLimitStates();
    expect(state?.limited_until).toEqual(expect.any(Number));
    const until = state?.limited_until as number;
    // The limit holds it, whatever its priority: that is what to look at first.
    expect(await waitingOf(engine, next.run_id)).toEqual({
      reason: "rate_limited",
      until,
      message: `agent type "t" is rate-limited until ${new Date(until).toISOString()}: its requests per second or minute are spent`,
    });
    expect(await waiting()).toMatchObject({ rate_limited: 1, priority: 0 });
  });

  it("held by a provider's 429 until its Retry-After ends, on any type", async () => {
    const { engine, clock, claim } = await engineWith({});
    await engine.startRun(ONE.id);
    const [task] = await claim();
    const next = await engine.startRun(ONE.id);
    await engine.failTask(task?.execution_id as string, {
      worker_id: "w",
      attempt: 1,
      error: { message: "429", retry_after_ms: 20_000, rate_limited: true },
    });
    const until = clock.now() + 20_000;
    expect(await waitingOf(engine, next.run_id)).toEqual({
      reason: "rate_limited",
      until,
      message: `agent type "t" is held by a provider's 429 (Retry-After) until ${new Date(until).toISOString()}`,
    });
  });

  it("for an agent nothing serves, counted as no_agent; a paused run says nothing", async () => {
    const { engine, waiting } = await engineWith({});
    const typo = await engine.startRun(TYPO.id);
    expect((await waitingOf(engine, typo.run_id))?.reason).toBe("no_agent");
    expect(await waiting()).toMatchObject({ no_agent: 1 });
    await engine.pauseRun(typo.run_id);
    expect(await waitingOf(engine, typo.run_id)).toBeUndefined();
  });
});

describe("the skein_waiting gauge", () => {
  it("counts runs queued behind an active run of their key and runs in a debounce window", async () => {
    const { engine, claim, waiting } = await engineWith({});
    await engine.startRun(ONE.id, { key: "a" });
    expect(await claim()).toHaveLength(1);
    await engine.startRun(ONE.id, { key: "a" });
    await engine.startRun(ONE.id, { key: "a" });
    await engine.startRun(ONE.id, { key: "b", debounce_seconds: 30 });
    expect(await claim()).toEqual([]);
    expect(await waiting()).toEqual({ key: 2, debounce: 1, no_agent: 0, rate_limited: 0, priority: 0 });
  });
});
