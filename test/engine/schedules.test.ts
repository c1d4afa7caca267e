/**
 * Schedules firing on the manual clock (DESIGN §11.5), on SQLite and on PostgreSQL: one run per
 * slot, DST in a named zone, overlap, catchup after an outage, pause and resume.
 */
import { describe, expect, it } from "vitest";
import { type Engine, ManualClock, type Run } from "../../src/index.js";
import { onPostgres, testEngine } from "../helpers.js";
import { advanceTo, idle } from "./schedule-clock.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
// The periodic sweep and heartbeat rare: slots fire on the engine's wake-up timer (nextDue).
const QUIET = { sweepIntervalMs: 7 * HOUR, heartbeatIntervalMs: 7 * HOUR, engineTimeoutMs: 21 * HOUR };

const report = { id: "report", nodes: [{ node_id: "write", agent_type: "writer" }] };
const iso = (t: number) => new Date(t).toISOString();

/** Every run the schedule started, oldest first (by slot: the idempotency key's time). */
async function runsOf(engine: Engine, scheduleId: string): Promise<Run[]> {
  const runs: Run[] = [];
  for (let before: string | undefined; ; ) {
    const page = await engine.listRuns({ schedule_id: scheduleId, limit: 500, ...(before ? { before } : {}) });
    runs.push(...page);
    if (page.length < 500) break;
    before = page[page.length - 1]?.run_id;
  }
  return runs.sort((a, b) => (a.idempotency_key ?? "").localeCompare(b.idempotency_key ?? ""));
}

const slotOf = (r: Run) => Date.parse((r.idempotency_key ?? "").replace(/^skein:schedule:[^:]+:/, ""));

async function open(start: number, options: Parameters<typeof testEngine>[0] = {}) {
  const clock = new ManualClock(start);
  const t = await testEngine({ ...QUIET, agents: { writer: () => ({ ok: true }) }, ...options, clock });
  await t.engine.registerWorkflow(report);
  return t;
}

