/**
 * `skein workflows` (registered ids, latest versions, and the events their triggers start runs
 * on) and `skein workflows put <file>`.
 */
import type { Command } from "commander";
import type { WorkflowInput } from "../../definition/workflow-input.js";
import { loadAgents } from "../agents-module.js";
import { library, withClient } from "../database.js";
import { readJsonFile } from "../input.js";
import { dbOf, examples } from "../options.js";
import { CliError, formatTime, printJson, println, table, warn } from "../output.js";
import { problemLine, triggersText } from "./validate.js";

export function registerWorkflows(program: Command): void {
  const workflows = program
    .command("workflows")
    .summary("list registered workflows; put registers one")
    .description(
      "list registered workflows with their latest versions and the events their triggers start runs on; `workflows put <file>` registers one",
    )
    // Also put's: commander hands an option after `put <file>` to this, the parent command.
    .option("--json", "print as JSON: the list ([{ id, version, created_at, triggers }]), or put's result")
    .addHelpText("after", examples("skein workflows", "skein workflows put content-publish.json"))
    .action(async (options: { json?: boolean }, command: Command) => {
      const list = await withClient(dbOf(command), async (client) =>
        Promise.all(
          (await client.listWorkflows()).map(async (w) => {
            const { definition } = await client.getWorkflow(w.id, w.version);
            return { ...w, triggers: definition.triggers ?? [] };
          }),
        ),
      );
      if (options.json) return printJson(list);
      if (list.length === 0) return println("no workflows; register one with skein workflows put <file>");
      println(
        table(
          ["id", "version", "registered", "triggers"],
          list.map((w) => [w.id, String(w.version), formatTime(w.created_at), triggersText(w.triggers)]),
        ),
      );
    });

  workflows
    .command("put")
    .summary("validate and register a workflow file")
    .description("validate and register a workflow file: a new version if its content changed, else unchanged")
    .argument("<file>", "workflow JSON file")
    .option("--agents <module>", "also warn about agent types this agents module does not handle")
    .addHelpText("after", examples("skein workflows put content-publish.json --db sqlite:./skein.db"))
    .action(async (file: string, options: { agents?: string }, command: Command) => {
      const definition = readJsonFile(file, "workflow file");
      const agents = options.agents === undefined ? undefined : await loadAgents(options.agents);
      // The client has no agents, so the warnings come from validating here: about agent types
      // only when a module was given.
      const { validateWorkflow } = await library();
      const checked = validateWorkflow(definition, agents ? { knownAgentTypes: Object.keys(agents) } : {});
      if (!checked.ok) {
        const problems = checked.errors.map((p) => `  ${problemLine(p)}`).join("\n");
        throw new CliError(`${file} is not a valid workflow; nothing was registered:\n${problems}`);
      }
      const registered = await withClient(
        dbOf(command),
        (client) => client.registerWorkflow(definition as WorkflowInput),
        {
          mustExist: false,
        },
      );
      const result = { ...registered, warnings: checked.warnings };
      if (command.optsWithGlobals().json === true) return printJson(result);
      println(`${result.id} v${result.version} ${result.created ? "created" : "unchanged"}`);
      for (const w of result.warnings) warn(`${file}: ${problemLine(w)}`);
    });
}
