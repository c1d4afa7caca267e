/**
 * `npm run bench:peers`: Skein beside DBOS, LangGraph, graphile-worker, pg-boss, Mastra and BullMQ on this
 * machine, in one invocation. Installs the peers in bench/peers if they are missing or stale
 * (`npm ci` there: they are not Skein's dependencies), starts one process per system
 * (child.ts) on a fresh database of its own (BullMQ: twice, on the machine's in-memory Redis
 * and on a Redis with an append-only file that this bench starts and stops, redis.ts), runs
 * every workload case as one warm-up and then REPS repetitions, the systems taking turns within
 * each repetition (their order rotating), then W5 (w5.ts), and writes bench/results/peers.json
 * and bench/PEERS.md (report.ts). Progress goes to stderr. Exit code 1 if anything failed
 * (what was measured is still written).
 *
 * For development, smaller runs: BENCH_PEERS_REPS (default 5), BENCH_PEERS_WINDOW_MS (W2's
 * window, default 1500), BENCH_PEERS_SYSTEMS (e.g. `skein-sqlite,dbos`) and
 * BENCH_PEERS_WORKLOADS (e.g. `w2,w5`; names: w1 w2 w2_sleep w3 w5 w6).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { BenchChild, killChildren, type Message } from "../children.js";
import { progress, tempDb } from "../lib.js";
import { serverSettings } from "../postgres.js";
import { createDatabase, dropDatabase, dropLeftoverDatabases } from "./databases.js";
import { type AofRedis, clearPrefix, ensureRedis, startAofRedis } from "./redis.js";
import { type Results, readmeBlock, writeReport } from "./report.js";
import { W6_CONCURRENCY, W6_ITEMS } from "./shapes.js";
import { SYSTEMS, type SystemInfo } from "./systems/list.js";
import type { ChildConfig, SystemName } from "./systems/system.js";
import { W5_STEP_MS, type W5Result, w5Once } from "./w5.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");

const REPS = Number(process.env.BENCH_PEERS_REPS ?? 5);
const WINDOW_MS = Number(process.env.BENCH_PEERS_WINDOW_MS ?? 1500);
const ONLY_SYSTEMS = process.env.BENCH_PEERS_SYSTEMS?.split(",");
const ONLY_WORKLOADS = process.env.BENCH_PEERS_WORKLOADS?.split(",");
/** No BENCH_PEERS_* setting made this run smaller. */
const FULL_RUN = !Object.keys(process.env).some((k) => k.startsWith("BENCH_PEERS_"));
const CONCURRENCIES = [1, 8, 32];
/** `bullmq`'s Redis: the machine's local server, in memory (run.ts starts it if it does not answer). */
const REDIS_URL = "redis://127.0.0.1:6379";
/** `bullmq-aof`'s Redis, with an append-only file: started by main() when that system runs, stopped by finish(). */
let aofRedis: AofRedis | null = null;
const FANOUTS = [50, 500];
/** W2's warm-up window: enough for pools, prepared statements and the JIT. */
const WARMUP_WINDOW_MS = 500;
/** W5: how long a restarted system may take to finish its runs (Skein on PostgreSQL needs its 30 s engine timeout). */
const W5_CAP_MS = 40_000;
/** The whole bench gives up after this long: writes what it has and exits 1. */
const BENCH_TIMEOUT_MS = 28 * 60_000;

/** One workload case: what to send a system's child, and the metrics of its answer. */
interface Case {
  id: string;
  workload: string;
  run(child: BenchChild, warmup: boolean): Promise<Record<string, number>>;
}

async function ask<T extends Message>(child: BenchChild, command: Record<string, unknown>, ms: number): Promise<T> {
  child.send(command);
  return child.take<T>(String(command.cmd), ms);
}

