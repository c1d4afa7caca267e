/** `skein list`: runs, newest first. */
import { type Command, InvalidArgumentError, Option } from "commander";
import { RUN_STATUSES } from "../../core/states.js";
import { parseDuration } from "../../engine/retention.js";
import { withClient } from "../database.js";
import { collectTag, dbOf, examples } from "../options.js";
import { formatMs, formatTime, printJson, println, table } from "../output.js";

interface ListOptions {
  status?: (typeof RUN_STATUSES)[number];
  workflow?: string;
  schedule?: string;
  search?: string;
  id?: string;
  since?: number;
  tag?: Record<string, string>;
  paused?: boolean;
  limit: number;
  json?: boolean;
}

export function registerList(program: Command): void {
  program
    .command("list")
    .summary("list runs, newest first")
    .description("list runs, newest first")
    .addOption(new Option("--status <status>", "only runs with this status").choices(RUN_STATUSES))
    .option("--workflow <workflow_id>", "only runs of this workflow")
    .option("--schedule <schedule_id>", "only runs this schedule started")
    .option("--search <text>", "only runs whose input or output contains this text, any case (3 characters or more)")
    .option("--id <text>", "only runs whose run_id contains this (its start, its end or any part)")
    .option("--since <duration>", 'only runs created in the last duration, e.g. "45m", "12h", "7d"', durationMs)
    .option("--tag <name=value>", "only runs carrying this tag (repeat: runs carrying every one)", collectTag)
    .option("--paused", "only paused runs (skein pause, or a node out of retries with on_exhausted: pause)")
    .option("--limit <n>", "at most this many runs (1 to 1000)", positiveInt, 20)
    .option("--json", "print the runs as a JSON array")
    .addHelpText(
      "after",
      examples(
        "skein list --status FAILED --workflow content-publish --limit 5",
        'skein list --search "invoice 4711" --since 7d',
      ),
    )
    .action(async (options: ListOptions, command: Command) => {
      const runs = await withClient(dbOf(command), (client) =>
        client.listRuns({
          limit: options.limit,
          ...(options.status ? { status: options.status } : {}),
          ...(options.workflow ? { workflow_id: options.workflow } : {}),
          ...(options.schedule ? { schedule_id: options.schedule } : {}),
          ...(options.search !== undefined ? { q: options.search } : {}),
          ...(options.id ? { id_contains: options.id } : {}),
          ...(options.since !== undefined ? { created_after: Date.now() - options.since } : {}),
          ...(options.tag !== undefined ? { tags: options.tag } : {}),
          ...(options.paused ? { paused: true } : {}),
        }),
      );
      if (options.json) return printJson(runs);
      if (runs.length === 0) return println("no runs");
      const now = Date.now();
      println(
        table(
          ["run_id", "workflow", "status", "created", "duration"],
          runs.map((r) => [
            r.run_id,
            `${r.workflow_id} v${r.workflow_version}`,
            r.paused ? `${r.status} (paused)` : r.status,
            formatTime(r.created_at),
            formatMs((r.ended_at ?? now) - r.created_at),
          ]),
        ),
      );
    });
}

function durationMs(value: string): number {
  try {
    return parseDuration(value, "--since");
  } catch {
    throw new InvalidArgumentError('expected a duration such as "90s", "45m", "12h" or "30d".');
  }
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 1000)
    throw new InvalidArgumentError("expected a whole number from 1 to 1000.");
  return n;
}
