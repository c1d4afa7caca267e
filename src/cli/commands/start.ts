/** `skein start <workflow_id>`: start a run for an engine elsewhere (`skein engine`) to run; prints its id. */
import type { Command } from "commander";
import { withClient } from "../database.js";
import { parseInputOption } from "../input.js";
import { dbOf, examples } from "../options.js";
import { println } from "../output.js";

export function registerStart(program: Command): void {
  program
    .command("start")
    .summary("start a run for an engine elsewhere; prints its id")
    .description("start a run of a registered workflow without running it here (an engine runs it); prints the run id")
    .argument("<workflow_id>", "a registered workflow (skein workflows lists them)")
    .option("--input <json|@file>", "run input: JSON text, or @path to a JSON file (default {})")
    .option("--idempotency-key <key>", "the same key returns the same run instead of starting another")
    .addHelpText("after", examples(`skein start content-publish --input '{"topic":"agents"}'`))
    .action(async (workflowId: string, options: { input?: string; idempotencyKey?: string }, command: Command) => {
      const input = parseInputOption(options.input);
      const run = await withClient(dbOf(command), (client) =>
        client.startRun(workflowId, {
          input,
          ...(options.idempotencyKey === undefined ? {} : { idempotency_key: options.idempotencyKey }),
        }),
      );
      println(run.run_id);
    });
}
