/** `skein graph <file|run_id>`: Mermaid flowchart of a workflow, or of a run with its states and path. */
import type { Command } from "commander";
import { graphModel, type RunOverlay, renderMermaid } from "../../definition/mermaid.js";
import { databaseExists, getRunOrFail, library, withClient } from "../database.js";
import { looksLikeFile, readJsonFile } from "../input.js";
import { dbOf, examples, RUN_ID_HELP } from "../options.js";
import { CliError, println } from "../output.js";
import { problemLine } from "./validate.js";

export function registerGraph(program: Command): void {
  program
    .command("graph")
    .summary("print a workflow or a run as a Mermaid flowchart")
    .description("print a workflow (file) or a run (id) as a Mermaid flowchart; a run shows node states and its path")
    .argument("<file|run_id>", `workflow JSON file, or a run in the database (${RUN_ID_HELP})`)
    .addHelpText(
      "after",
      examples(
        "skein graph content-publish.json > flow.mmd",
        "skein graph 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f --db sqlite:./skein.db",
      ),
    )
    .action(async (target: string, _options: unknown, command: Command) => {
      const { validateWorkflow } = await library();
      const draw = (definition: unknown, source: string, run?: RunOverlay) => {
        const result = validateWorkflow(definition);
        if (!result.ok) {
          throw new CliError(
            `${source} is not a valid workflow (see skein validate):\n${result.errors.map((p) => `  ${problemLine(p)}`).join("\n")}`,
          );
        }
        println(renderMermaid(graphModel(result.graph, run)));
      };
      if (looksLikeFile(target)) return draw(readJsonFile(target, "workflow file"), target);
      const db = dbOf(command);
      if (!databaseExists(db)) {
        throw new CliError(`no file ${target}, and no database at ${db} to find a run with that id; pass --db`);
      }
      await withClient(db, async (client) => {
        const run = await getRunOrFail(client, target, db);
        const workflow = await client.getWorkflow(run.workflow_id, run.workflow_version);
        draw(workflow.definition, `workflow ${run.workflow_id} v${run.workflow_version}`, {
          nodes: run.nodes,
          visits: await client.listVisits(run.run_id),
        });
      });
    });
}
