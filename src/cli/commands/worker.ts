/** `skein worker`: an agents module as an external worker of a remote `skein serve`, until SIGINT or SIGTERM. */
import { type Command, InvalidArgumentError } from "commander";
import { loadAgents } from "../agents-module.js";
import { examples } from "../options.js";
import { CliError } from "../output.js";
import { stopSignal } from "../signals.js";

interface WorkerOptions {
  server: string;
  agents: string;
  token?: string;
  concurrency: number;
  workerId?: string;
  leaseSeconds: number;
}

export function registerWorker(program: Command): void {
  program
    .command("worker")
    .summary("run an agents module against a remote skein serve")
    .description(
      "claim tasks of the agents module's agent types from a skein serve over HTTP, run them (heartbeats while they run), report the results; SIGINT/SIGTERM stops claiming and waits for the tasks in flight",
    )
    .requiredOption("--server <url>", "the server's base URL, e.g. http://127.0.0.1:8080")
    .requiredOption(
      "--agents <module>",
      "agents module (.js, .mjs or .ts): its default export maps agent_type to handler",
    )
    .option("--token <token>", "bearer token (role agent); else SKEIN_TOKEN")
    .option("--concurrency <n>", "most tasks running at once", positiveInt, 4)
    .option("--worker-id <id>", "names this worker in the runs' events (default <host>-<pid>)")
    .option("--lease-seconds <s>", "lease of a claimed task; heartbeats go every third of it", positiveInt, 30)
    .addHelpText(
      "after",
      `${examples("skein worker --server http://127.0.0.1:8080 --agents ./agents.ts --token $AGENT_TOKEN --concurrency 8")}\nThe token may come from SKEIN_TOKEN instead of --token (it stays out of the process list).\nSKEIN_SECRET_<NAME> variables are the secrets its agents may declare (defineAgent({ secrets: ["NAME"] }, handler)).\n`,
    )
    .action(async (options: WorkerOptions) => {
      let server: URL;
      try {
        server = new URL(options.server);
      } catch {
        throw new CliError(`--server ${options.server} is not a URL: write e.g. http://127.0.0.1:8080`);
      }
      const agents = await loadAgents(options.agents);
      const { HttpWorker } = await import("../../worker/http-worker.js");
      const { secretsFromEnv } = await import("../../engine/attempts/secrets.js");
      const token = options.token ?? process.env.SKEIN_TOKEN;
      const worker = new HttpWorker({
        server: server.toString(),
        agents,
        concurrency: options.concurrency,
        secrets: secretsFromEnv(),
        leaseSeconds: options.leaseSeconds,
        ...(token ? { token } : {}),
        ...(options.workerId ? { workerId: options.workerId } : {}),
        log: (line) => process.stderr.write(`skein worker: ${line}\n`),
      });
      const stop = stopSignal();
      process.stderr.write(
        `skein worker: serving ${Object.keys(agents).join(", ")} from ${server.origin} (${options.concurrency} at a time); SIGINT or SIGTERM stops\n`,
      );
      void stop.received.then((signal) => {
        process.stderr.write(`skein worker: ${signal}: no new tasks; finishing the ones in flight\n`);
        worker.stop();
      });
      try {
        await worker.run();
      } catch (e) {
        throw new CliError(`the server refused this worker: ${(e as Error).message}`);
      } finally {
        stop.dispose();
      }
      const { completed, failed, lost } = worker.counts;
      process.stderr.write(`skein worker: stopped (${completed} completed, ${failed} failed, ${lost} lost)\n`);
    });
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("expected a whole number, at least 1.");
  return n;
}
