/** `skein pause <run_id>` and `skein unpause <run_id>`: hold a run's next attempts, and let them go. */
import type { Command } from "commander";
import type { Run } from "../../core/types.js";
import { getRunOrFail, withClient } from "../database.js";
import { dbOf, examples, RUN_ID_HELP } from "../options.js";
import { printJson, println } from "../output.js";

interface PauseOptions {
  reason?: string;
  by?: string;
  json?: boolean;
}

export function registerPause(program: Command): void {
  program
    .command("pause")
    .summary("pause a running run: none of its attempts starts until unpause")
    .description(
      "pause a running run: no attempt of it starts (running ones finish and are recorded; sleeps and retry times keep counting and take effect on unpause). A finished or compensating run is refused (exit 2)",
    )
    .argument("<run_id>", RUN_ID_HELP)
    .option("--reason <text>", "why, recorded in the run's history")
    .option("--by <name>", "who, recorded in the run's history")
    .option("--json", "print the run as the pause left it, as JSON")
    .addHelpText(
      "after",
      examples(`skein pause 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f --reason "provider outage" --by ops@acme.com`),
    )
    .action((given: string, options: PauseOptions, command: Command) => act("pause", given, options, command));

  program
    .command("unpause")
    .summary("resume a paused run: its ready nodes start")
    .description(
      "resume a paused run (the API's resumeRun): its ready nodes start, and a node paused by on_exhausted gets one more attempt. skein resume is another thing: it recovers a dead engine's run and follows it",
    )
    .argument("<run_id>", RUN_ID_HELP)
    .option("--by <name>", "who, recorded in the run's history")
    .option("--json", "print the run as JSON")
    .addHelpText("after", examples("skein unpause 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f"))
    .action((given: string, options: PauseOptions, command: Command) => act("resume", given, options, command));
}

async function act(action: "pause" | "resume", given: string, options: PauseOptions, command: Command) {
  const db = dbOf(command);
  const who = {
    ...(options.by === undefined ? {} : { by: options.by }),
    ...(options.reason === undefined ? {} : { reason: options.reason }),
  };
  const run = await withClient(db, async (client) => {
    const { run_id } = await getRunOrFail(client, given, db);
    return action === "pause" ? client.pauseRun(run_id, who) : client.resumeRun(run_id, who);
  });
  if (options.json) return printJson(run);
  println(describePause(run));
}

/** `run <id> RUNNING, paused by ops: provider outage`, or `run <id> RUNNING`. */
export function describePause(run: Run): string {
  const p = run.paused;
  if (p === null) return `run ${run.run_id} ${run.status}`;
  const node =
    p.node_id === undefined
      ? ""
      : ` (node ${p.node_id} needs attention: skein unpause gives it one more attempt, skein fail-node takes its failure path)`;
  return `run ${run.run_id} ${run.status}, paused${p.by ? ` by ${p.by}` : ""}${p.reason ? `: ${p.reason}` : ""}${node}`;
}
