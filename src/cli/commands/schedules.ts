/**
 * `skein schedules` (list), `show <id>`, `put <file>`, `pause|resume|delete <id>`: the
 * schedules of DESIGN §11.5, through a client. Engines fire them; these commands only write and read.
 */
import type { Command } from "commander";
import type { Schedule, ScheduleInput } from "../../index.js";
import { withClient } from "../database.js";
import { readJsonFile } from "../input.js";
import { dbOf, examples } from "../options.js";
import { CliError, formatTime, printJson, println, table } from "../output.js";

const EXAMPLE_FILE = `{ "schedule_id": "nightly-digest", "workflow_id": "digest", "cron": "0 2 * * *", "timezone": "Europe/Paris" }`;

export function registerSchedules(program: Command): void {
  const schedules = program
    .command("schedules")
    .summary("list schedules; put, show, pause, resume, delete one")
    .description(
      "list schedules (id, workflow, cron, time zone, next fire, last run, paused). Engines start a run for each slot of a schedule, once per slot whatever the number of engines",
    )
    // Also show's: commander hands an option after `show <id>` to this, the parent command.
    .option("--json", "print as JSON: the list, or show's schedule")
    .option("--workflow <workflow_id>", "only this workflow's schedules")
    .addHelpText(
      "after",
      examples(
        "skein schedules",
        "skein schedules put nightly.json",
        "skein schedules show nightly-digest",
        "skein schedules pause nightly-digest",
      ),
    )
    .action(async (options: { json?: boolean; workflow?: string }, command: Command) => {
      const list = await withClient(dbOf(command), (client) =>
        client.listSchedules(options.workflow === undefined ? {} : { workflow_id: options.workflow }),
      );
      if (options.json) return printJson(list);
      if (list.length === 0) return println("no schedules; create one with skein schedules put <file>");
      println(
        table(
          ["id", "workflow", "cron", "timezone", "next fire", "last run", "paused"],
          list.map((s) => [
            s.schedule_id,
            s.version === null ? s.workflow_id : `${s.workflow_id} v${s.version}`,
            s.cron,
            s.timezone,
            formatTime(s.next_fire_at),
            s.last_run_id ?? "-",
            s.paused ? "yes" : "no",
          ]),
        ),
      );
    });

  schedules
    .command("show")
    .summary("one schedule with its next 5 fire times")
    .description("one schedule: its settings, last slot and run, and the next 5 fire times")
    .argument("<schedule_id>", "the schedule's id")
    .addHelpText("after", examples("skein schedules show nightly-digest --json"))
    .action(async (id: string, _options: object, command: Command) => {
      const schedule = await withClient(dbOf(command), (client) => client.getSchedule(id));
      if (command.optsWithGlobals().json === true) return printJson(schedule);
      const { next_fire_times, ...rest } = schedule;
      println(describe(rest));
      println("next fire times:");
      if (next_fire_times.length === 0) println("  none (paused: skein schedules resume resumes it)");
      for (const t of next_fire_times) println(`  ${formatTime(t)}`);
    });

  schedules
    .command("put")
    .summary("create or replace schedules from a JSON file")
    .description(
      "create or replace schedules from a JSON file: one schedule object, or a list of them (schedule_id, workflow_id, cron, and optionally timezone, input, overlap, catchup, catchup_limit, version, paused)",
    )
    .argument("<file>", "schedule JSON file")
    .addHelpText("after", `${examples("skein schedules put nightly.json")}\nnightly.json:\n  ${EXAMPLE_FILE}\n`)
    .action(async (file: string, _options: object, command: Command) => {
      const entries = schedulesOf(readJsonFile(file, "schedule file"), file);
      const written = await withClient(
        dbOf(command),
        async (client) => {
          const results: { schedule: Schedule; created: boolean }[] = [];
          for (const [i, entry] of entries.entries()) {
            try {
              results.push(await client.putSchedule(entry));
            } catch (e) {
              throw entries.length === 1 ? e : partialFailure(e, file, i, results);
            }
          }
          return results;
        },
        { mustExist: false },
      );
      if (command.optsWithGlobals().json === true) return printJson(written);
      for (const { schedule, created } of written) {
        println(`${schedule.schedule_id} ${created ? "created" : "replaced"}: next fire ${nextFire(schedule)}`);
      }
    });

  for (const action of ["pause", "resume"] as const) {
    schedules
      .command(action)
      .summary(action === "pause" ? "pause a schedule" : "resume a paused schedule")
      .description(
        action === "pause"
          ? "pause a schedule: no slot fires until it is resumed; runs already started go on"
          : "resume a schedule from the next slot after now: slots that passed while it was paused never fire",
      )
      .argument("<schedule_id>", "the schedule's id")
      .addHelpText("after", examples(`skein schedules ${action} nightly-digest`))
      .action(async (id: string, _options: object, command: Command) => {
        const schedule = await withClient(dbOf(command), (client) =>
          action === "pause" ? client.pauseSchedule(id) : client.resumeSchedule(id),
        );
        if (command.optsWithGlobals().json === true) return printJson(schedule);
        println(`${schedule.schedule_id} ${schedule.paused ? "paused" : `active: next fire ${nextFire(schedule)}`}`);
      });
  }

  schedules
    .command("delete")
    .summary("delete a schedule")
    .description("delete a schedule; the runs it started keep their schedule_id")
    .argument("<schedule_id>", "the schedule's id")
    .addHelpText("after", examples("skein schedules delete nightly-digest"))
    .action(async (id: string, _options: object, command: Command) => {
      await withClient(dbOf(command), (client) => client.deleteSchedule(id));
      println(`${id} deleted`);
    });
}

