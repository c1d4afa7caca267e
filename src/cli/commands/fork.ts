/** `skein fork <run_id> --from <node>`: a new run that keeps what a run did before a node and runs the rest again. */
import { type Command, InvalidArgumentError } from "commander";
import { getRunOrFail, withClient } from "../database.js";
import { parseJsonOption } from "../input.js";
import { dbOf, examples, RUN_ID_HELP } from "../options.js";
import { printJson, println } from "../output.js";

interface ForkOptions {
  from: string;
  input?: string;
  payload?: Record<string, string>;
  version?: number;
  json?: boolean;
}

/** A repeatable `--payload <node_id>=<json|@file>`, collected by node (the JSON is read once all are given). */
function collectPayload(pair: string, payloads: Record<string, string> = {}): Record<string, string> {
  const at = pair.indexOf("=");
  if (at <= 0) throw new InvalidArgumentError(`expected node_id=json, e.g. --payload 'draft={"tone":"formal"}'.`);
  return { ...payloads, [pair.slice(0, at)]: pair.slice(at + 1) };
}

function parseVersion(value: string): number {
  const version = Number(value);
  if (!Number.isInteger(version) || version < 1) throw new InvalidArgumentError("expected a version number, e.g. 2.");
  return version;
}

export function registerFork(program: Command): void {
  program
    .command("fork")
    .summary("start a new run that keeps what a run did before a node and runs the rest again")
    .description(
      "fork a run, finished or still running: a new run of its workflow keeps, without running them again, the outputs of the nodes before --from, and runs --from and everything downstream of it with the edited input and payloads. The source is not changed. An engine (skein engine) runs the fork; prints its id",
    )
    .argument("<run_id>", RUN_ID_HELP)
    .requiredOption("--from <node_id>", "the node to run again from, with everything downstream of it")
    .option("--input <json|@file>", "the fork's input (default the source's), checked against the input_schema")
    .option(
      "--payload <node_id=json|@file>",
      "a payload for a node the fork runs, replacing its resolved payload (repeat for more)",
      collectPayload,
    )
    .option("--version <n>", "run this version of the workflow (default the source's)", parseVersion)
    .option("--json", "print the new run as JSON")
    .addHelpText(
      "after",
      examples(
        "skein fork 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f --from draft",
        `skein fork 01939a6e --from draft --payload 'draft={"tone":"formal"}' --input '{"topic":"owls"}'`,
      ),
    )
    .action(async (given: string, options: ForkOptions, command: Command) => {
      const db = dbOf(command);
      const input = options.input === undefined ? undefined : parseJsonOption(options.input, "--input");
      const payloads = Object.fromEntries(
        Object.entries(options.payload ?? {}).map(([node, text]) => [node, parseJsonOption(text, `--payload ${node}`)]),
      );
      const run = await withClient(db, async (client) => {
        const { run_id } = await getRunOrFail(client, given, db);
        return client.forkRun(run_id, {
          from: options.from,
          ...(input === undefined ? {} : { input }),
          ...(options.payload === undefined ? {} : { payloads }),
          ...(options.version === undefined ? {} : { version: options.version }),
        });
      });
      if (options.json) return printJson(run);
      println(run.run_id);
    });
}
