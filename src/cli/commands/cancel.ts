/** `skein cancel <run_id>`: end a run that is still running, optionally undoing what it did. */
import type { Command } from "commander";
import { getRunOrFail, withClient } from "../database.js";
import { dbOf, examples, RUN_ID_HELP } from "../options.js";
import { printJson, println } from "../output.js";

interface CancelOptions {
  reason?: string;
  compensate?: boolean;
  json?: boolean;
}

export function registerCancel(program: Command): void {
  program
    .command("cancel")
    .summary("cancel a running run")
    .description(
      "cancel a running run: its running nodes are CANCELLED (late results ignored), pending ones SKIPPED; with --compensate, an engine first undoes what the run did (COMPENSATING, then CANCELLED). A finished or compensating run is refused (exit 2)",
    )
    .argument("<run_id>", RUN_ID_HELP)
    .option("--reason <text>", "why, recorded as the run's error (default: cancelled)")
    .option("--compensate", "run the compensations of the steps that took effect, newest first")
    .option("--json", "print the run as the cancel left it, as JSON")
    .addHelpText(
      "after",
      examples(`skein cancel 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f --reason "customer withdrew the order" --compensate`),
    )
    .action(async (given: string, options: CancelOptions, command: Command) => {
      const db = dbOf(command);
      const run = await withClient(db, async (client) => {
        const { run_id } = await getRunOrFail(client, given, db);
        return client.cancelRun(run_id, {
          ...(options.reason === undefined ? {} : { reason: options.reason }),
          compensate: options.compensate === true,
        });
      });
      if (options.json) return printJson(run);
      println(
        run.status === "COMPENSATING"
          ? `run ${run.run_id} COMPENSATING: an engine (skein engine) undoes its steps, then the run is CANCELLED`
          : `run ${run.run_id} ${run.status}`,
      );
    });
}
