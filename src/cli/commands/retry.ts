/** `skein retry <run_id>`: redrive a FAILED or CANCELLED run from where it stopped. */
import type { Command } from "commander";
import { getRunOrFail, withClient } from "../database.js";
import { dbOf, examples, RUN_ID_HELP } from "../options.js";
import { printJson, println } from "../output.js";

interface RetryOptions {
  from?: string;
  force?: boolean;
  freshSteps?: boolean;
  json?: boolean;
}

export function registerRetry(program: Command): void {
  program
    .command("retry")
    .summary("run a FAILED or CANCELLED run again from where it stopped")
    .description(
      "redrive a FAILED or CANCELLED run: what failed or was cancelled runs again, with everything downstream and every step a compensation undid; other successes are kept. An engine (skein engine) runs it. Any other run is refused (exit 2), and so is a run that needs attention unless --force",
    )
    .argument("<run_id>", RUN_ID_HELP)
    .option("--from <node_id>", "also run this node again (and everything downstream of it)")
    .option(
      "--force",
      "retry a run that needs attention (a compensation failed for good: undo its effect by hand first)",
    )
    .option(
      "--fresh-steps",
      "the failed nodes' new visits start without the durable steps (task.step) their failed visits recorded",
    )
    .option("--json", "print the run as the retry left it, as JSON")
    .addHelpText(
      "after",
      examples(
        "skein retry 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f",
        "skein retry 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f --from charge_card",
      ),
    )
    .action(async (given: string, options: RetryOptions, command: Command) => {
      const db = dbOf(command);
      const { run, again } = await withClient(db, async (client) => {
        const runId = (await getRunOrFail(client, given, db)).run_id;
        const retried = await client.retryRun(runId, {
          ...(options.from === undefined ? {} : { from: options.from }),
          force: options.force === true,
          fresh_steps: options.freshSteps === true,
        });
        // The retry's new visits were made in its transaction, at the run's updated_at.
        const { nodes } = await client.getRun(runId);
        return { run: retried, again: nodes.filter((n) => n.created_at === retried.updated_at).map((n) => n.node_id) };
      });
      if (options.json) return printJson(run);
      println(`run ${run.run_id} ${run.status}; runs again: ${again.join(", ") || "-"}`);
    });
}
