#!/usr/bin/env node
/**
 * The `skein` command line (DESIGN §10): a thin layer that parses flags, calls the library and
 * prints. Start-up stays fast because this module loads only commander and the command
 * definitions; each command's action imports the library (SQLite, zod, JSONata, pino) itself.
 */
import { readFileSync } from "node:fs";
import { Command, CommanderError, Option } from "commander";
import { registerBulk } from "./commands/bulk.js";
import { registerCancel } from "./commands/cancel.js";
import { registerCompletion } from "./commands/completion.js";
import { registerEngine } from "./commands/engine.js";
import { registerEvents } from "./commands/events.js";
import { registerFailNode } from "./commands/fail-node.js";
import { registerFork } from "./commands/fork.js";
import { registerGraph } from "./commands/graph.js";
import { registerList } from "./commands/list.js";
import { registerMcp } from "./commands/mcp.js";
import { registerMigrate } from "./commands/migrate.js";
import { registerPause } from "./commands/pause.js";
import { registerPrune } from "./commands/prune.js";
import { registerResume } from "./commands/resume.js";
import { registerRetry } from "./commands/retry.js";
import { registerReview } from "./commands/review.js";
import { registerReviews } from "./commands/reviews.js";
import { registerRun } from "./commands/run.js";
import { registerSchedules } from "./commands/schedules.js";
import { registerSend } from "./commands/send.js";
import { registerServe } from "./commands/serve.js";
import { registerStart } from "./commands/start.js";
import { registerStatus } from "./commands/status.js";
import { registerValidate } from "./commands/validate.js";
import { registerWorker } from "./commands/worker.js";
import { registerWorkflows } from "./commands/workflows.js";
import { DEFAULT_DB, examples, takeListenDatabase } from "./options.js";
import { EXIT, reportError } from "./output.js";

export function buildProgram(): Command {
  const program = new Command("skein")
    .description("Durable workflows for AI-agent task chains: JSON workflows, one SQLite file.")
    .version(packageVersion(), "-V, --version")
    .addOption(
      new Option(
        "--db <url>",
        "database: sqlite:<path>, sqlite::memory:, or postgres://user@host:5432/db (postgresql:// too; ?schema=<name> for a schema)",
      )
        .env("SKEIN_DB")
        .default(DEFAULT_DB),
    )
    .addOption(
      new Option(
        "--listen-database <url>",
        "with --db a PostgreSQL pooler (PgBouncer, transaction mode): a direct connection to the same database, for LISTEN and engine locks",
      ).env("SKEIN_LISTEN_DATABASE"),
    )
    .hook("preAction", (_program, action) => takeListenDatabase(action))
    .exitOverride()
    .configureHelp({ showGlobalOptions: true })
    .showHelpAfterError("(skein --help lists the commands; skein <command> --help shows one)")
    .configureOutput({ outputError: (text, write) => write(`skein: ${text.replace(/^error: /, "")}`) })
    .addHelpText(
      "after",
      `${examples(
        "skein validate content-publish.json",
        `skein run content-publish.json --agents ./agents.ts --input '{"topic":"agents"}'`,
        "skein list --status FAILED",
      )}\nExit codes: 0 ok (run SUCCEEDED), 1 run FAILED or CANCELLED, 2 bad input or a refused request (conflict), 130 stopped by a signal.\n`,
    );
  // Registered after the settings above, which subcommands inherit.
  for (const register of [
    registerValidate,
    registerGraph,
    registerRun,
    registerResume,
    registerEngine,
    registerStart,
    registerStatus,
    registerList,
    registerEvents,
    registerReviews,
    registerReview,
    registerCancel,
    registerPause,
    registerFailNode,
    registerRetry,
    registerBulk,
    registerFork,
    registerMigrate,
    registerPrune,
    registerSend,
    registerWorkflows,
    registerSchedules,
    registerServe,
    registerWorker,
    registerMcp,
    registerCompletion,
  ]) {
    register(program);
  }
  return program;
}

function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      version?: string;
    };
    return pkg.version ?? "unknown";
  } catch {
    return "unknown";
  }
}

/** Help and version exit 0; commander's own usage errors (already printed) exit 2. */
function commanderExitCode(e: CommanderError): number {
  if (e.code === "commander.helpDisplayed" || e.code === "commander.version") return EXIT.ok;
  return EXIT.badInput;
}

// `skein events <id> | head`: a closed pipe ends the output, quietly.
process.stdout.on("error", (e: NodeJS.ErrnoException) => {
  if (e.code === "EPIPE") process.exit(process.exitCode ?? EXIT.ok);
  throw e;
});

try {
  await buildProgram().parseAsync(process.argv);
} catch (e) {
  process.exitCode = e instanceof CommanderError ? commanderExitCode(e) : reportError(e);
}
