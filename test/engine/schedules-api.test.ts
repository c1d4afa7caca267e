/** Schedules' library API (DESIGN §11.5): put, get, list, pause, resume, delete, and bad input refused precisely. */
import { describe, expect, it } from "vitest";
import { ManualClock, NotFoundError, ValidationError } from "../../src/index.js";
import { testEngine } from "../helpers.js";

const MINUTE = 60_000;
// 2026-01-01T00:00:30Z: half a minute past a slot of an every-minute cron.
const START = Date.UTC(2026, 0, 1, 0, 0, 30);
// The periodic sweep and heartbeat far apart: firing is the wake-up timer's (nextDue) doing.
const QUIET = { sweepIntervalMs: 3_600_000, heartbeatIntervalMs: 3_600_000, engineTimeoutMs: 10_800_000 };

const digest = {
  id: "digest",
  input_schema: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
  nodes: [{ node_id: "write", agent_type: "writer" }],
};

async function open() {
  const clock = new ManualClock(START);
  const t = await testEngine({ ...QUIET, clock, agents: { writer: () => ({ ok: true }) } });
  await t.engine.registerWorkflow(digest);
  return t;
}

/** The problems of a ValidationError, as { path, message }. */
async function problems(p: Promise<unknown>): Promise<{ path: string; message: string }[]> {
  const e = await p.then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(ValidationError);
  return (e as ValidationError).problems;
}

