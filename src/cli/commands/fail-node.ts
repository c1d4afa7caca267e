/** `skein fail-node <run_id> <node_id>`: give up on a node that waits for an attempt, taking its failure path. */
import type { Command } from "commander";
import { getRunOrFail, withClient } from "../database.js";
import { dbOf, examples, RUN_ID_HELP } from "../options.js";
import { printJson, println } from "../output.js";
import { describePause } from "./pause.js";

interface FailNodeOptions {
  reason?: string;
  by?: string;
  json?: boolean;
}

export function registerFailNode(program: Command): void {
  program
    .command("fail-node")
    .summary("fail a node that waits for an attempt, taking its failure path")
    .description(
      "fail a node that waits for an attempt (RETRYING or ready: a node paused by on_exhausted among them) for good: its next_on_failure edges fire, or the run fails. A running, finished or unreached node is refused (exit 2)",
    )
    .argument("<run_id>", RUN_ID_HELP)
    .argument("<node_id>", "the node to fail")
    .option("--reason <text>", "why, recorded in the node's error")
    .option("--by <name>", "who, recorded in the node's error")
    .option("--json", "print the run as JSON")
    .addHelpText(
      "after",
      examples(`skein fail-node 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f call_provider --reason "provider down all day"`),
    )
    .action(async (given: string, nodeId: string, options: FailNodeOptions, command: Command) => {
      const db = dbOf(command);
      const run = await withClient(db, async (client) => {
        const { run_id } = await getRunOrFail(client, given, db);
        return client.failVisit(run_id, nodeId, {
          ...(options.by === undefined ? {} : { by: options.by }),
          ...(options.reason === undefined ? {} : { reason: options.reason }),
        });
      });
      if (options.json) return printJson(run);
      println(`node ${nodeId} FAILED; ${describePause(run)}`);
    });
}
