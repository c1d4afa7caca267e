/**
 * One system of the peers bench in a process of its own:
 * `node --import tsx bench/peers/child.ts <mode> <config json>`, with config
 * `{ system, sqlitePath?, pgUrl?, database?, effectFile?, keys? }` (run.ts builds it).
 *
 * - `serve`: opens the system, prints `{"type":"ready","settings":{...}}`, then answers each
 *   command line on stdin with one JSON line: `w1` (one sequence run), `w2` (a closed loop),
 *   `w3` (one fan-out run), `w6` (one dynamic fan-out run). Exits when stdin closes.
 * - `w5-start`: opens the system with 50 ms steps that append their side effect to
 *   `effectFile`, starts 100 DAG8 runs, prints `started` (their keys), and SIGKILLs itself
 *   once half of their steps have appended.
 * - `w5-resume`: the restart. Prints the steps the database holds as done (`committed`), then
 *   resumes the `keys` runs: `first` at the first step started, `done` per run, `resumed` at the end.
 */
import { report, serveCommands } from "../children.js";
import { percentile, wallNow } from "../lib.js";
import { committedTransactions } from "./databases.js";
import { PEERS_DAG8, shapeById } from "./shapes.js";
import { stepConfig } from "./steps.js";
import type { ChildConfig, System } from "./systems/system.js";
import { W5_RUNS, W5_STEP_MS } from "./w5.js";

/** Each system's module is imported only by its own child: a Skein child never loads DBOS. */
async function makeSystem(config: ChildConfig): Promise<System> {
  switch (config.system) {
    case "skein-sqlite":
      return (await import("./systems/skein.js")).skein({ ...config, synchronous: "normal" });
    case "skein-sqlite-full":
      return (await import("./systems/skein.js")).skein({ ...config, synchronous: "full" });
    case "skein-pg":
      return (await import("./systems/skein.js")).skein(config);
    case "dbos":
      return (await import("./systems/dbos.js")).dbos(config);
    case "langgraph":
      return (await import("./systems/langgraph.js")).langgraph(config);
    case "graphile-worker":
      return (await import("./systems/graphile-worker.js")).graphileWorker(config);
    case "pg-boss":
      return (await import("./systems/pg-boss.js")).pgBoss(config);
    case "mastra":
      return (await import("./systems/mastra.js")).mastra(config);
    case "bullmq":
    case "bullmq-aof": // the same code; run.ts gives it the URL of the Redis with an AOF
      return (await import("./systems/bullmq.js")).bullmq(config);
  }
}

/** W1: one run of a sequence of n steps; the intervals between step starts, and what it wrote. */
async function w1(system: System, config: ChildConfig, n: number) {
  const shape = shapeById(`seq-${n}`);
  // PostgreSQL counts a session's commits when it ends: close the system around the run (twice
  // the same open/close overhead for 10 and 100 steps, which the parent's difference removes).
  const pg = config.database !== undefined;
  let before = 0;
  if (pg) {
    await system.close();
    before = await committedTransactions(config.database as string);
    await system.open();
  } else before = system.sqliteChanges?.() ?? Number.NaN;
  const starts: [string, number][] = [];
  stepConfig.starts = starts;
  await system.run(shape);
  stepConfig.starts = null;
  let written: number;
  if (pg) {
    await system.close();
    written = (await committedTransactions(config.database as string)) - before;
    await system.open();
  } else written = (system.sqliteChanges?.() ?? Number.NaN) - before;
  const times = starts.map(([, at]) => at).sort((a, b) => a - b);
  const intervals = times.slice(1).map((t, i) => t - (times[i] as number));
  if (times.length !== n) throw new Error(`w1: ${times.length} steps ran, not ${n}`);
  return { type: "w1", step_p50_ms: percentile(intervals, 50), step_p99_ms: percentile(intervals, 99), written };
}

/** W2: `concurrency` clients, each starting a DAG8 run when its last one ended, for `windowMs`. */
async function w2(system: System, concurrency: number, windowMs: number, delayMs: number) {
  stepConfig.delayMs = delayMs;
  const latencies: number[] = [];
  const errors: string[] = [];
  const t0 = wallNow();
  let last = t0;
  const client = async () => {
    while (wallNow() - t0 < windowMs) {
      const start = wallNow();
      try {
        await system.run(PEERS_DAG8);
      } catch (e) {
        errors.push((e as Error).message);
      }
      const end = wallNow();
      latencies.push(end - start);
      last = Math.max(last, end);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, client));
  stepConfig.delayMs = 0;
  return {
    type: "w2",
    runs: latencies.length,
    runs_per_s: latencies.length / ((last - t0) / 1000),
    p50_ms: percentile(latencies, 50),
    p99_ms: percentile(latencies, 99),
    failed: errors.length,
    error: errors[0],
  };
}

