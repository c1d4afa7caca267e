/**
 * Skein's benchmark (`npm run bench`). Runs each measurement on a fresh SQLite file (synchronous
 * "normal" unless stated, the system clock), prints a markdown table to stdout and writes
 * bench/results/latest.json as `{ sqlite: { <metric>: number }, cli: { help_ms }, meta: {...} }`.
 * Progress goes to stderr. Exit code 1 if a measurement failed its own checks (the numbers are
 * still written). What each metric means and how it is measured is documented in the file that
 * measures it. `npm run bench -- dag8 recovery` runs only the named measurements (names: see
 * MEASUREMENTS); such a partial run updates only their metrics in latest.json and keeps the
 * others, with this run's meta under `meta.partial`.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { benchCli } from "./cli.js";
import { benchDag8, benchDag8Serial } from "./dag8.js";
import { benchDispatch50 } from "./dispatch.js";
import { type Measured, progress, round, within } from "./lib.js";
import { benchParked } from "./parked.js";
import { benchRecovery } from "./recovery.js";
import { benchTransition } from "./transition.js";

const here = dirname(fileURLToPath(import.meta.url));

const WINDOWS = 5;

/** Runs a measurement WINDOWS times (each on a fresh database); the window with the median p50. */
async function medianWindow(
  measure: () => Promise<{ p50: number; p99: number }>,
): Promise<{ p50: number; p99: number; min: number; max: number }> {
  const windows: { p50: number; p99: number }[] = [];
  for (let i = 0; i < WINDOWS; i++) windows.push(await measure());
  windows.sort((a, b) => a.p50 - b.p50);
  const median = windows[Math.floor(windows.length / 2)] as { p50: number; p99: number };
  return { ...median, min: windows[0]?.p50 ?? 0, max: windows[windows.length - 1]?.p50 ?? 0 };
}

/** The targets the project must reach: a metric passes when `ok(value)` holds. */
const TARGETS: Record<string, { text: string; ok(v: number): boolean }> = {
  dispatch50_p50_ms: { text: "< 5", ok: (v) => v < 5 },
  transition_p50_ms: { text: "< 0.1", ok: (v) => v < 0.1 },
  dag8_runs_per_s: { text: ">= 1000", ok: (v) => v >= 1000 },
  dag8_serial_p50_ms: { text: "< 3", ok: (v) => v < 3 },
  recovery_ms: { text: "< 500", ok: (v) => v < 500 },
  parked10k_rss_mb: { text: "< 200", ok: (v) => v < 200 },
  "cli.help_ms": { text: "< 300", ok: (v) => v < 300 },
};

/** A measurement that hangs is abandoned after this long (it fails; the bench goes on). */
const MEASUREMENT_TIMEOUT_MS = 150_000;
/** The whole bench gives up after this long: writes what it has and exits 1. */
const BENCH_TIMEOUT_MS = 300_000;

/** Sections of latest.json: metrics of the store (`sqlite`), and of the command line (`cli`). */
type Section = "sqlite" | "cli";

const MEASUREMENTS: [string, () => Promise<Measured>, Section?][] = [
  ["dispatch50", () => benchDispatch50()],
  [
    "transition",
    async () => {
      // One window's p50 moves by ±25% from one fresh database file to the next on this
      // machine (the file's placement on disk), so the metric is the median of five windows.
      const normal = await medianWindow(() => benchTransition("normal", 2000));
      const full = await medianWindow(() => benchTransition("full", 1000));
      return {
        metrics: {
          transition_p50_ms: normal.p50,
          transition_p99_ms: normal.p99,
          transition_full_p50_ms: full.p50,
          transition_full_p99_ms: full.p99,
        },
        meta: {
          transition: {
            windows: WINDOWS,
            samples_normal: 2000,
            samples_full: 1000,
            p50_normal_min: normal.min,
            p50_normal_max: normal.max,
          },
        },
      };
    },
  ],
  ["dag8", () => benchDag8()],
  ["dag8_serial", () => benchDag8Serial()],
  ["recovery", () => benchRecovery()],
  ["parked10k", () => benchParked()],
  ["cli", () => benchCli(), "cli"],
];

