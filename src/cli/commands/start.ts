/** `skein start <workflow_id>`: start a run for an engine elsewhere (`skein engine`) to run; prints its id. */
import { type Command, InvalidArgumentError, Option } from "commander";
import type { Budget, OnActive } from "../../core/types.js";
import { withClient } from "../database.js";
import { parseInputOption, parseJsonOption } from "../input.js";
import { collectTag, dbOf, examples, parsePriority } from "../options.js";
import { formatTime, println, warn } from "../output.js";

/** `--debounce 30`: seconds, a number above 0. */
function seconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("give a number of seconds above 0, e.g. 30");
  return n;
}

export function registerStart(program: Command): void {
  program
    .command("start")
    .summary("start a run for an engine elsewhere; prints its id")
    .description("start a run of a registered workflow without running it here (an engine runs it); prints the run id")
    .argument("<workflow_id>", "a registered workflow (skein workflows lists them)")
    .option("--input <json|@file>", "run input: JSON text, or @path to a JSON file (default {})")
    .option("--idempotency-key <key>", "the same key returns the same run instead of starting another")
    .option(
      "--budget <json|@file>",
      'the run\'s budget, replacing the workflow\'s: {"max_tokens": n, "max_cost": n} (either or both)',
    )
    .option("--tag <name=value>", "a tag of the run, inherited by its child runs (repeat for more)", collectTag)
    .option("--key <key>", "at most one run of the workflow with this key runs at a time (a user, a conversation)")
    .addOption(
      new Option("--on-active <mode>", "while a run of the key runs: queue behind it, reject, cancel it, or skip")
        .choices(["queue", "reject", "cancel_active", "skip"])
        .default(undefined, "queue"),
    )
    .option(
      "--debounce <seconds>",
      "starts of the key within this window make one run, with the last input, begun when it passes",
      seconds,
    )
    .option(
      "--priority <0-9>",
      "claimed before runs of a higher number (0 first, 9 last; default 5), inherited by its child runs",
      parsePriority,
    )
    .addHelpText(
      "after",
      examples(
        `skein start content-publish --input '{"topic":"agents"}'`,
        "skein start support --tag customer=acme --tag channel=email",
        "skein start triage --priority 1",
        `skein start research --budget '{"max_tokens":100000}'`,
        `skein start chat --key thread-42 --on-active cancel_active --input '{"message":"hi"}'`,
        "skein start reindex --key doc-7 --debounce 30",
      ),
    )
    .action(
      async (
        workflowId: string,
        options: {
          input?: string;
          idempotencyKey?: string;
          budget?: string;
          tag?: Record<string, string>;
          key?: string;
          onActive?: OnActive;
          debounce?: number;
          priority?: number;
        },
        command: Command,
      ) => {
        const input = parseInputOption(options.input);
        const budget = options.budget === undefined ? undefined : parseJsonOption(options.budget, "--budget");
        const run = await withClient(dbOf(command), (client) =>
          client.startRun(workflowId, {
            input,
            ...(options.idempotencyKey === undefined ? {} : { idempotency_key: options.idempotencyKey }),
            // Checked by startRun: a bad figure is a ValidationError naming budget.<field>.
            ...(budget === undefined ? {} : { budget: budget as Budget }),
            ...(options.tag === undefined ? {} : { tags: options.tag }),
            ...(options.key === undefined ? {} : { key: options.key }),
            ...(options.onActive === undefined ? {} : { on_active: options.onActive }),
            ...(options.debounce === undefined ? {} : { debounce_seconds: options.debounce }),
            ...(options.priority === undefined ? {} : { priority: options.priority }),
          }),
        );
        println(run.run_id);
        // The id is the output; why the run waits goes to stderr.
        if (run.queued?.reason === "debounce") warn(`queued: debounced until ${formatTime(run.queued.until ?? null)}`);
        else if (run.queued) warn(`queued behind the running run of key "${run.key}"`);
      },
    );
}