/** W3: one run of a parent and n children; when the last child started, and when the run ended. */
async function w3(system: System, n: number) {
  const starts: [string, number][] = [];
  stepConfig.starts = starts;
  const t0 = wallNow();
  await system.run(shapeById(`fanout-${n}`));
  const done = wallNow();
  stepConfig.starts = null;
  const children = starts.filter(([node]) => node.startsWith("child_")).map(([, at]) => at);
  if (children.length !== n) throw new Error(`w3: ${children.length} children ran, not ${n}`);
  return { type: "w3", all_started_ms: Math.max(...children) - t0, all_done_ms: done - t0 };
}

/**
 * W6: one dynamic fan-out run of n items, at most `concurrency` at once. The steps that ran are
 * checked (one plan, n items, one join; never more than `concurrency` items at a time) and the
 * process's peak RSS is reported: the kernel's high-water mark, so the parent gives W6 a fresh
 * process per item count.
 */
async function w6(system: System, config: ChildConfig, n: number, concurrency: number) {
  const starts: [string, number][] = [];
  stepConfig.starts = starts;
  stepConfig.maxInFlight = 0;
  if (!system.fanOut) throw new Error(`w6: ${config.system} has no dynamic fan-out`);
  const t0 = wallNow();
  await system.fanOut(n, concurrency);
  const done = wallNow();
  stepConfig.starts = null;
  const count = (node: string) => starts.filter(([id]) => id === node).length;
  const ran = { plan: count("plan"), item: count("item"), join: count("join") };
  if (ran.plan !== 1 || ran.item !== n || ran.join !== 1) {
    throw new Error(`w6: ran ${JSON.stringify(ran)}, not one plan, ${n} items and one join`);
  }
  // The plan and the join run alone: the most at once is the items'.
  if (stepConfig.maxInFlight > concurrency) {
    throw new Error(`w6: ${stepConfig.maxInFlight} items ran at once, more than the concurrency of ${concurrency}`);
  }
  return {
    type: "w6",
    all_done_ms: done - t0,
    max_in_flight: stepConfig.maxInFlight,
    peak_rss_mb: process.resourceUsage().maxRSS / 1024,
  };
}

async function serve(system: System, config: ChildConfig) {
  await system.open();
  report({ type: "ready", settings: system.settings() });
  serveCommands(
    async (command) => {
      if (command.cmd === "w1") report(await w1(system, config, Number(command.n)));
      else if (command.cmd === "w2")
        report(await w2(system, Number(command.concurrency), Number(command.windowMs), Number(command.delayMs)));
      else if (command.cmd === "w3") report(await w3(system, Number(command.n)));
      else if (command.cmd === "w6") report(await w6(system, config, Number(command.n), Number(command.concurrency)));
      else throw new Error(`unknown command ${JSON.stringify(command)}`);
    },
    async () => {
      await system.close();
      process.exit(0);
    },
  );
}

async function w5Start(system: System, config: ChildConfig) {
  stepConfig.delayMs = W5_STEP_MS;
  stepConfig.effectFile = config.effectFile ?? null;
  // The kill comes from inside, at the same point for every system: the moment half of the
  // runs' steps have appended their effect (or once every run is started, if later).
  const half = (W5_RUNS * PEERS_DAG8.nodes.length) / 2;
  let armed = false;
  const killAtHalf = () => {
    if (armed && stepConfig.effects >= half) process.kill(process.pid, "SIGKILL");
  };
  stepConfig.onEffect = killAtHalf;
  await system.open();
  const keys = Array.from({ length: W5_RUNS }, (_, i) => `w5-${String(i).padStart(3, "0")}`);
  report({ type: "started", keys: await system.startMany(PEERS_DAG8, keys) });
  armed = true;
  killAtHalf();
  // If the parent goes first, its end of our stdin closes.
  process.stdin.on("end", () => process.exit(0));
  process.stdin.resume();
}

async function w5Resume(system: System, config: ChildConfig) {
  const keys = config.keys ?? [];
  report({ type: "committed", steps: await system.committedSteps(keys) });
  stepConfig.delayMs = W5_STEP_MS;
  stepConfig.effectFile = config.effectFile ?? null;
  stepConfig.onEffect = null;
  stepConfig.onFirstStart = (at) => report({ type: "first", at });
  report({ type: "opening", at: wallNow() });
  await system.resume(PEERS_DAG8, keys, (key) => report({ type: "done", key, at: wallNow() }));
  report({ type: "resumed", at: wallNow() });
  await system.close();
  process.exit(0);
}

const mode = process.argv[2];
const config = JSON.parse(process.argv[3] ?? "{}") as ChildConfig;
const system = await makeSystem(config);
if (mode === "serve") await serve(system, config);
else if (mode === "w5-start") await w5Start(system, config);
else if (mode === "w5-resume") await w5Resume(system, config);
else throw new Error("usage: child.ts serve|w5-start|w5-resume <config json>");
