/** `skein resume <run_id>`: an engine on the database recovers a dead engine's attempts and finishes the run. */
import type { Command } from "commander";
import { assertAgentsCover, loadAgents } from "../agents-module.js";
import { getRunOrFail, openEngine } from "../database.js";
import { EventTap, follow } from "../follow.js";
import { dbOf, examples, explicitDb, RUN_ID_HELP, resumeCommand } from "../options.js";

export function registerResume(program: Command): void {
  program
    .command("resume")
    .summary("recover and finish a run with an engine here")
    .description(
      "start an engine on the database (it recovers what a stopped or killed engine left) and follow a run to its end, like run",
    )
    .argument("<run_id>", `the run to follow (${RUN_ID_HELP})`)
    .option("--agents <module>", "agents module (.js, .mjs or .ts): its default export maps agent_type to handler")
    .option("--json", "no live view: print the finished run (with its nodes) as one JSON object")
    .addHelpText("after", examples("skein resume 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f --agents ./agents.ts"))
    .action(async (given: string, options: { agents?: string; json?: boolean }, command: Command) => {
      const agents = options.agents === undefined ? {} : await loadAgents(options.agents);
      const engine = await openEngine(dbOf(command), agents);
      const tap = new EventTap(engine);
      try {
        const run = await getRunOrFail(engine, given, dbOf(command));
        const runId = run.run_id;
        const { definition } = await engine.getWorkflow(run.workflow_id, run.workflow_version);
        await assertAgentsCover(definition, agents, options.agents, `run ${runId} (workflow ${run.workflow_id})`);
        (options.json ? process.stderr : process.stdout).write(`run ${runId} resumed (${run.status})\n`);
        process.exitCode = await follow(engine, tap, runId, {
          json: options.json === true,
          db: explicitDb(command),
          resume: resumeCommand(command, runId, options.agents),
        });
      } finally {
        tap.close();
        await engine.close();
      }
    });
}
