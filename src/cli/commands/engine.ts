/** `skein engine`: a headless engine serving every run of the database until SIGINT or SIGTERM. */
import type { Command } from "commander";
import { loadAgents } from "../agents-module.js";
import { openEngine } from "../database.js";
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
      `${examples("skein engine --agents ./agents.ts --db sqlite:./skein.db")}\nLog level: SKEIN_LOG_LEVEL (default info).\n`,
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
        engine.subscribe((e) =>
          logger.info(
            {
              event: e.type,
              run_id: e.run_id,
              node_id: e.node_id,
              visit: e.visit,
              trace_id: e.trace_id,
              seq: e.seq,
              data: e.data,
            },
            e.type,
          ),
        );
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
