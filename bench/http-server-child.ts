/**
 * The server process of the http bench (http.ts): `node --import tsx bench/http-server-child.ts <sqlite url>`.
 *
 * Runs an engine with no in-process agents (every node waits for external workers) and the HTTP
 * API on a free loopback port, registers SINGLE_EXTERNAL and DAG8, and prints
 * `{"type":"ready","port":p}`. Commands (JSON lines on stdin):
 * - `{"cmd":"start","runs":n}`: starts n runs of SINGLE_EXTERNAL, then prints `{"type":"started"}`;
 * - `{"cmd":"loop","in_flight":n}`: keeps n runs of DAG8 in flight (a run that ends is replaced);
 * - `{"cmd":"count"}`: prints `{"type":"count","ended":k,"failed":f}`: DAG8 runs ended so far.
 * When stdin closes, the server and the engine are closed and the process exits.
 */
import { createServer } from "../src/http/server.js";
import { createEngine } from "../src/index.js";
import { report, serveCommands } from "./children.js";
import { DAG8, SINGLE_EXTERNAL } from "./workloads.js";

const url = process.argv[2];
if (!url) throw new Error("usage: http-server-child.ts <sqlite url>");

const engine = await createEngine({ database: url, maxConcurrency: 1000 });
await engine.registerWorkflow(SINGLE_EXTERNAL);
await engine.registerWorkflow(DAG8);
const app = await createServer({ engine });
await app.listen({ host: "127.0.0.1", port: 0 });

let looping = false;
let ended = 0;
let failed = 0;
engine.subscribe((e) => {
  if (!looping || e.type === "run.started" || !e.type.startsWith("run.")) return;
  ended += 1;
  if (e.type !== "run.succeeded") failed += 1;
  void engine.startRun(DAG8.id);
});

report({ type: "ready", port: (app.server.address() as { port: number }).port });

serveCommands(
  async (command) => {
    if (command.cmd === "start") {
      const runs = Number(command.runs);
      for (let i = 0; i < runs; i += 500) {
        await Promise.all(Array.from({ length: Math.min(500, runs - i) }, () => engine.startRun(SINGLE_EXTERNAL.id)));
      }
      report({ type: "started" });
    } else if (command.cmd === "loop") {
      looping = true;
      await Promise.all(Array.from({ length: Number(command.in_flight) }, () => engine.startRun(DAG8.id)));
    } else if (command.cmd === "count") {
      report({ type: "count", ended, failed });
    } else throw new Error(`unknown command ${JSON.stringify(command)}`);
  },
  async () => {
    await app.close();
    await engine.close();
    process.exit(0);
  },
);
