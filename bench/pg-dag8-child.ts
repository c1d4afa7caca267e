/**
 * One engine process of the multi-engine dag8 bench (pg-engines.ts):
 * `node --import tsx bench/pg-dag8-child.ts <postgres url with ?schema=...>`.
 *
 * Opens an engine with DAG8's no-op agents on the shared schema and prints `{"type":"ready"}`.
 * Each command `{"cmd":"loop","from":t0,"until":t1,"inFlight":n}` (epoch ms on the clock all
 * processes share, lib.ts wallNow) runs a time-boxed closed loop in this process: from t0, n
 * workers each start a run with this engine and start the next one when it ends, and none
 * starts a run after t1. It then prints `{"type":"loop","runs":[[start,end],...],"failed":k,
 * "polled":m}` with every run's start and end on that clock.
 *
 * A run's end is seen through this engine's `subscribe`. A run another engine finished (its
 * end was published there, not here) is found by polling the runs table once a second for the
 * runs waited on since the previous poll: `polled` counts those, whose end time is the poll's.
 * When stdin closes, the engine is closed and the process exits.
 */
import pg from "pg";
import { createEngine } from "../src/index.js";
import { report, serveCommands } from "./children.js";
import { RunEnds } from "./dag8-loop.js";
import { wallNow } from "./lib.js";
import { DAG8, DAG8_AGENTS } from "./workloads.js";

const url = process.argv[2];
if (!url) throw new Error("usage: pg-dag8-child.ts <postgres url with ?schema=...>");

const engine = await createEngine({ database: url, agents: DAG8_AGENTS, maxConcurrency: 1000 });
await engine.registerWorkflow(DAG8);
const ends = new RunEnds(engine, wallNow);

const server = new URL(url);
const schema = server.searchParams.get("schema") ?? "skein";
server.searchParams.delete("schema");
const poller = new pg.Client({ connectionString: server.toString() });
await poller.connect();
let polled = 0;
let waitedBefore = new Set<string>();
const poll = setInterval(() => {
  const waited = ends.waitedFor();
  const stale = waited.filter((id) => waitedBefore.has(id));
  waitedBefore = new Set(waited);
  if (stale.length === 0) return;
  poller
    .query<{ run_id: string; status: string }>(
      `SELECT run_id, status FROM ${pg.escapeIdentifier(schema)}.runs
        WHERE run_id = ANY($1) AND status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')`,
      [stale],
    )
    .then(({ rows }) => {
      const at = wallNow();
      for (const r of rows) {
        polled += 1;
        ends.resolve(r.run_id, { at, type: r.status === "SUCCEEDED" ? "run.succeeded" : "run.ended" });
      }
    })
    .catch((e: unknown) => process.stderr.write(`pg-dag8-child: poll failed: ${String(e)}\n`));
}, 1000);

report({ type: "ready", pid: process.pid });

serveCommands(
  async (command) => {
    if (command.cmd !== "loop") throw new Error(`unknown command ${JSON.stringify(command)}`);
    const from = Number(command.from);
    const until = Number(command.until);
    const inFlight = Number(command.inFlight);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, from - wallNow())));
    const runs: [number, number][] = [];
    let failed = 0;
    polled = 0;
    const worker = async () => {
      while (wallNow() < until) {
        const t0 = wallNow();
        const run = await engine.startRun(DAG8.id);
        const end = await ends.wait(run.run_id);
        if (end.type !== "run.succeeded") failed += 1;
        runs.push([t0, end.at]);
      }
    };
    await Promise.all(Array.from({ length: inFlight }, worker));
    report({ type: "loop", runs, failed, polled });
  },
  async () => {
    clearInterval(poll);
    await poller.end();
    await engine.close();
    process.exit(0);
  },
);