async function main(): Promise<void> {
  process.chdir(join(here, ".."));
  const only = process.argv.slice(2);
  const sections: Record<Section, Record<string, number>> = { sqlite: {}, cli: {} };
  const meta: Record<string, unknown> = {
    node: process.version,
    cpus: availableParallelism(),
    date: new Date().toISOString(),
    cpu_model: cpus()[0]?.model ?? "unknown",
    platform: `${process.platform}-${process.arch}`,
    commit: gitCommit(),
    synchronous: "normal (transition_full_*: full)",
    clock: "system",
    // Other processes on the machine skew every number: compare runs made on a quiet machine.
    loadavg_1m_at_start: round(loadavg()[0] ?? 0),
  };
  const failures: string[] = [];
  const t0 = performance.now();
  const finish = () => {
    meta.duration_s = round((performance.now() - t0) / 1000);
    meta.loadavg_1m_at_end = round(loadavg()[0] ?? 0);
    if (failures.length > 0) meta.failures = failures;
    report(sections, meta, failures);
  };
  killIfStuck(BENCH_TIMEOUT_MS + 30_000);
  const watchdog = setTimeout(() => {
    failures.push(`the bench did not finish within ${BENCH_TIMEOUT_MS / 1000} s`);
    finish();
    process.exit(1);
  }, BENCH_TIMEOUT_MS);
  for (const [name, measure, section = "sqlite"] of MEASUREMENTS) {
    if (only.length > 0 && !only.includes(name)) continue;
    progress(`${name}...`);
    const started = performance.now();
    try {
      const result = await within(measure(), MEASUREMENT_TIMEOUT_MS, name);
      for (const [k, v] of Object.entries(result.metrics)) sections[section][k] = round(v);
      Object.assign(meta, roundAll(result.meta ?? {}));
      failures.push(...(result.failures ?? []));
    } catch (e) {
      failures.push(`${name}: ${(e as Error).stack ?? String(e)}`);
    }
    progress(`${name} took ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
  clearTimeout(watchdog);
  finish();
  // A measurement abandoned by its timeout may have left an engine running: do not wait for it.
  if (failures.length > 0) process.exit(1);
}

function report(
  sections: Record<Section, Record<string, number>>,
  meta: Record<string, unknown>,
  failures: string[],
): void {
  const out = join(here, "results", "latest.json");
  mkdirSync(dirname(out), { recursive: true });
  const partial = process.argv.length > 2;
  writeFileSync(
    out,
    `${JSON.stringify(partial ? mergeWithPrevious(out, sections, meta) : { ...sections, meta }, null, 2)}\n`,
  );

  const metrics = flatten(sections);
  process.stdout.write(`${table(metrics)}\n`);
  process.stdout.write(`\nwritten to ${out} (${meta.duration_s} s)\n`);
  // A full run (no measurement named on the command line) also refreshes README's table.
  if (!partial && failures.length === 0) updateReadme(metrics, meta);
  if (failures.length > 0) {
    process.stderr.write(`\n!!! BENCH FAILURES (${failures.length}):\n${failures.map((f) => `!!! ${f}`).join("\n")}\n`);
    process.exitCode = 1;
  }
}

/** A partial run's result: the previous latest.json with this run's metrics replaced, and its meta under `meta.partial`. */
function mergeWithPrevious(
  file: string,
  sections: Record<Section, Record<string, number>>,
  meta: Record<string, unknown>,
): Record<string, unknown> {
  let previous: Record<string, unknown> = {};
  try {
    previous = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  } catch {
    // no previous results: this run's are all there is
  }
  const merged: Record<string, unknown> = { ...previous };
  for (const [name, metrics] of Object.entries(sections)) {
    merged[name] = { ...((previous[name] as Record<string, number> | undefined) ?? {}), ...metrics };
  }
  const { meta: previousMeta, ...rest } = merged;
  return { ...rest, meta: { ...((previousMeta as Record<string, unknown> | undefined) ?? {}), partial: meta } };
}

/** Metrics of every section, keyed as in the table: `dag8_p50_ms` (sqlite), `cli.help_ms`. */
function flatten(sections: Record<Section, Record<string, number>>): Record<string, number> {
  const flat: Record<string, number> = {};
  for (const [name, metrics] of Object.entries(sections)) {
    for (const [k, v] of Object.entries(metrics)) flat[name === "sqlite" ? k : `${name}.${k}`] = v;
  }
  return flat;
}

/** Replaces the table between README's bench-table markers with this run's. */
function updateReadme(metrics: Record<string, number>, meta: Record<string, unknown>): void {
  const readme = join(here, "..", "README.md");
  const text = readFileSync(readme, "utf8");
  const start = "<!-- bench-table -->";
  const end = "<!-- /bench-table -->";
  const a = text.indexOf(start);
  const b = text.indexOf(end);
  if (a < 0 || b < a) return;
  const when = `Measured ${String(meta.date).slice(0, 10)} on ${meta.cpus} cores, Node ${meta.node}, commit ${String(meta.commit ?? "?").slice(0, 8)}.`;
  writeFileSync(readme, `${text.slice(0, a + start.length)}\n${table(metrics)}\n\n${when}\n${text.slice(b)}`);
}

/**
 * The last resort: a thread that kills this process if it is still alive after `ms`. It catches what
 * the timers above cannot: code that never yields to the event loop (a promise loop that spins).
 */
function killIfStuck(ms: number): void {
  const code = `setTimeout(() => {
    require("node:fs").writeSync(2, "\\n!!! BENCH STUCK: killed after ${ms / 1000} s (the event loop never yielded)\\n");
    process.kill(${process.pid}, "SIGKILL");
  }, ${ms});`;
  new Worker(code, { eval: true }).unref();
}

/** Rounds every number in a meta object, however deep. */
function roundAll<T>(value: T): T {
  if (typeof value === "number") return round(value) as T;
  if (Array.isArray(value)) return value.map(roundAll) as T;
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, roundAll(v)])) as T;
  }
  return value;
}

function table(metrics: Record<string, number>): string {
  const rows = ["| metric | value | target | ok |", "| --- | ---: | --- | --- |"];
  for (const [k, v] of Object.entries(metrics)) {
    const t = TARGETS[k];
    rows.push(`| ${k} | ${v} | ${t?.text ?? ""} | ${t ? (t.ok(v) ? "yes" : "**NO**") : ""} |`);
  }
  for (const [k, t] of Object.entries(TARGETS)) {
    if (!(k in metrics)) rows.push(`| ${k} | (not measured) | ${t.text} | **NO** |`);
  }
  return rows.join("\n");
}

/** The checked-out commit, read from .git without running git. */
function gitCommit(): string | null {
  try {
    const git = join(here, "..", ".git");
    const head = readFileSync(join(git, "HEAD"), "utf8").trim();
    if (!head.startsWith("ref: ")) return head;
    const ref = head.slice(5);
    if (existsSync(join(git, ref))) return readFileSync(join(git, ref), "utf8").trim();
    const packed = readFileSync(join(git, "packed-refs"), "utf8");
    return (
      packed
        .split("\n")
        .find((l) => l.endsWith(` ${ref}`))
        ?.split(" ")[0] ?? null
    );
  } catch {
    return null;
  }
}

await main();
