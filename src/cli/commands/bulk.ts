/** `skein bulk <cancel|retry|pause|resume|fork|migrate>`: one action on every run a filter matches (DESIGN §16), engine.bulkRuns. */
import { Argument, type Command, InvalidArgumentError, Option } from "commander";
import { RUN_STATUSES } from "../../core/states.js";
import { parseDuration } from "../../engine/retention.js";
import type { BulkAction, BulkAnswer, BulkFilter } from "../../index.js";
import { withClient } from "../database.js";
import { parseJsonOption } from "../input.js";
import { collectTag, dbOf, examples } from "../options.js";
import { CliError, printJson, println } from "../output.js";

const ACTIONS = ["cancel", "retry", "pause", "resume", "fork", "migrate"] as const;

interface BulkOptions {
  workflow?: string;
  workflowVersion?: number;
  status?: (typeof RUN_STATUSES)[number];
  tag?: Record<string, string>;
  since?: number;
  until?: number;
  search?: string;
  id?: string;
  dryRun?: boolean;
  cap?: number;
  reason?: string;
  compensate?: boolean;
  from?: string;
  force?: boolean;
  freshSteps?: boolean;
  by?: string;
  input?: string;
  to?: number;
  json?: boolean;
}

export function registerBulk(program: Command): void {
  program
    .command("bulk")
    .summary("cancel, retry, pause, resume, fork or migrate every run a filter matches")
    .description(
      "cancel (RUNNING runs), retry (FAILED and CANCELLED runs), fork (any, from --from) or migrate (RUNNING runs of --workflow older than --to) every top-level run the filter matches, or pause (RUNNING runs not paused) or resume (paused runs) every run it matches, child runs included; at most --cap a call (default 1000); each run is acted on whole, and one that changed meanwhile is listed as refused. --dry-run counts them first and changes nothing. When more runs match than the cap, it says so: run it again",
    )
    .addArgument(new Argument("<action>", "what to do to each run").choices(ACTIONS))
    .option("--workflow <workflow_id>", "only runs of this workflow")
    // Not --version: that is the program's own, whichever command it follows.
    .option("--workflow-version <n>", "only runs of this version of --workflow", positiveInt("a version"))
    .addOption(new Option("--status <status>", "only runs in this status").choices(RUN_STATUSES))
    .option("--tag <name=value>", "only runs carrying this tag (repeat: runs carrying every one)", collectTag)
    .option(
      "--since <time>",
      'only runs created since: a duration ago ("12h", "7d") or a date ("2026-01-31T08:00Z")',
      time("--since"),
    )
    .option("--until <time>", "only runs created before: a duration ago or a date", time("--until"))
    .option("--search <text>", "only runs whose input or output contains this text, any case (3 characters or more)")
    .option("--id <text>", "only runs whose run_id contains this")
    .option("--dry-run", "count the runs and show the first few; change nothing")
    .option("--cap <n>", "at most this many runs (1 to 10000, default 1000)", positiveInt("the cap"))
    .option("--reason <text>", "cancel: why, recorded as each run's error; pause: why, in each run's history")
    .option("--by <name>", "pause, resume: who, recorded in each run's history")
    .option("--compensate", "cancel: undo what each run did first")
    .option(
      "--from <node_id>",
      "retry: also run this node again, and everything downstream; fork (needed): the node each fork runs again from",
    )
    .option("--input <json>", "fork: the forks' input (default each source's)")
    .option(
      "--to <version>",
      "migrate (needed, with --workflow): the version to move runs to",
      positiveInt("a version"),
    )
    .option("--force", "retry: runs that need attention too")
    .option("--fresh-steps", "retry: new visits start without the failed visits' durable steps")
    .option("--json", "print the answer as JSON")
    .addHelpText(
      "after",
      examples(
        "skein bulk cancel --tag customer=acme --dry-run",
        'skein bulk cancel --workflow content-publish --workflow-version 3 --reason "bad prompt in v3"',
        "skein bulk retry --workflow content-publish --status FAILED --since 12h --cap 5000",
        'skein bulk pause --tag provider=openai --reason "provider outage"',
        "skein bulk migrate --workflow content-publish --to 4 --dry-run",
      ),
    )
    .action(async (kind: (typeof ACTIONS)[number], options: BulkOptions, command: Command) => {
      const answer = await withClient(dbOf(command), (client) =>
        client.bulkRuns({
          filter: filterOf(options),
          action: actionOf(kind, options),
          dry_run: options.dryRun === true,
          ...(options.cap === undefined ? {} : { cap: options.cap }),
        }),
      );
      if (options.json) return printJson(answer);
      println(summary(kind, answer));
    });
}

