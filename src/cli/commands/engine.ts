/** `skein engine`: a headless engine serving every run of the database until SIGINT or SIGTERM. */
import type { Command } from "commander";
import { loadAgents } from "../agents-module.js";
import { openEngine } from "../database.js";
import { LLM_ENV_HELP } from "../llm-env.js";
import { dbOf, examples } from "../options.js";
import { keepAlive, stopSignal } from "../signals.js";

export function registerEngine(program: Command): void {
  program
    .command("engine")
    .summary("serve every run of the database (headless)")
    .description(
      "run a headless engine that serves every run in the database until SIGINT/SIGTERM; logs one JSON line per event (pino, stdout)",
    )
    .option("--agents <module>", "agents module (.js, .mjs or .ts): its default export maps agent_type to handler")
    .addHelpText(
      "after",
      `${examples("skein engine --agents ./agents.ts --db sqlite:./skein.db")}\nLog level: SKEIN_LOG_LEVEL (default info).\n${LLM_ENV_HELP}\n`,
    )
    .action(async (options: { agents?: string }, command: Command) => {
      const agents = options.agents === undefined ? {} : await loadAgents(options.agents);
      const { pino } = await import("pino");
      const logger = pino({ level: process.env.SKEIN_LOG_LEVEL ?? "info" }, pino.destination({ dest: 1, sync: true }));
      const database = dbOf(command);
      const engine = await openEngine(database, agents, logger);
      const release = keepAlive();
      const stop = stopSignal();
      try {
        engine.subscribe((e) => {
          // Progress is live chatter, not the run's history: the log has the stored events only.
          if (e.type === "node.progress") return;
          const { type, run_id, node_id, visit, trace_id, seq, data } = e;
          logger.info({ event: type, run_id, node_id, visit, trace_id, seq, data }, type);
        });
        logger.info(
          { engine_id: engine.engineId, database, agent_types: Object.keys(agents) },
          "engine started: serving every run of the database until SIGINT or SIGTERM",
        );
        const signal = await stop.received;
        logger.info({ signal }, "stopping: no new attempts; waiting for attempts in flight");
        await engine.close();
        logger.info("engine stopped");
      } finally {
        stop.dispose();
        release();
        await engine.close();
      }
    });
}
