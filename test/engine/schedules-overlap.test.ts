/**
 * Schedules (DESIGN §11.5): overlap with a slow run, catchup after an outage (the engine closed,
 * the clock moved on, an engine reopened on the same database), and slots that cannot start.
 * SQLite and PostgreSQL.
 */
import { AggregationTemporality, MeterProvider, MetricReader, type SumMetricData } from "@opentelemetry/sdk-metrics";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { type AgentHandler, type Engine, ManualClock, type Run } from "../../src/index.js";
import { testEngine } from "../helpers.js";
import { advanceTo } from "./schedule-clock.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const QUIET = { sweepIntervalMs: 7 * HOUR, heartbeatIntervalMs: 7 * HOUR, engineTimeoutMs: 21 * HOUR };
const START = Date.UTC(2026, 0, 1);

const slotOf = (r: Run) => Date.parse((r.idempotency_key ?? "").replace(/^skein:schedule:[^:]+:/, ""));
const minutes = (runs: Run[]) => runs.map((r) => (slotOf(r) - START) / MINUTE);

async function runsOf(engine: Engine, scheduleId: string): Promise<Run[]> {
  const runs = await engine.listRuns({ schedule_id: scheduleId, limit: 1000 });
  return runs.sort((a, b) => slotOf(a) - slotOf(b));
}

/** An agent that hangs until released, like a model call that takes several slots; its attempts are `hung`. */
function slowAgent() {
  const hung = new Set<string>();
  const waiting: (() => void)[] = [];
  const handler: AgentHandler = async (task) => {
    hung.add(task.execution_id);
    await new Promise<void>((resolve) => waiting.push(resolve));
    hung.delete(task.execution_id);
    return { ok: true };
  };
  const release = () => {
    for (const resolve of waiting.splice(0)) resolve();
  };
  return { hung, handler, release };
}

/** A metrics reader collected on demand: the skein_schedule_slots counter by outcome. */
class Reader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
  async slots(): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const scope of (await this.collect()).resourceMetrics.scopeMetrics) {
      for (const m of scope.metrics) {
        if (m.descriptor.name !== "skein_schedule_slots") continue;
        for (const p of (m as SumMetricData).dataPoints)
          counts[`${p.attributes.schedule}/${p.attributes.outcome}`] = p.value;
      }
    }
    return counts;
  }
}

// A long attempt timeout: the hung agent is slow, not timed out.
const slowFlow = { id: "slow", nodes: [{ node_id: "think", agent_type: "thinker", timeout: 86_400 }] };
const quickFlow = { id: "quick", nodes: [{ node_id: "write", agent_type: "writer" }] };

async function open(options: Parameters<typeof testEngine>[0] = {}) {
  const t = await testEngine({ ...QUIET, clock: new ManualClock(START), ...options });
  return t;
}

describe("schedules: overlap", () => {
  it("skip: a hung run over several slots gets no second run until it ends", async () => {
    const agent = slowAgent();
    const reader = new Reader();
    const meterProvider = new MeterProvider({ readers: [reader] });
    const { engine, clock } = await open({ agents: { thinker: agent.handler }, meterProvider });
    await engine.registerWorkflow(slowFlow);
    await engine.putSchedule({ schedule_id: "think", workflow_id: "slow", cron: "* * * * *" });
    await advanceTo(engine, clock, START + 5 * MINUTE, agent.hung);
    const runs = await runsOf(engine, "think");
    expect(minutes(runs)).toEqual([1]);
    expect(runs[0]?.status).toBe("RUNNING");
    // Slots 2-5 were handled (skipped), not left due.
    expect(await engine.getSchedule("think")).toMatchObject({
      last_slot_at: START + 5 * MINUTE,
      last_run_id: runs[0]?.run_id,
      next_fire_at: START + 6 * MINUTE,
    });
    agent.release();
    await advanceTo(engine, clock, START + 5 * MINUTE + 30_000, agent.hung);
    expect((await runsOf(engine, "think"))[0]?.status).toBe("SUCCEEDED");
    await advanceTo(engine, clock, START + 6 * MINUTE, agent.hung);
    expect(minutes(await runsOf(engine, "think"))).toEqual([1, 6]);
    expect(await reader.slots()).toEqual({ "think/started": 2, "think/skipped": 4 });
    agent.release();
  });

  it("cancel_previous: each slot cancels the unfinished run (reason schedule_overlap) and starts its own", async () => {
    const agent = slowAgent();
    const { engine, clock } = await open({ agents: { thinker: agent.handler } });
    await engine.registerWorkflow(slowFlow);
    await engine.putSchedule({ schedule_id: "c", workflow_id: "slow", cron: "* * * * *", overlap: "cancel_previous" });
    await advanceTo(engine, clock, START + 3 * MINUTE, agent.hung);
    const runs = await runsOf(engine, "c");
    expect(minutes(runs)).toEqual([1, 2, 3]);
    expect(runs.map((r) => r.status)).toEqual(["CANCELLED", "CANCELLED", "RUNNING"]);
    expect(runs[0]?.error).toMatchObject({
      reason: "schedule_overlap",
      message: expect.stringMatching(/cancelled by schedule c: its slot 2026-01-01T00:02:00.000Z starts a new run/),
    });
    expect(runs[0]?.ended_at).toBe(START + 2 * MINUTE);
    agent.release();
  });

  it("allow: every slot starts a run while the others still run", async () => {
    const agent = slowAgent();
    const { engine, clock } = await open({ agents: { thinker: agent.handler } });
    await engine.registerWorkflow(slowFlow);
    await engine.putSchedule({ schedule_id: "a", workflow_id: "slow", cron: "* * * * *", overlap: "allow" });
    await advanceTo(engine, clock, START + 4 * MINUTE, agent.hung);
    const runs = await runsOf(engine, "a");
    expect(minutes(runs)).toEqual([1, 2, 3, 4]);
    expect(runs.every((r) => r.status === "RUNNING")).toBe(true);
    agent.release();
  });
});

