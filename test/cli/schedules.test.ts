/**
 * `skein schedules` (list), `show`, `put <file>` (one schedule or a list), `pause`, `resume`,
 * `delete`: their outputs, --json, and exit code 2 for bad input (a bad cron expression or time
 * zone, an unknown schedule, a file that is not a schedule).
 */
import { describe, expect, it } from "vitest";
import { commandsMs, json, requireBuiltCli, skein, WORKFLOWS, workspace } from "./helpers.js";

requireBuiltCli();

interface ScheduleJson {
  schedule_id: string;
  workflow_id: string;
  cron: string;
  timezone: string;
  paused: boolean;
  next_fire_at: number | null;
  next_fire_at_iso?: string | null;
  next_fire_times?: number[];
}

/** A workspace with the `small` workflow registered, and a helper to run commands on its database. */
async function withWorkflow() {
  const ws = workspace();
  const run = (...args: string[]) => skein([...args, "--db", ws.db], ws.dir);
  const put = await run("workflows", "put", ws.file("small.json", WORKFLOWS.small));
  expect(put.code, put.stderr).toBe(0);
  return { ws, run };
}

describe("skein schedules", () => {
  it(
    "puts a list of schedules, lists them, shows one with its next fire times, pauses, resumes and deletes",
    async () => {
      const { ws, run } = await withWorkflow();
      const empty = await run("schedules");
      expect(empty.code).toBe(0);
      expect(empty.stdout).toBe("no schedules; create one with skein schedules put <file>\n");

      const file = ws.file("schedules.json", [
        { schedule_id: "nightly", workflow_id: "small", cron: "0 2 * * *", timezone: "Europe/Paris" },
        { schedule_id: "weekdays", workflow_id: "small", cron: "0 30 9 * * 1-5", input: { n: 1 }, paused: true },
      ]);
      const put = await run("schedules", "put", file);
      expect(put.code, put.stderr).toBe(0);
      expect(put.stdout).toMatch(
        /^nightly created: next fire \d{4}-\d\d-\d\dT\d\d:00:00\.000Z\nweekdays created: next fire none \(paused\)\n$/,
      );
      const again = await run("schedules", "put", file);
      expect(again.stdout).toMatch(/^nightly replaced: .*\nweekdays replaced: /);

      const list = await run("schedules");
      expect(list.code).toBe(0);
      const [header, ...rows] = list.stdout.trimEnd().split("\n");
      expect(header).toMatch(/^id +workflow +cron +timezone +next fire +last run +paused$/);
      expect(rows).toHaveLength(2);
      expect(rows[0]).toMatch(/^nightly +small +0 2 \* \* \* +Europe\/Paris +\d{4}-\S+ +- +no$/);
      expect(rows[1]).toMatch(/^weekdays +small +0 30 9 \* \* 1-5 +UTC +- +- +yes$/);
      const listed = json<ScheduleJson[]>(await run("schedules", "--json"));
      expect(listed.map((s) => [s.schedule_id, s.paused])).toEqual([
        ["nightly", false],
        ["weekdays", true],
      ]);
      expect(listed[0]?.next_fire_at_iso).toMatch(/T\d\d:00:00\.000Z$/);
      expect(json<ScheduleJson[]>(await run("schedules", "--workflow", "other", "--json"))).toEqual([]);

      const shown = await run("schedules", "show", "nightly");
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toContain("cron:      0 2 * * * (Europe/Paris)");
      const times = shown.stdout.split("next fire times:\n")[1]?.trimEnd().split("\n") ?? [];
      // 02:00 in Paris is 01:00 UTC in winter and 00:00 UTC in summer.
      expect(times).toHaveLength(5);
      for (const t of times) expect(t).toMatch(/^ {2}\d{4}-\d\d-\d\dT0[01]:00:00\.000Z$/);
      const showJson = json<ScheduleJson>(await run("schedules", "show", "nightly", "--json"));
      expect(showJson.next_fire_times).toHaveLength(5);
      expect(showJson.next_fire_times?.[0]).toBe(showJson.next_fire_at);

      const paused = await run("schedules", "pause", "nightly");
      expect(paused.code).toBe(0);
      expect(paused.stdout).toBe("nightly paused\n");
      const resumed = await run("schedules", "resume", "weekdays");
      expect(resumed.code).toBe(0);
      expect(resumed.stdout).toMatch(/^weekdays active: next fire \d{4}-\d\d-\d\dT09:30:00\.000Z\n$/);
      const states = json<ScheduleJson[]>(await run("schedules", "--json")).map((s) => [s.schedule_id, s.paused]);
      expect(states).toEqual([
        ["nightly", true],
        ["weekdays", false],
      ]);

      // No engine ran, so no slot fired: the schedule has no runs yet.
      expect((await run("list", "--schedule", "nightly")).stdout).toBe("no runs\n");

      const deleted = await run("schedules", "delete", "nightly");
      expect(deleted.code).toBe(0);
      expect(deleted.stdout).toBe("nightly deleted\n");
      expect(json<ScheduleJson[]>(await run("schedules", "--json")).map((s) => s.schedule_id)).toEqual(["weekdays"]);
    },
    commandsMs(15),
  );

  it("exits 2 with the problem for a bad cron expression or time zone, and writes nothing", async () => {
    const { ws, run } = await withWorkflow();
    const cron = await run(
      "schedules",
      "put",
      ws.file("bad-cron.json", { schedule_id: "s", workflow_id: "small", cron: "every day" }),
    );
    expect(cron.code).toBe(2);
    expect(cron.stderr).toMatch(/^skein: .*cron/s);
    const zone = await run(
      "schedules",
      "put",
      ws.file("bad-zone.json", { schedule_id: "s", workflow_id: "small", cron: "0 * * * *", timezone: "Mars/Olympus" }),
    );
    expect(zone.code).toBe(2);
    expect(zone.stderr).toContain("Mars/Olympus");
    expect(json<ScheduleJson[]>(await run("schedules", "--json"))).toEqual([]);
  });

  it("names the failing entry of a list and what was written before it", async () => {
    const { ws, run } = await withWorkflow();
    const r = await run(
      "schedules",
      "put",
      ws.file("two.json", [
        { schedule_id: "good", workflow_id: "small", cron: "0 * * * *" },
        { schedule_id: "bad", workflow_id: "small", cron: "0 * * * *", timezone: "Nowhere/Land" },
      ]),
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("two.json, schedule 1: ");
    expect(r.stderr).toContain("the 1 before it were written (good)");
    expect(json<ScheduleJson[]>(await run("schedules", "--json")).map((s) => s.schedule_id)).toEqual(["good"]);
  });

  it("exits 2 for an unknown schedule, a file that is not a schedule, and a missing file", async () => {
    const { ws, run } = await withWorkflow();
    for (const action of ["show", "pause", "resume", "delete"]) {
      const r = await run("schedules", action, "nope");
      expect(r.code, action).toBe(2);
      expect(r.stderr, action).toMatch(/^skein: .*"nope"/);
    }
    const notObject = await run("schedules", "put", ws.file("n.json", [1]));
    expect(notObject.code).toBe(2);
    expect(notObject.stderr).toContain(
      "must hold a schedule object or a non-empty list of them (item 0 is not an object)",
    );
    const missing = await run("schedules", "put", "absent.json");
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe("skein: cannot read schedule file absent.json: no such file\n");
  });
});
