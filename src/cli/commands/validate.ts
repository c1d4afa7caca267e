/** `skein validate <file>`: every problem of a workflow file with its path; exit 0 valid, 2 invalid. */
import type { Command } from "commander";
import type { Problem } from "../../index.js";
import { loadAgents } from "../agents-module.js";
import { library } from "../database.js";
import { readJsonFile } from "../input.js";
import { examples } from "../options.js";
import { CliError, EXIT, printJson, println } from "../output.js";

export function registerValidate(program: Command): void {
  program
    .command("validate")
    .summary("check a workflow file and list every problem")
    .description("check a workflow file: prints every problem with its path (exit 0 valid, 2 invalid)")
    .argument("<file>", "workflow JSON file")
    .option("--agents <module>", "also warn about agent types this agents module does not handle")
    .option("--json", "print { ok, errors, warnings } as JSON")
    .addHelpText(
      "after",
      examples("skein validate content-publish.json", "skein validate content-publish.json --agents ./agents.ts"),
    )
    .action(async (file: string, options: { agents?: string; json?: boolean }) => {
      const definition = readJsonFile(file, "workflow file");
      const agents = options.agents === undefined ? undefined : await loadAgents(options.agents);
      const { validateWorkflow } = await library();
      const result = validateWorkflow(definition, agents ? { knownAgentTypes: Object.keys(agents) } : {});
      if (options.json) {
        printJson({ ok: result.ok, errors: result.errors, warnings: result.warnings });
      } else {
        for (const p of result.errors) println(problemLine(p));
        for (const p of result.warnings) println(`warning: ${problemLine(p)}`);
        if (result.ok) {
          const { id, nodes, triggers = [] } = result.workflow;
          const started = triggers.length === 0 ? "" : `; triggers: ${triggersText(triggers)}`;
          println(`${file}: valid workflow "${id}" (${nodes.length} nodes${started})`);
        }
      }
      if (!result.ok) {
        const count = result.errors.length;
        throw new CliError(`${file} is not a valid workflow: ${count} problem${count === 1 ? "" : "s"}`, EXIT.badInput);
      }
    });
}

/** `nodes[4].depends_on[1]: unknown node "fetch_x"`. */
export function problemLine(p: Problem): string {
  return `${p.path || "(document)"}: ${p.message}`;
}

/** `order.paid (key vip), order.paid`: the events a workflow's triggers start runs on, in their order; `-` for none. */
export function triggersText(triggers: readonly { event: string; key?: string }[]): string {
  if (triggers.length === 0) return "-";
  return triggers.map((t) => (t.key === undefined ? t.event : `${t.event} (key ${t.key})`)).join(", ");
}
