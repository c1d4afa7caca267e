/** `skein events <run_id>`: a run's history, as a readable timeline or JSON lines. */
import type { Command } from "commander";
import type { Engine, RunEvent } from "../../index.js";
import { getRunOrFail, withClient } from "../database.js";
import { formatEventLine } from "../live-view.js";
import { dbOf, examples } from "../options.js";
import { formatTime, println } from "../output.js";

const PAGE = 1000;

export function registerEvents(program: Command): void {
  program
    .command("events")
    .summary("print a run's events")
    .description("print a run's events, oldest first: a readable timeline, or JSON lines with --json")
    .argument("<run_id>", "the run")
    .option("--json", "one JSON object per line, one line per event")
    .addHelpText("after", examples("skein events 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f --json | jq .type"))
    .action(async (runId: string, options: { json?: boolean }, command: Command) => {
      await withClient(dbOf(command), async (client) => {
        const run = await getRunOrFail(client, runId, dbOf(command)); // NotFoundError for an unknown run
        if (!options.json)
          println(
            `run ${run.run_id} (${run.workflow_id} v${run.workflow_version}), times since ${formatTime(run.created_at)}`,
          );
        for await (const e of allEvents(client, runId)) {
          println(options.json ? JSON.stringify(e) : formatEventLine(e, run.created_at));
        }
      });
    });
}

async function* allEvents(client: Engine, runId: string): AsyncGenerator<RunEvent> {
  let afterSeq: number | undefined;
  for (;;) {
    const page = await client.listEvents(runId, { limit: PAGE, ...(afterSeq === undefined ? {} : { afterSeq }) });
    yield* page;
    if (page.length < PAGE) return;
    afterSeq = page[page.length - 1]?.seq;
  }
}
