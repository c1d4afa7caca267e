/** `skein start <workflow_id>`: start a run for an engine elsewhere (`skein engine`) to run; prints its id. */
import type { Command } from "commander";
import type { Budget } from "../../core/types.js";
import { withClient } from "../database.js";
import { parseInputOption, parseJsonOption } from "../input.js";
import { collectTag, dbOf, examples, parsePriority } from "../options.js";
import { println } from "../output.js";

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
            ...(options.priority === undefined ? {} : { priority: options.priority }),
          }),
        );
        println(run.run_id);
      },
    );
}
