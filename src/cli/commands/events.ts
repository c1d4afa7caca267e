/** `skein events <run_id> [--follow]`: a run's history, as a readable timeline or JSON lines. */
import type { Command } from "commander";
import type { Engine, RunEvent } from "../../index.js";
import { getRunOrFail, withClient } from "../database.js";
import { formatEventLine } from "../live-view.js";
import { dbOf, examples, RUN_ID_HELP } from "../options.js";
import { EXIT, exitCodeForStatus, formatTime, jsonLine, println } from "../output.js";
import { keepAlive, stopSignal } from "../signals.js";
import { StoredEvents } from "../stored-events.js";

export function registerEvents(program: Command): void {
  program
    .command("events")
    .summary("print a run's events (--follow: and new ones until it ends)")
    .description(
      "print a run's events, oldest first: a readable timeline, or JSON lines with --json. With --follow, go on printing new events until the run ends (exit 0 SUCCEEDED, 1 FAILED or CANCELLED; Ctrl-C: 130), whichever process runs it",
    )
    .argument("<run_id>", RUN_ID_HELP)
    .option("--json", "one JSON object per line, one line per event")
    .option("-f, --follow", "after the history, print new events as they are stored, until the run ends")
    .addHelpText(
      "after",
      examples(
        "skein events 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f --json | jq .type",
        "skein events 2d1c4b5a6e7f --follow",
      ),
    )
    .action(async (given: string, options: { json?: boolean; follow?: boolean }, command: Command) => {
      await withClient(dbOf(command), async (client) => {
        const run = await getRunOrFail(client, given, dbOf(command));
        if (!options.json)
          println(
            `run ${run.run_id} (${run.workflow_id} v${run.workflow_version}), times since ${formatTime(run.created_at)}`,
          );
        const print = (e: RunEvent) => println(options.json ? jsonLine(e) : formatEventLine(e, run.created_at));
        if (!options.follow) {
          for await (const e of allEvents(client, run.run_id)) print(e);
          return;
        }
        // The history and then what comes, by one reader of the log by seq (nothing twice).
        const stored = new StoredEvents(client, run.run_id, undefined, print);
        process.exitCode = await untilEnd(stored, async () => (await client.getRun(run.run_id)).status);
      });
    });
}

/** Follows until the stored events say the run ended (its status's exit code) or a signal (130). */
async function untilEnd(stored: StoredEvents, status: () => Promise<string>): Promise<number> {
  const release = keepAlive();
  const stop = stopSignal();
  try {
    void stored.read();
    const outcome = await Promise.race([
      stored.ended.then(() => "ended" as const),
      stop.received.then(() => "signal" as const),
    ]);
    if (outcome === "signal") return EXIT.interrupted;
    return exitCodeForStatus(await status());
  } finally {
    stored.stop();
    stop.dispose();
    release();
  }
}

const PAGE = 1000;

async function* allEvents(client: Engine, runId: string): AsyncGenerator<RunEvent> {
  let afterSeq: number | undefined;
  for (;;) {
    const page = await client.listEvents(runId, { limit: PAGE, ...(afterSeq === undefined ? {} : { afterSeq }) });
    yield* page;
    if (page.length < PAGE) return;
    afterSeq = page[page.length - 1]?.seq;
  }
}
