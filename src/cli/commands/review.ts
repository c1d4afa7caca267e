/** `skein review <run_id> <node_id> approve|reject`: a person's decision on a human_review node. */
import { Argument, type Command } from "commander";
import type { Visit } from "../../index.js";
import { getRunOrFail, withClient } from "../database.js";
import { parseJsonOption } from "../input.js";
import { dbOf, examples, RUN_ID_HELP } from "../options.js";
import { CliError, printJson, println } from "../output.js";

interface ReviewCliOptions {
  by?: string;
  comment?: string;
  output?: string;
  executionId?: string;
  json?: boolean;
}

export function registerReview(program: Command): void {
  program
    .command("review")
    .summary("approve or reject a node waiting for review")
    .description(
      "decide a human_review node waiting for review: approve succeeds it (the run goes on), reject fails it (next_on_failure routes it, else the run fails and compensates); exactly one decision wins, a second is refused (exit 2)",
    )
    .argument("<run_id>", RUN_ID_HELP)
    .argument("<node_id>", "the human_review node (skein reviews lists those waiting)")
    .addArgument(new Argument("<decision>", "approve or reject").choices(["approve", "reject"]))
    .option("--by <name>", "who decides: one of the node's assignees when it lists some")
    .option("--comment <text>", "why, recorded with the decision")
    .option("--output <json|@file>", "approve only: edited output to pass on, JSON text or @path to a JSON file")
    .option(
      "--execution-id <id>",
      "the review round decided on (skein reviews --json shows it): refused if the node has moved to another round",
    )
    .option("--json", "print the decided node (its visit) as JSON")
    .addHelpText(
      "after",
      examples(
        "skein review 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f approval approve --by ops-lead",
        `skein review 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f approval reject --by finance --comment "card flagged"`,
      ),
    )
    .action(
      async (
        given: string,
        nodeId: string,
        decision: "approve" | "reject",
        options: ReviewCliOptions,
        command: Command,
      ) => {
        const output = options.output === undefined ? undefined : parseJsonOption(options.output, "--output");
        if (output !== undefined && decision === "reject") {
          throw new CliError("--output is for approve: a rejected node has no output to pass on");
        }
        const db = dbOf(command);
        const { runId, visit, status } = await withClient(db, async (client) => {
          const runId = (await getRunOrFail(client, given, db)).run_id;
          const decided = await decide(() =>
            client.review(runId, nodeId, {
              decision,
              ...(options.by === undefined ? {} : { by: options.by }),
              ...(options.comment === undefined ? {} : { comment: options.comment }),
              ...(output === undefined ? {} : { output }),
              ...(options.executionId === undefined ? {} : { execution_id: options.executionId }),
            }),
          );
          return { runId, visit: decided, status: (await client.getRun(runId)).status };
        });
        if (options.json) return printJson(visit);
        println(decidedLine(visit));
        println(`run ${runId} ${status}`);
      },
    );
}

/** The library's refusals, with where to look next. */
async function decide(review: () => Promise<Visit>): Promise<Visit> {
  try {
    return await review();
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (code === "conflict") throw new CliError(`${(e as Error).message}; skein reviews lists what waits for review`);
    if (code === "forbidden") throw new CliError(`${(e as Error).message}; pass one of them as --by`);
    throw e;
  }
}

/** `approval#1 SUCCEEDED (approved by ops-lead)`, `approval#1 FAILED (rejected by finance: card flagged)`. */
function decidedLine(v: Visit): string {
  const output = v.output as { by?: unknown } | null;
  const by = v.state === "SUCCEEDED" && typeof output?.by === "string" ? ` by ${output.by}` : "";
  const why = v.state === "SUCCEEDED" ? `approved${by}` : (v.error?.message ?? v.reason ?? "");
  return `${v.node_id}#${v.visit} ${v.state}${why ? ` (${why})` : ""}`;
}