function cases(): Case[] {
  const out: Case[] = [
    {
      id: "w1",
      workload: "w1",
      async run(child) {
        type W1 = Message & { step_p50_ms: number; step_p99_ms: number; written: number };
        const ten = await ask<W1>(child, { cmd: "w1", n: 10 }, 120_000);
        const hundred = await ask<W1>(child, { cmd: "w1", n: 100 }, 120_000);
        const thousand = await ask<W1>(child, { cmd: "w1", n: 1000 }, 300_000);
        return {
          step_p50_ms_10: ten.step_p50_ms,
          step_p99_ms_10: ten.step_p99_ms,
          step_p50_ms_100: hundred.step_p50_ms,
          step_p99_ms_100: hundred.step_p99_ms,
          step_p50_ms_1000: thousand.step_p50_ms,
          step_p99_ms_1000: thousand.step_p99_ms,
          writes_per_step: (hundred.written - ten.written) / 90,
        };
      },
    },
  ];
  for (const [workload, delayMs] of [
    ["w2", 0],
    ["w2_sleep", 50],
  ] as const) {
    for (const c of CONCURRENCIES) {
      out.push({
        id: `${workload}_c${c}`,
        workload,
        async run(child, warmup) {
          type W2 = Message & { runs_per_s: number; p50_ms: number; p99_ms: number; failed: number; error?: string };
          const windowMs = warmup ? WARMUP_WINDOW_MS : WINDOW_MS;
          const r = await ask<W2>(child, { cmd: "w2", concurrency: c, windowMs, delayMs }, windowMs + 120_000);
          if (r.failed > 0) throw new Error(`${r.failed} runs failed: ${r.error}`);
          const metrics: Record<string, number> = { runs_per_s: r.runs_per_s, p50_ms: r.p50_ms, p99_ms: r.p99_ms };
          if (delayMs > 0) metrics.above_critical_path_ms = r.p50_ms - 4 * delayMs;
          return metrics;
        },
      });
    }
  }
  for (const n of FANOUTS) {
    out.push({
      id: `w3_${n}`,
      workload: "w3",
      async run(child) {
        const r = await ask<Message & { all_started_ms: number; all_done_ms: number }>(
          child,
          { cmd: "w3", n },
          120_000,
        );
        return { all_started_ms: r.all_started_ms, all_done_ms: r.all_done_ms };
      },
    });
  }
  return out.filter((c) => !ONLY_WORKLOADS || ONLY_WORKLOADS.includes(c.workload));
}

/** W6 at `n` items: measured in processes that run nothing else, so that their peak RSS is W6's. */
function w6Case(n: number): Case {
  return {
    id: `w6_${n}`,
    workload: "w6",
    async run(child) {
      const r = await ask<Message & { all_done_ms: number; peak_rss_mb: number }>(
        child,
        { cmd: "w6", n, concurrency: W6_CONCURRENCY },
        300_000,
      );
      return { all_done_ms: r.all_done_ms, peak_rss_mb: r.peak_rss_mb };
    },
  };
}

/** Where a system keeps its data: a fresh SQLite file, or a fresh PostgreSQL database. */
async function home(s: SystemInfo, suffix = ""): Promise<{ config: ChildConfig; cleanup(): Promise<void> }> {
  if (s.store === "redis") {
    const url = s.redisAof ? aofRedis?.url : REDIS_URL;
    if (!url) throw new Error(`${s.name}: its Redis is not started`);
    const prefix = `skein-peers-${process.pid}-${s.name}${suffix}`;
    return {
      config: { system: s.name, redisUrl: url, redisPrefix: prefix },
      cleanup: () => clearPrefix(url, prefix),
    };
  }
  if (s.store === "sqlite") {
    const db = tempDb(`peers-${s.name}${suffix}`);
    return { config: { system: s.name, sqlitePath: db.path }, cleanup: async () => db.cleanup() };
  }
  const db = await createDatabase(`${s.name}${suffix}`);
  return {
    config: { system: s.name, pgUrl: db.url, database: db.name },
    cleanup: () => dropDatabase(db.name),
  };
}

/** The systems in a new order each repetition, so that none always measures first or last. */
function rotate<T>(list: T[], by: number): T[] {
  const k = by % Math.max(1, list.length);
  return [...list.slice(k), ...list.slice(0, k)];
}

function push(results: Results, id: string, system: SystemName, metrics: Record<string, number | null>): void {
  const bySystem = (results[id] ??= {});
  const samples = (bySystem[system] ??= {});
  for (const [k, v] of Object.entries(metrics)) (samples[k] ??= []).push(v);
}

/** Installs the peers unless bench/peers/node_modules already holds what its package-lock.json names. */
function ensurePeersInstalled(): void {
  const lock = JSON.parse(readFileSync(join(here, "package-lock.json"), "utf8")) as {
    packages: Record<string, { version?: string; optional?: boolean }>;
  };
  const hidden = join(here, "node_modules", ".package-lock.json");
  const installed = existsSync(hidden)
    ? (JSON.parse(readFileSync(hidden, "utf8")) as { packages: Record<string, { version?: string }> }).packages
    : {};
  const stale = Object.entries(lock.packages).filter(
    ([path, p]) => path.startsWith("node_modules/") && !p.optional && installed[path]?.version !== p.version,
  );
  if (stale.length === 0) return;
  progress(`installing the peers in bench/peers (npm ci: ${stale.length} packages missing or stale)...`);
  const r = spawnSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: here, stdio: ["ignore", 2, 2] });
  if (r.status !== 0) throw new Error(`npm ci in bench/peers failed (exit ${r.status})`);
}