describe("schedules: firing", () => {
  // A simulated day on SQLite; six hours on PostgreSQL, where each slot's run costs round trips
  // (the same firing code over the store's schedule facet: 50 s of a CI run for the whole day).
  const SPAN = onPostgres ? 6 * HOUR : DAY;
  const SLOTS = SPAN / MINUTE;
  it(`an every-minute schedule over ${SPAN / HOUR} simulated hours starts ${SLOTS} runs, one per minute, each key once`, async () => {
    const start = Date.UTC(2026, 0, 1);
    const { engine, clock } = await open(start);
    await engine.putSchedule({ schedule_id: "minutely", workflow_id: "report", cron: "* * * * *" });
    await advanceTo(engine, clock, start + SPAN);
    const runs = await runsOf(engine, "minutely");
    expect(runs).toHaveLength(SLOTS);
    expect(new Set(runs.map((r) => r.idempotency_key)).size).toBe(SLOTS);
    expect(runs.map(slotOf)).toEqual(Array.from({ length: SLOTS }, (_, i) => start + (i + 1) * MINUTE));
    expect(runs[0]).toMatchObject({
      schedule_id: "minutely",
      idempotency_key: `skein:schedule:minutely:${iso(start + MINUTE)}`,
      status: "SUCCEEDED",
      // Started at its slot: the wake-up timer, not a sweep tick, fired it.
      created_at: start + MINUTE,
    });
    expect(runs.every((r) => r.status === "SUCCEEDED" && r.created_at === slotOf(r))).toBe(true);
    const s = await engine.getSchedule("minutely");
    expect(s).toMatchObject({
      last_slot_at: start + SPAN,
      last_run_id: runs[SLOTS - 1]?.run_id,
      next_fire_at: start + SPAN + MINUTE,
    });
    const [first] = await engine.listEvents(runs[0]?.run_id as string);
    expect(first).toMatchObject({ type: "run.started", data: { schedule_id: "minutely", slot: iso(start + MINUTE) } });
  }, 180_000);

  it("fires 30 2 * * * in Europe/Berlin once on the spring-forward day (at 03:00 CEST) and once on the fall-back day (the first 02:30)", async () => {
    const start = Date.UTC(2026, 2, 27); // Friday before the last Sunday of March
    const { engine, clock } = await open(start);
    await engine.putSchedule({
      schedule_id: "berlin",
      workflow_id: "report",
      cron: "30 2 * * *",
      timezone: "Europe/Berlin",
    });
    await advanceTo(engine, clock, start + 4 * DAY);
    expect((await runsOf(engine, "berlin")).map((r) => iso(slotOf(r)))).toEqual([
      "2026-03-27T01:30:00.000Z", // 02:30 CET
      "2026-03-28T01:30:00.000Z",
      "2026-03-29T01:00:00.000Z", // 02:30 does not exist: 03:00 CEST, the first valid time after the gap
      "2026-03-30T00:30:00.000Z", // 02:30 CEST
    ]);
    // The fall-back day: 02:30 happens twice (CEST, then CET); a fixed-time job runs once, at the first.
    await engine.pauseSchedule("berlin");
    const autumn = Date.UTC(2026, 9, 24);
    await advanceTo(engine, clock, autumn);
    await engine.resumeSchedule("berlin");
    await advanceTo(engine, clock, autumn + 3 * DAY);
    expect((await runsOf(engine, "berlin")).slice(4).map((r) => iso(slotOf(r)))).toEqual([
      "2026-10-24T00:30:00.000Z", // 02:30 CEST
      "2026-10-25T00:30:00.000Z", // the first 02:30 (CEST); not 01:30Z, the second (CET)
      "2026-10-26T01:30:00.000Z", // 02:30 CET
    ]);
  }, 60_000);

  it("an interval cron in Europe/Berlin skips the spring gap and runs both repeated half hours in autumn", async () => {
    const spring = Date.UTC(2026, 2, 29, 0, 15);
    const { engine, clock } = await open(spring);
    await engine.putSchedule({
      schedule_id: "half",
      workflow_id: "report",
      cron: "*/30 1-3 * * *",
      timezone: "Europe/Berlin",
    });
    await advanceTo(engine, clock, spring + 3 * HOUR);
    // 01:30 CET (00:30Z), then 02:00 and 02:30 do not exist, then 03:00 and 03:30 CEST.
    expect((await runsOf(engine, "half")).map((r) => iso(slotOf(r)))).toEqual([
      "2026-03-29T00:30:00.000Z",
      "2026-03-29T01:00:00.000Z",
      "2026-03-29T01:30:00.000Z",
    ]);
    await engine.deleteSchedule("half");
    const autumn = Date.UTC(2026, 9, 25, 0, 15); // 02:15 CEST on the fall-back day
    await advanceTo(engine, clock, autumn);
    await engine.putSchedule({
      schedule_id: "half-autumn",
      workflow_id: "report",
      cron: "*/30 1-3 * * *",
      timezone: "Europe/Berlin",
    });
    await advanceTo(engine, clock, autumn + 3 * HOUR);
    expect((await runsOf(engine, "half-autumn")).map((r) => iso(slotOf(r)))).toEqual([
      "2026-10-25T00:30:00.000Z", // 02:30 CEST
      "2026-10-25T01:00:00.000Z", // 02:00 CET: the hour again
      "2026-10-25T01:30:00.000Z", // 02:30 CET
      "2026-10-25T02:00:00.000Z", // 03:00 CET
      "2026-10-25T02:30:00.000Z",
    ]);
  }, 60_000);

  it("pause stops firing and resume does not catch up the paused time", async () => {
    const start = Date.UTC(2026, 0, 1);
    const { engine, clock } = await open(start);
    await engine.putSchedule({ schedule_id: "m", workflow_id: "report", cron: "* * * * *", catchup: "all" });
    await advanceTo(engine, clock, start + 3 * MINUTE);
    await engine.pauseSchedule("m");
    await advanceTo(engine, clock, start + 10 * MINUTE + 30_000);
    expect(await runsOf(engine, "m")).toHaveLength(3);
    await engine.resumeSchedule("m");
    await advanceTo(engine, clock, start + 12 * MINUTE);
    expect((await runsOf(engine, "m")).map((r) => slotOf(r) - start)).toEqual([1, 2, 3, 11, 12].map((m) => m * MINUTE));
  });

  it("putting a schedule again with another cron moves its next slot, and fires on the new cron", async () => {
    const start = Date.UTC(2026, 0, 1);
    const { engine, clock } = await open(start);
    await engine.putSchedule({ schedule_id: "s", workflow_id: "report", cron: "0 * * * *" });
    await advanceTo(engine, clock, start + 10 * MINUTE);
    const { schedule } = await engine.putSchedule({ schedule_id: "s", workflow_id: "report", cron: "*/15 * * * *" });
    expect(schedule.next_fire_at).toBe(start + 15 * MINUTE);
    await advanceTo(engine, clock, start + HOUR);
    expect((await runsOf(engine, "s")).map((r) => (slotOf(r) - start) / MINUTE)).toEqual([15, 30, 45, 60]);
  });

  it("a deleted schedule fires no more; its runs keep schedule_id", async () => {
    const start = Date.UTC(2026, 0, 1);
    const { engine, clock } = await open(start);
    await engine.putSchedule({ schedule_id: "d", workflow_id: "report", cron: "* * * * *" });
    await advanceTo(engine, clock, start + 2 * MINUTE);
    await engine.deleteSchedule("d");
    await advanceTo(engine, clock, start + 10 * MINUTE);
    const runs = await runsOf(engine, "d");
    expect(runs).toHaveLength(2);
    expect(runs.every((r) => r.schedule_id === "d")).toBe(true);
  });

  it("keeps runs without a schedule out of the schedule filter, and gives them schedule_id null", async () => {
    const { engine } = await open(Date.UTC(2026, 0, 1));
    const run = await engine.startRun("report");
    expect(run.schedule_id).toBeNull();
    await idle(engine);
    expect((await engine.getRun(run.run_id)).schedule_id).toBeNull();
    expect(await engine.listRuns({ schedule_id: "none" })).toEqual([]);
  });
});