/** The file's schedules: one object or a list of them. @throws CliError naming the file when it is neither */
function schedulesOf(value: unknown, file: string): ScheduleInput[] {
  const isObject = (v: unknown) => typeof v === "object" && v !== null && !Array.isArray(v);
  const list = Array.isArray(value) ? value : [value];
  const bad = list.findIndex((v) => !isObject(v));
  if (bad >= 0 || list.length === 0) {
    throw new CliError(
      `${file} must hold a schedule object or a non-empty list of them${Array.isArray(value) && bad >= 0 ? ` (item ${bad} is not an object)` : ""}, such as:\n  ${EXAMPLE_FILE}`,
    );
  }
  // The library checks every field, with its path.
  return list as ScheduleInput[];
}

/** A list's failure at entry `i`: which entry, and what the ones before it did (each was written). */
function partialFailure(e: unknown, file: string, i: number, written: readonly { schedule: Schedule }[]): CliError {
  const before =
    written.length === 0
      ? "nothing was written"
      : `the ${written.length} before it were written (${written.map((w) => w.schedule.schedule_id).join(", ")})`;
  const message = e instanceof Error ? e.message : String(e);
  return new CliError(`${file}, schedule ${i}: ${message}\n${before}`);
}

function nextFire(schedule: Schedule): string {
  return schedule.next_fire_at === null ? "none (paused)" : formatTime(schedule.next_fire_at);
}

function describe(s: Schedule): string {
  const rows: [string, string][] = [
    ["schedule", s.schedule_id],
    ["workflow", s.version === null ? `${s.workflow_id} (latest version)` : `${s.workflow_id} v${s.version}`],
    ["cron", `${s.cron} (${s.timezone})`],
    ["overlap", s.overlap],
    ["catchup", s.catchup === "all" ? `all (at most ${s.catchup_limit})` : s.catchup],
    ["paused", s.paused ? "yes" : "no"],
    ["input", JSON.stringify(s.input)],
    ["last slot", formatTime(s.last_slot_at)],
    ["last run", s.last_run_id ?? "-"],
    ["updated", formatTime(s.updated_at)],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${`${k}:`.padEnd(width + 2)}${v}`).join("\n");
}