function versions(): Record<string, string> {
  const version = (dir: string, pkg: string) => {
    try {
      return (JSON.parse(readFileSync(join(dir, "node_modules", pkg, "package.json"), "utf8")) as { version: string })
        .version;
    } catch {
      return "?";
    }
  };
  const out: Record<string, string> = {};
  for (const pkg of [
    "@dbos-inc/dbos-sdk",
    "@langchain/langgraph",
    "@langchain/langgraph-checkpoint-sqlite",
    "@langchain/core",
    "graphile-worker",
    "pg-boss",
    "@mastra/core",
    "@mastra/libsql",
    "@libsql/client",
    "libsql",
    "bullmq",
    "ioredis",
    "pg",
    "better-sqlite3",
  ])
    out[pkg] = version(here, pkg);
  out["skein: better-sqlite3"] = version(root, "better-sqlite3");
  out["skein: pg"] = version(root, "pg");
  return out;
}

/** Replaces README's block between the peers-table markers. */
function updateReadme(block: string): void {
  const readme = join(root, "README.md");
  const text = readFileSync(readme, "utf8");
  const start = "<!-- peers-table -->";
  const end = "<!-- /peers-table -->";
  const a = text.indexOf(start);
  const b = text.indexOf(end);
  if (a < 0 || b < a) return;
  writeFileSync(readme, `${text.slice(0, a + start.length)}\n${block}\n${text.slice(b)}`);
}

async function main(): Promise<void> {
  process.chdir(root);
  ensurePeersInstalled();
  const t0 = performance.now();
  const systems = SYSTEMS.filter((s) => !ONLY_SYSTEMS || ONLY_SYSTEMS.includes(s.name));
  const results: Results = {};
  const failures: string[] = [];
  const settings: Partial<Record<SystemName, Record<string, unknown>>> = {};
  const meta: Record<string, unknown> = {
    date: new Date().toISOString(),
    node: process.version,
    cpus: availableParallelism(),
    cpu_model: cpus()[0]?.model ?? "unknown",
    platform: `${process.platform}-${process.arch}`,
    commit: execFileSync("git", ["rev-parse", "HEAD"], { encoding: "utf8" }).trim(),
    repetitions: REPS,
    warmup_repetitions: 1,
    window_ms: WINDOW_MS,
    w5_cap_s: W5_CAP_MS / 1000,
    w5_step_ms: W5_STEP_MS,
    loadavg_1m_at_start: loadavg()[0],
  };
  meta.postgres = await serverSettings().catch((e: unknown) => ({ error: (e as Error).message }));

  let finished = false;
  const finish = async () => {
    if (finished) return;
    finished = true;
    await killChildren();
    failures.push(...(await dropLeftoverDatabases()).map((f) => `cannot drop database ${f}`));
    // After the children: no BullMQ process still writes to it. Its directory goes with it.
    await aofRedis?.stop().catch((e: unknown) => failures.push(`cannot stop the AOF Redis: ${(e as Error).message}`));
    meta.duration_s = (performance.now() - t0) / 1000;
    meta.loadavg_1m_at_end = loadavg()[0];
    const { ratios: r, targets: t } = writeReport(
      { results, meta, settings, versions: versions(), failures, concurrencies: CONCURRENCIES, fanouts: FANOUTS },
      join(root, "bench", "results", "peers.json"),
      join(root, "bench", "PEERS.md"),
    );
    // Only a full run, with nothing failed, speaks for the project in README.
    if (FULL_RUN && failures.length === 0) updateReadme(readmeBlock(r, t, meta));
    process.stdout.write(
      `${JSON.stringify(r, null, 2)}\nwritten to bench/PEERS.md and bench/results/peers.json (${Math.round(meta.duration_s as number)} s)\n`,
    );
    if (failures.length > 0) {
      process.stderr.write(
        `\n!!! PEERS BENCH FAILURES (${failures.length}):\n${failures.map((f) => `!!! ${f}`).join("\n")}\n`,
      );
      process.exitCode = 1;
    }
  };
  const watchdog = setTimeout(() => {
    failures.push(`the bench did not finish within ${BENCH_TIMEOUT_MS / 60_000} min`);
    void finish().finally(() => process.exit(1));
  }, BENCH_TIMEOUT_MS);

  try {
    if (systems.some((s) => s.store === "redis" && !s.redisAof)) await ensureRedis(REDIS_URL);
    if (systems.some((s) => s.redisAof)) aofRedis = await startAofRedis();
    const list = cases();
    if (list.length > 0) await measureCases(systems, list, results, settings, failures);
    if (!ONLY_WORKLOADS || ONLY_WORKLOADS.includes("w6")) {
      for (const n of W6_ITEMS) {
        await measureCases(
          systems.filter((s) => s.fanOut),
          [w6Case(n)],
          results,
          settings,
          failures,
        );
      }
    }
    if (!ONLY_WORKLOADS || ONLY_WORKLOADS.includes("w5")) await measureW5(systems, results, meta, failures);
  } catch (e) {
    failures.push((e as Error).stack ?? String(e));
  }
  clearTimeout(watchdog);
  await finish();
}