describe("schedules: the API", () => {
  it("puts a schedule with its defaults and its next slot, and gets it with the next 5 fire times", async () => {
    const { engine } = await open();
    const { schedule, created } = await engine.putSchedule({
      schedule_id: "hourly",
      workflow_id: "digest",
      cron: "0 * * * *",
      input: { topic: "agents" },
    });
    expect(created).toBe(true);
    const hour = Date.UTC(2026, 0, 1, 1);
    expect(schedule).toEqual({
      schedule_id: "hourly",
      workflow_id: "digest",
      version: null,
      cron: "0 * * * *",
      timezone: "UTC",
      input: { topic: "agents" },
      overlap: "skip",
      catchup: "latest",
      catchup_limit: 100,
      paused: false,
      next_fire_at: hour,
      last_slot_at: null,
      last_run_id: null,
      scope: null,
      created_at: START,
      updated_at: START,
    });
    const got = await engine.getSchedule("hourly");
    expect(got.next_fire_times).toEqual([0, 1, 2, 3, 4].map((i) => hour + i * 3_600_000));
    expect(await engine.listSchedules()).toEqual([schedule]);
  });

  it("reads the cron in its time zone, with seconds as a sixth field first", async () => {
    const { engine } = await open();
    const berlin = await engine.putSchedule({
      schedule_id: "berlin-9",
      workflow_id: "digest",
      cron: "0 9 * * *",
      timezone: "Europe/Berlin",
      input: { topic: "x" },
    });
    expect(berlin.schedule.next_fire_at).toBe(Date.UTC(2026, 0, 1, 8)); // 09:00 CET
    const seconds = await engine.putSchedule({
      schedule_id: "every-15s",
      workflow_id: "digest",
      cron: "*/15 * * * * *",
      input: { topic: "x" },
    });
    expect(seconds.schedule.next_fire_at).toBe(START + 15_000);
    expect((await engine.getSchedule("every-15s")).next_fire_times).toEqual(
      [1, 2, 3, 4, 5].map((i) => START + i * 15_000),
    );
  });

  it("replaces a schedule: created false, history kept, next_fire_at moved to the new cron's next slot", async () => {
    const { engine, clock } = await open();
    const first = await engine.putSchedule({
      schedule_id: "s",
      workflow_id: "digest",
      cron: "0 * * * *",
      input: { topic: "a" },
    });
    await clock.advance(MINUTE);
    const again = await engine.putSchedule({
      schedule_id: "s",
      workflow_id: "digest",
      cron: "*/5 * * * *",
      input: { topic: "b" },
    });
    expect(again.created).toBe(false);
    expect(again.schedule).toMatchObject({
      cron: "*/5 * * * *",
      input: { topic: "b" },
      created_at: first.schedule.created_at,
      updated_at: START + MINUTE,
      next_fire_at: Date.UTC(2026, 0, 1, 0, 5),
    });
    // The same cron and zone again keeps the slot that is due (a deploy putting every schedule must not lose one).
    await clock.advance(MINUTE);
    const same = await engine.putSchedule({
      schedule_id: "s",
      workflow_id: "digest",
      cron: "*/5 * * * *",
      input: { topic: "c" },
    });
    expect(same.schedule.next_fire_at).toBe(Date.UTC(2026, 0, 1, 0, 5));
    expect(await engine.getSchedule("s")).toMatchObject({ input: { topic: "c" } });
  });

  it("pauses (no next slot, no fire times) and resumes from the next slot after now", async () => {
    const { engine, clock } = await open();
    await engine.putSchedule({ schedule_id: "m", workflow_id: "digest", cron: "* * * * *", input: { topic: "x" } });
    const paused = await engine.pauseSchedule("m");
    expect(paused).toMatchObject({ paused: true, next_fire_at: null });
    expect((await engine.getSchedule("m")).next_fire_times).toEqual([]);
    expect(await engine.pauseSchedule("m")).toEqual(paused); // already paused: unchanged
    await clock.advance(10 * MINUTE);
    const resumed = await engine.resumeSchedule("m");
    expect(resumed).toMatchObject({ paused: false, next_fire_at: Date.UTC(2026, 0, 1, 0, 11) });
    expect(await engine.resumeSchedule("m")).toEqual(resumed);
  });

  it("lists by schedule_id, filtered by workflow", async () => {
    const { engine } = await open();
    await engine.registerWorkflow({ id: "other", nodes: [{ node_id: "a", agent_type: "writer" }] });
    for (const id of ["b", "a", "c"]) {
      await engine.putSchedule({
        schedule_id: id,
        workflow_id: id === "c" ? "other" : "digest",
        cron: "@daily",
        input: { topic: id },
      });
    }
    expect((await engine.listSchedules()).map((s) => s.schedule_id)).toEqual(["a", "b", "c"]);
    expect((await engine.listSchedules({ workflow_id: "other" })).map((s) => s.schedule_id)).toEqual(["c"]);
  });

  it("deletes a schedule; an unknown one is NotFoundError everywhere", async () => {
    const { engine } = await open();
    await engine.putSchedule({ schedule_id: "gone", workflow_id: "digest", cron: "@hourly", input: { topic: "x" } });
    await engine.deleteSchedule("gone");
    expect(await engine.listSchedules()).toEqual([]);
    for (const call of [
      () => engine.getSchedule("gone"),
      () => engine.deleteSchedule("gone"),
      () => engine.pauseSchedule("gone"),
      () => engine.resumeSchedule("gone"),
    ]) {
      await expect(call()).rejects.toThrow(NotFoundError);
    }
    await expect(engine.getSchedule("gone")).rejects.toThrow(/schedule "gone" does not exist/);
  });

  it("refuses a bad cron or time zone with the path and croner's reason", async () => {
    const { engine } = await open();
    const base = { schedule_id: "bad", workflow_id: "digest", input: { topic: "x" } };
    expect(await problems(engine.putSchedule({ ...base, cron: "61 * * * *" }))).toEqual([
      {
        path: "cron",
        message: expect.stringMatching(/"61 \* \* \* \*" is not a cron expression: Invalid value for minute: 61/),
      },
    ]);
    expect(await problems(engine.putSchedule({ ...base, cron: "* * * *" }))).toEqual([
      { path: "cron", message: expect.stringMatching(/exactly five, six, or seven space separated parts/) },
    ]);
    expect(await problems(engine.putSchedule({ ...base, cron: "* * * * * * *" }))).toEqual([
      { path: "cron", message: expect.stringMatching(/requires exactly 5 or 6 parts/) },
    ]);
    expect(await problems(engine.putSchedule({ ...base, cron: "0 0 30 2 *" }))).toEqual([
      { path: "cron", message: expect.stringMatching(/matches no date after now: it would never fire/) },
    ]);
    expect(await problems(engine.putSchedule({ ...base, cron: "@daily", timezone: "Mars/Olympus" }))).toEqual([
      { path: "timezone", message: expect.stringMatching(/"Mars\/Olympus" is not an IANA time zone name/) },
    ]);
    expect(await engine.listSchedules()).toEqual([]);
  });

  it("refuses an unknown workflow or version, an input not of its input_schema, and bad fields, all at once", async () => {
    const { engine } = await open();
    expect(await problems(engine.putSchedule({ schedule_id: "x", workflow_id: "nope", cron: "@daily" }))).toEqual([
      { path: "workflow_id", message: expect.stringMatching(/workflow "nope" is not registered/) },
    ]);
    expect(
      await problems(
        engine.putSchedule({
          schedule_id: "x",
          workflow_id: "digest",
          version: 7,
          cron: "@daily",
          input: { topic: "x" },
        }),
      ),
    ).toEqual([{ path: "version", message: expect.stringMatching(/has no version 7 \(its latest is 1\)/) }]);
    expect(
      await problems(engine.putSchedule({ schedule_id: "x", workflow_id: "digest", cron: "bad", input: { topic: 3 } })),
    ).toEqual([
      { path: "cron", message: expect.stringMatching(/"bad" is not a cron expression/) },
      { path: "input.topic", message: "must be string" },
    ]);
    const fields = await problems(
      engine.putSchedule({
        schedule_id: "not ok!",
        workflow_id: "digest",
        cron: "@daily",
        overlap: "queue",
        catchup_limit: 0,
        catchup_limt: 5,
      } as never),
    );
    expect(fields.map((p) => p.path).sort()).toEqual(["", "catchup_limit", "overlap", "schedule_id"]);
    expect(fields.find((p) => p.path === "")?.message).toMatch(
      /unknown field "catchup_limt" \(did you mean "catchup_limit"\?\)/,
    );
    expect(fields.find((p) => p.path === "catchup_limit")?.message).toMatch(/must be >= 1, got 0/);
    expect(await engine.listSchedules()).toEqual([]);
  });
});
