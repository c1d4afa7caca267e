/** `skein status <run_id>`: a run's status and its nodes. */
import type { Command } from "commander";
import { getRunOrFail, withClient } from "../database.js";
import { dbOf, examples, RUN_ID_HELP } from "../options.js";
import { printJson, println } from "../output.js";
import { runReport } from "../summary.js";

export function registerStatus(program: Command): void {
  program
    .command("status")
    .summary("show a run and its nodes")
    .description(
      "show a run: status, duration, error, a table of its nodes and one of the durable steps its attempts recorded (--json: the run with its nodes)",
    )
    .argument("<run_id>", RUN_ID_HELP)
    .option("--json", "print the run with its nodes as JSON")
    .addHelpText("after", examples("skein status 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f --json"))
    .action(async (given: string, options: { json?: boolean }, command: Command) => {
      await withClient(dbOf(command), async (client) => {
        const run = await getRunOrFail(client, given, dbOf(command));
        if (options.json) printJson(run);
        else {
          const [visits, steps] = await Promise.all([client.listVisits(run.run_id), client.listSteps(run.run_id)]);
          println(runReport(run, visits, Date.now(), steps));
        }
      });
    });
}