/** Every case but W5: one long-lived process per system, on its own database, taking turns. */
async function measureCases(
  systems: SystemInfo[],
  list: Case[],
  results: Results,
  settings: Partial<Record<SystemName, Record<string, unknown>>>,
  failures: string[],
): Promise<void> {
  const homes: { cleanup(): Promise<void> }[] = [];
  const children = new Map<SystemName, BenchChild>();
  try {
    for (const s of systems) {
      const h = await home(s);
      homes.push(h);
      const child = new BenchChild(`peers ${s.name}`, "bench/peers/child.ts", ["serve", JSON.stringify(h.config)]);
      try {
        const ready = await child.take<Message & { settings: Record<string, unknown> }>("ready", 120_000);
        settings[s.name] = ready.settings;
        children.set(s.name, child);
      } catch (e) {
        failures.push(`${s.name}: did not start: ${(e as Error).message}`);
        await child.kill();
      }
    }
    for (const c of list) {
      const started = performance.now();
      for (let rep = 0; rep <= REPS; rep++) {
        for (const s of rotate(systems, rep)) {
          const child = children.get(s.name);
          if (!child) continue;
          try {
            const metrics = await c.run(child, rep === 0);
            if (rep > 0) push(results, c.id, s.name, metrics); // repetition 0 is the warm-up
          } catch (e) {
            failures.push(`${c.id} ${s.name}: ${(e as Error).message}`);
            // A system that failed is left out of what follows: its process may be in any state.
            children.delete(s.name);
            await child.kill();
          }
        }
      }
      progress(`${c.id} took ${((performance.now() - started) / 1000).toFixed(1)} s`);
    }
  } finally {
    await Promise.all([...children.values()].map((c) => c.stop()));
    for (const h of homes) await h.cleanup().catch((e: unknown) => failures.push(`cleanup: ${(e as Error).message}`));
  }
}

/**
 * W5, REPS repetitions (no warm-up: each is a cold start on a fresh database, which is what a
 * restart is). A peer that resumed nothing within the cap is not repeated: what holds it is a
 * fixed timeout (4 hours, 15 minutes), which another repetition cannot change.
 */
async function measureW5(systems: SystemInfo[], results: Results, meta: Record<string, unknown>, failures: string[]) {
  const started = performance.now();
  const done = new Set<SystemName>();
  for (let rep = 1; rep <= REPS; rep++) {
    for (const s of rotate(systems, rep)) {
      if (done.has(s.name)) continue;
      const h = await home(s, "_w5");
      try {
        const r: W5Result = await w5Once(h.config, W5_CAP_MS);
        push(results, "w5", s.name, { ...r });
        if (r.doubled > 0) failures.push(`w5 ${s.name}: ${r.doubled} completed steps ran twice`);
        if (r.missing > 0) failures.push(`w5 ${s.name}: ${r.missing} steps of finished runs never ran`);
        if (r.all_done_ms === null) {
          if (s.skein) failures.push(`w5 ${s.name}: ${r.runs_done} of 100 runs done within the cap`);
          else done.add(s.name);
        }
      } catch (e) {
        failures.push(`w5 ${s.name}: ${(e as Error).message}`);
        done.add(s.name);
      } finally {
        await killChildren();
        await h.cleanup().catch((e: unknown) => failures.push(`w5 cleanup: ${(e as Error).message}`));
      }
    }
  }
  const capped = [...done].filter((n) => !SYSTEMS.find((s) => s.name === n)?.skein);
  if (capped.length > 0) meta.w5_note = `Measured once, not resumed within the cap: ${capped.join(", ")}.`;
  progress(`w5 took ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

await main();
