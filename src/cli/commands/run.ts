/** `skein run <file|workflow_id>`: start a run and run it here, with live progress, until it ends. */
import type { Command } from "commander";
import type { WorkflowInput } from "../../definition/workflow-input.js";
import { assertAgentsCover, loadAgents } from "../agents-module.js";
import { openEngine } from "../database.js";
import { EventTap, follow } from "../follow.js";
import { looksLikeFile, parseInputOption, readJsonFile } from "../input.js";
import { LLM_ENV_HELP } from "../llm-env.js";
import { dbOf, examples, explicitDb, resumeCommand } from "../options.js";
import { warn } from "../output.js";
import { problemLine } from "./validate.js";

interface RunOptions {
  input?: string;
  agents?: string;
  json?: boolean;
}

export function registerRun(program: Command): void {
  program
    .command("run")
    .summary("start a run and run it here with live progress")
    .description(
      "start a run and run it in this process until it ends, showing live progress (exit 0 SUCCEEDED, 1 FAILED or CANCELLED, 2 bad input; Ctrl-C stops and says how to resume)",
    )
    .argument("<file|workflow_id>", "workflow JSON file (registered first), or the id of a registered workflow")
    .option("--input <json|@file>", "run input: JSON text, or @path to a JSON file (default {})")
    .option("--agents <module>", "agents module (.js, .mjs or .ts): its default export maps agent_type to handler")
    .option("--json", "no live view: print the finished run (with its nodes) as one JSON object")
    .addHelpText(
      "after",
      examples(
        `skein run content-publish.json --agents ./agents.ts --input '{"topic":"agents"}'`,
        "skein run content-publish --agents ./agents.js --input @input.json --json",
      ) + `${LLM_ENV_HELP}\n`,
    )
    .action(async (target: string, options: RunOptions, command: Command) => {
      const input = parseInputOption(options.input);
      const definition = looksLikeFile(target) ? readJsonFile(target, "workflow file") : null;
      const agents = options.agents === undefined ? {} : await loadAgents(options.agents);
      const engine = await openEngine(dbOf(command), agents);
      const tap = new EventTap(engine);
      try {
        let workflowId = target;
        if (definition !== null) {
          await assertAgentsCover(definition, agents, options.agents, target);
          const registered = await engine.registerWorkflow(definition as WorkflowInput); // a file: checked there
          for (const w of registered.warnings) warn(`${target}: ${problemLine(w)}`);
          workflowId = registered.id;
        } else {
          const { definition: stored } = await engine.getWorkflow(target);
          await assertAgentsCover(stored, agents, options.agents, `workflow ${target}`);
        }
        const run = await engine.startRun(workflowId, { input });
        // The first line, so that a caller (or a person) has the id even if this process dies.
        (options.json ? process.stderr : process.stdout).write(`run ${run.run_id} started\n`);
        process.exitCode = await follow(engine, tap, run.run_id, {
          json: options.json === true,
          db: explicitDb(command),
          resume: resumeCommand(command, run.run_id, options.agents),
        });
      } finally {
        tap.close();
        await engine.close();
      }
    });
}