function filterOf(o: BulkOptions): BulkFilter {
  return {
    ...(o.workflow === undefined ? {} : { workflow_id: o.workflow }),
    ...(o.workflowVersion === undefined ? {} : { workflow_version: o.workflowVersion }),
    ...(o.status === undefined ? {} : { status: o.status }),
    ...(o.tag === undefined ? {} : { tags: o.tag }),
    ...(o.since === undefined ? {} : { created_after: o.since }),
    ...(o.until === undefined ? {} : { created_before: o.until }),
    ...(o.search === undefined ? {} : { q: o.search }),
    ...(o.id === undefined ? {} : { id_contains: o.id }),
  };
}

function actionOf(kind: (typeof ACTIONS)[number], o: BulkOptions): BulkAction {
  const by = o.by === undefined ? {} : { by: o.by };
  if (kind === "pause") return { kind, ...(o.reason === undefined ? {} : { reason: o.reason }), ...by };
  if (kind === "resume") return { kind, ...by };
  if (kind === "fork") {
    if (o.from === undefined)
      throw new CliError("skein bulk fork needs --from <node_id>: the node each fork runs again from");
    return { kind, from: o.from, ...(o.input === undefined ? {} : { input: parseJsonOption(o.input, "--input") }) };
  }
  if (kind === "migrate") {
    if (o.to === undefined) throw new CliError("skein bulk migrate needs --to <version> (and --workflow)");
    return { kind, to_version: o.to };
  }
  if (kind === "cancel") {
    return {
      kind,
      ...(o.reason === undefined ? {} : { reason: o.reason }),
      ...(o.compensate ? { compensate: true } : {}),
    };
  }
  return {
    kind,
    ...(o.from === undefined ? {} : { from: o.from }),
    ...(o.force ? { force: true } : {}),
    ...(o.freshSteps ? { fresh_steps: true } : {}),
  };
}

/** What a person reads: how many, which were refused and why, and whether to run it again. */
function summary(kind: (typeof ACTIONS)[number], a: BulkAnswer): string {
  const runs = (n: number) => `${n.toLocaleString("en-US")} run${n === 1 ? "" : "s"}`;
  const done = {
    cancel: "cancelled",
    retry: "retried",
    pause: "paused",
    resume: "resumed",
    fork: "forked",
    migrate: "migrated",
  }[kind];
  const lines = a.dry_run
    ? [
        `${runs(a.matched)}${a.more ? " (or more)" : ""} would be ${done}${a.matched > 0 ? `, e.g. ${a.run_ids.slice(0, 3).join(", ")}` : ""}`,
      ]
    : [`${runs(a.applied)} ${done}${a.refused.length > 0 ? `, ${a.refused.length} refused:` : ""}`];
  for (const r of a.refused) lines.push(`  ${r.run_id}: ${r.reason}`);
  if (a.more) lines.push(`more runs match than the cap: run it again${a.dry_run ? " (without --dry-run)" : ""}`);
  return lines.join("\n");
}

function positiveInt(what: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`expected ${what} as a whole number from 1.`);
    return n;
  };
}

/** A duration ago ("12h") or a date Date.parse reads, as ms since the epoch. */
function time(option: string) {
  return (value: string): number => {
    try {
      return Date.now() - parseDuration(value, option);
    } catch {
      const at = Date.parse(value);
      if (Number.isFinite(at)) return at;
      throw new InvalidArgumentError(
        'expected a duration such as "45m" or "7d", or a date such as "2026-01-31T08:00Z".',
      );
    }
  };
}