describe("schedules: catchup after a 3-hour outage", () => {
  /** Every 15 minutes from START; the engine closes after 00:30 and a new one opens at 03:40. */
  async function outage(
    catchup: "none" | "latest" | "all",
    extra: { catchup_limit?: number; overlap?: "allow" | "skip" } = {},
  ) {
    const agents = { writer: () => ({ ok: true }) };
    const first = await open({ agents });
    await first.engine.registerWorkflow(quickFlow);
    await first.engine.putSchedule({ schedule_id: "q", workflow_id: "quick", cron: "*/15 * * * *", catchup, ...extra });
    await advanceTo(first.engine, first.clock, START + 35 * MINUTE);
    expect(minutes(await runsOf(first.engine, "q"))).toEqual([15, 30]);
    await first.engine.close();
    const clock = new ManualClock(START + 3 * HOUR + 40 * MINUTE);
    const second = await testEngine({ ...QUIET, agents, clock, database: first.database });
    await advanceTo(second.engine, clock, START + 4 * HOUR);
    return { engine: second.engine, runs: await runsOf(second.engine, "q") };
  }

  it("latest (the default): one run for the most recent missed slot, then on time", async () => {
    const { engine, runs } = await outage("latest");
    expect(minutes(runs)).toEqual([15, 30, 3 * 60 + 30, 3 * 60 + 45, 4 * 60]);
    // Started when the engine came back, at 03:40, for the 03:30 slot.
    expect(runs[2]?.created_at).toBe(START + 3 * HOUR + 40 * MINUTE);
    expect((await engine.getSchedule("q")).last_slot_at).toBe(START + 4 * HOUR);
  });

  it("all: every missed slot, oldest first, bounded by catchup_limit (the most recent)", async () => {
    const all = await outage("all", { overlap: "allow" });
    // 00:45 .. 03:30 missed: 12 slots, all started by the first sweep at 03:40.
    const missed = Array.from({ length: 12 }, (_, i) => 45 + i * 15);
    expect(minutes(all.runs)).toEqual([15, 30, ...missed, 225, 240]);
    expect(all.runs.slice(2, 14).every((r) => r.created_at === START + 3 * HOUR + 40 * MINUTE)).toBe(true);
    const limited = await outage("all", { overlap: "allow", catchup_limit: 3 });
    expect(minutes(limited.runs)).toEqual([15, 30, 180, 195, 210, 225, 240]);
  });

  it("all with overlap skip (the default): the first missed slot runs, the others are skipped while it does", async () => {
    const { runs } = await outage("all");
    expect(minutes(runs)).toEqual([15, 30, 45, 225, 240]);
  });

  it("none: a slot more than 60 s late is not fired; the next is", async () => {
    const { runs } = await outage("none");
    expect(minutes(runs)).toEqual([15, 30, 225, 240]);
  });
});

describe("schedules: slots that cannot start", () => {
  it("an input that no longer matches the latest version's input_schema: the slot is handled, logged, not fired", async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const { engine, clock } = await open({ agents: { writer: () => ({ ok: true }) }, logger });
    await engine.registerWorkflow(quickFlow);
    await engine.putSchedule({ schedule_id: "v", workflow_id: "quick", cron: "* * * * *", input: { n: 1 } });
    await advanceTo(engine, clock, START + MINUTE);
    // A new version asks for a string; the schedule still sends a number.
    await engine.registerWorkflow({
      ...quickFlow,
      input_schema: { type: "object", properties: { n: { type: "string" } } },
    });
    await advanceTo(engine, clock, START + 3 * MINUTE);
    expect(minutes(await runsOf(engine, "v"))).toEqual([1]);
    expect(await engine.getSchedule("v")).toMatchObject({
      last_slot_at: START + 3 * MINUTE,
      next_fire_at: START + 4 * MINUTE,
    });
    const warned = lines.filter((l) => l.schedule_id === "v");
    expect(warned.map((l) => l.slot)).toEqual(["2026-01-01T00:02:00.000Z", "2026-01-01T00:03:00.000Z"]);
    expect(warned[0]).toMatchObject({
      level: 40,
      workflow_id: "quick",
      version: 2,
      msg: expect.stringMatching(/its input does not match the workflow's input_schema/),
    });
    // Pinned to version 1, it fires again.
    await engine.putSchedule({
      schedule_id: "v",
      workflow_id: "quick",
      version: 1,
      cron: "* * * * *",
      input: { n: 1 },
    });
    await advanceTo(engine, clock, START + 4 * MINUTE);
    expect(minutes(await runsOf(engine, "v"))).toEqual([1, 4]);
  });
});
