/**
 * Schedules and the engine's keys and scopes (DESIGN §13.1), on the manual clock, on SQLite and
 * on PostgreSQL: a slot whose key another run holds starts nothing, says so in the log and never
 * becomes `last_run_id`; a schedule put with a scope starts runs that carry it, so their children
 * outside it fail `out_of_scope`.
 */
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/index.js";
import { capturedLogger, sqlOn, testEngine } from "../helpers.js";
import { advanceTo } from "./schedule-clock.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const QUIET = { sweepIntervalMs: 7 * HOUR, heartbeatIntervalMs: 7 * HOUR, engineTimeoutMs: 21 * HOUR };
const START = Date.UTC(2026, 0, 1);
const SLOT = START + 3 * HOUR; // the first slot of 0 3 * * *

const report = { id: "report", nodes: [{ node_id: "write", agent_type: "writer" }] };

async function open() {
  const clock = new ManualClock(START);
  const { logger, lines } = capturedLogger();
  const t = await testEngine({ ...QUIET, clock, logger, agents: { writer: () => ({ ok: true }) } });
  await t.engine.registerWorkflow(report);
  return { ...t, lines };
}

describe("schedules: engine keys and scopes", () => {
  it("starts nothing for a slot whose key another run holds, logs it, and keeps last_run_id", async () => {
    const { engine, clock, database, lines } = await open();
    await engine.putSchedule({ schedule_id: "nightly", workflow_id: "report", cron: "0 3 * * *" });
    // Another run under the slot's key: written beside the engine (a client cannot write skein: keys).
    const squatter = await engine.startRun("report", { idempotency_key: "mine" });
    await engine.waitForRun(squatter.run_id);
    const key = `skein:schedule:nightly:${new Date(SLOT).toISOString()}`;
    await sqlOn(database, "UPDATE runs SET idempotency_key = $1 WHERE run_id = $2", [key, squatter.run_id]);

    await advanceTo(engine, clock, SLOT + HOUR);
    expect(await engine.listRuns({ schedule_id: "nightly" })).toEqual([]);
    expect(await engine.getSchedule("nightly")).toMatchObject({
      last_slot_at: SLOT,
      last_run_id: null,
      next_fire_at: SLOT + DAY,
    });
    const warning = lines.find((l) => String(l.msg).includes("another run holds its idempotency key"));
    expect(warning).toMatchObject({ schedule_id: "nightly", slot: new Date(SLOT).toISOString() });
    expect(String(warning?.problem)).toContain(`held by run ${squatter.run_id}`);
    expect((await engine.getRun(squatter.run_id)).idempotency_key).toBe(key); // left as it was

    // The next slot is the schedule's own again.
    await advanceTo(engine, clock, SLOT + DAY + HOUR);
    const [run] = await engine.listRuns({ schedule_id: "nightly" });
    expect(run?.status).toBe("SUCCEEDED");
    expect((await engine.getSchedule("nightly")).last_run_id).toBe(run?.run_id);
  });

  it("starts runs with the schedule's scope: a child outside it fails out_of_scope, one inside runs", async () => {
    const { engine, clock } = await open();
    await engine.registerWorkflow({ ...report, id: "team-b-payroll" });
    await engine.registerWorkflow({ ...report, id: "team-a-line" });
    // Registered by the library (unscoped), so its static child outside team-a-* is refused only at run time.
    await engine.registerWorkflow({
      id: "team-a-batch",
      nodes: [
        { node_id: "line", agent_type: "workflow", payload: { workflow_id: "team-a-line" } },
        {
          node_id: "payroll",
          agent_type: "workflow",
          depends_on: ["line"],
          payload: { workflow_id: "team-b-payroll" },
        },
      ],
    });
    await engine.putSchedule(
      { schedule_id: "batch", workflow_id: "team-a-batch", cron: "0 3 * * *" },
      { scope: ["team-a-*"] },
    );
    await advanceTo(engine, clock, SLOT + HOUR);
    const [run] = await engine.listRuns({ schedule_id: "batch" });
    expect(run).toMatchObject({ status: "FAILED", scope: ["team-a-*"] });
    const got = await engine.getRun(run?.run_id as string);
    expect(got.nodes.find((n) => n.node_id === "line")).toMatchObject({ state: "SUCCEEDED" });
    const payroll = got.nodes.find((n) => n.node_id === "payroll");
    expect(payroll).toMatchObject({ state: "FAILED", reason: "out_of_scope" });
    expect(payroll?.error?.message).toContain('workflow "team-b-payroll" is outside this run\'s scope (team-a-*');
    expect(await engine.listRuns({ workflow_id: "team-b-payroll" })).toEqual([]);
    // The child in scope carries the scope too.
    const [line] = await engine.listRuns({ workflow_id: "team-a-line" });
    expect(line?.scope).toEqual(["team-a-*"]);
  });
});
