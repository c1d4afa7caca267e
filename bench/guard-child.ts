/**
 * One side of the guard's comparison (guard.ts): dag8's CPU loop on the engine of the checkout
 * whose `src/index.ts` is given, on a fresh SQLite file, after a warm-up; prints
 * `{"us_per_run": <CPU µs per run>}` on stdout. The workload and the loop are this checkout's,
 * the same for both sides.
 */
import { pathToFileURL } from "node:url";
import type * as Skein from "../src/index.js";
import { CPU_IN_FLIGHT, closedLoop, cpuLoop, RunEnds } from "./dag8-loop.js";
import { tempDb } from "./lib.js";
import { DAG8, DAG8_AGENTS } from "./workloads.js";

const WARMUP_RUNS = 500;
const MAX_LOOP_MS = 60_000;

const [entry, runs] = process.argv.slice(2);
if (!entry || !runs) throw new Error("usage: guard-child.ts <checkout>/src/index.ts <runs>");
const skein = (await import(pathToFileURL(entry).href)) as typeof Skein;
const db = tempDb("guard");
const engine = await skein.createEngine({ database: db.url, agents: DAG8_AGENTS, maxConcurrency: 1000 });
try {
  await engine.registerWorkflow(DAG8);
  const ends = new RunEnds(engine);
  await closedLoop(engine, ends, WARMUP_RUNS, CPU_IN_FLIGHT, MAX_LOOP_MS); // the JIT, prepared statements
  const { usPerRun } = await cpuLoop(engine, ends, Number(runs), MAX_LOOP_MS);
  process.stdout.write(`${JSON.stringify({ us_per_run: usPerRun })}\n`);
} finally {
  await engine.close();
  db.cleanup();
}
