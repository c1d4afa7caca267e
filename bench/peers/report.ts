/**
 * The peers bench's output: bench/results/peers.json (every repetition's numbers, their median
 * and range, the ratios, versions and settings) and bench/PEERS.md (a table per workload),
 * both written by `npm run bench:peers` only. The prose of PEERS.md is here, beside the code
 * that measures what it describes.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { W6_CONCURRENCY, W6_ITEMS } from "./shapes.js";
import { SYSTEMS, type SystemInfo } from "./systems/list.js";
import type { SystemName } from "./systems/system.js";

/** Per case (`w1`, `w2_c32`, `w5`...), per system, per metric: one value per repetition (null: not reached within the cap). */
export type Results = Record<string, Partial<Record<SystemName, Record<string, (number | null)[]>>>>;

export interface Stat {
  median: number | null;
  min: number | null;
  max: number | null;
  /** Repetitions whose value is known. */
  n: number;
  /** Repetitions that did not reach it (W5: not done within the cap). */
  missing: number;
}

export interface ReportInput {
  results: Results;
  meta: Record<string, unknown>;
  settings: Partial<Record<SystemName, Record<string, unknown>>>;
  versions: Record<string, string>;
  failures: string[];
  concurrencies: number[];
  fanouts: number[];
}

export function stat(samples: (number | null)[]): Stat {
  const known = samples.filter((x): x is number => x !== null && Number.isFinite(x)).sort((a, b) => a - b);
  const n = known.length;
  const median =
    n === 0
      ? null
      : n % 2
        ? (known[(n - 1) / 2] as number)
        : ((known[n / 2 - 1] as number) + (known[n / 2] as number)) / 2;
  return { median, min: known[0] ?? null, max: known[n - 1] ?? null, n, missing: samples.length - n };
}

/** The median of a case's metric for a system, or null. */
function med(results: Results, id: string, system: SystemName, metric: string): number | null {
  const samples = results[id]?.[system]?.[metric];
  return samples ? stat(samples).median : null;
}

const div = (a: number | null, b: number | null) => (a === null || b === null || b === 0 ? null : a / b);

/** The ratios the issue asks for (and a few more), each oriented so that > 1 means Skein is better. */
export function ratios(results: Results): Record<string, number | null> {
  const rps = (s: SystemName, c = 32) => med(results, `w2_c${c}`, s, "runs_per_s");
  const p50 = (s: SystemName, c = 1) => med(results, `w2_c${c}`, s, "p50_ms");
  const step = (s: SystemName, n: number) => med(results, "w1", s, `step_p50_ms_${n}`);
  /** The fastest peer's median of a time metric (of the peers on `store` when given). */
  const bestPeer = (id: string, metric: string, store?: SystemInfo["store"]) => {
    const peers = SYSTEMS.filter((s) => !s.skein && (store === undefined || s.store === store))
      .map((s) => med(results, id, s.name, metric))
      .filter((x): x is number => x !== null);
    return peers.length ? Math.min(...peers) : null;
  };
  return {
    w2_c32_vs_dbos: div(rps("skein-sqlite"), rps("dbos")),
    w2_c32_vs_langgraph: div(rps("skein-sqlite"), rps("langgraph")),
    w2_c32_vs_mastra: div(rps("skein-sqlite"), rps("mastra")),
    w2_c32_vs_bullmq: div(rps("skein-sqlite"), rps("bullmq")),
    w2_c32_vs_bullmq_aof: div(rps("skein-sqlite"), rps("bullmq-aof")),
    w2_c32_vs_graphile_worker: div(rps("skein-sqlite"), rps("graphile-worker")),
    w2_c32_vs_pg_boss: div(rps("skein-sqlite"), rps("pg-boss")),
    w2_c32_pg_vs_dbos: div(rps("skein-pg"), rps("dbos")),
    w2_c32_pg_vs_graphile_worker: div(rps("skein-pg"), rps("graphile-worker")),
    w2_c32_pg_vs_pg_boss: div(rps("skein-pg"), rps("pg-boss")),
    w2_c32_full_vs_langgraph: div(rps("skein-sqlite-full"), rps("langgraph")),
    w2_c1_latency_vs_dbos: div(p50("dbos"), p50("skein-sqlite")),
    w2_c1_latency_vs_langgraph: div(p50("langgraph"), p50("skein-sqlite")),
    w2_c1_latency_vs_mastra: div(p50("mastra"), p50("skein-sqlite")),
    w2_c1_latency_vs_bullmq: div(p50("bullmq"), p50("skein-sqlite")),
    w2_c1_latency_vs_bullmq_aof: div(p50("bullmq-aof"), p50("skein-sqlite")),
    w2_c1_latency_pg_vs_dbos: div(p50("dbos"), p50("skein-pg")),
    w2_c1_latency_full_vs_langgraph: div(p50("langgraph"), p50("skein-sqlite-full")),
    w3_500_vs_best_peer: div(bestPeer("w3_500", "all_done_ms"), med(results, "w3_500", "skein-sqlite", "all_done_ms")),
    w3_500_pg_vs_best_peer: div(bestPeer("w3_500", "all_done_ms"), med(results, "w3_500", "skein-pg", "all_done_ms")),
    w6_1000_vs_best_peer: div(
      bestPeer("w6_1000", "all_done_ms"),
      med(results, "w6_1000", "skein-sqlite", "all_done_ms"),
    ),
    w6_1000_pg_vs_best_peer: div(
      bestPeer("w6_1000", "all_done_ms"),
      med(results, "w6_1000", "skein-pg", "all_done_ms"),
    ),
    w6_1000_pg_vs_best_pg_peer: div(
      bestPeer("w6_1000", "all_done_ms", "postgres"),
      med(results, "w6_1000", "skein-pg", "all_done_ms"),
    ),
    // Per-step cost growth (< 1 here is Skein's step getting dearer with the chain's length).
    w1_sqlite_step_10_over_1000: div(step("skein-sqlite", 10), step("skein-sqlite", 1000)),
    w1_pg_step_10_over_1000: div(step("skein-pg", 10), step("skein-pg", 1000)),
    w1_10_pg_vs_dbos: div(step("dbos", 10), step("skein-pg", 10)),
    w1_100_pg_vs_dbos: div(step("dbos", 100), step("skein-pg", 100)),
    w1_1000_pg_vs_dbos: div(step("dbos", 1000), step("skein-pg", 1000)),
  };
}

/** The issue's targets, checked against the ratios and W5. */
export function targets(results: Results, r: Record<string, number | null>) {
  const atLeast = (key: string, min: number) => ({
    value: r[key] ?? null,
    target: `>= ${min}`,
    ok: (r[key] ?? 0) >= min,
  });
  const above = (key: string, min: number) => ({ value: r[key] ?? null, target: `> ${min}`, ok: (r[key] ?? 0) > min });
  const doubled = SYSTEMS.map((s) => med(results, "w5", s.name, "doubled")).filter((x): x is number => x !== null);
  const skeinRecovered = SYSTEMS.filter((s) => s.skein).every((s) => {
    const samples = results.w5?.[s.name]?.all_done_ms ?? [];
    return samples.length > 0 && samples.every((x) => x !== null);
  });
  const pgResumed = results.w5?.["skein-pg"]?.first_resumed_after_open_ms ?? [];
  const pgResumedMax = pgResumed.length ? Math.max(...pgResumed.map((x) => x ?? Number.POSITIVE_INFINITY)) : null;
  return {
    // Issue 35's: against BullMQ at the durability closest to SQLite's synchronous=normal (AOF).
    w2_c32_vs_dbos: atLeast("w2_c32_vs_dbos", 20),
    w2_c32_vs_langgraph: atLeast("w2_c32_vs_langgraph", 15),
    w2_c32_vs_mastra: atLeast("w2_c32_vs_mastra", 8),
    w2_c32_vs_bullmq_aof: atLeast("w2_c32_vs_bullmq_aof", 3),
    w2_c1_latency_vs_dbos: atLeast("w2_c1_latency_vs_dbos", 8),
    w2_c1_latency_vs_langgraph: atLeast("w2_c1_latency_vs_langgraph", 8),
    w3_500_vs_best_peer: above("w3_500_vs_best_peer", 1),
    w6_1000_vs_best_peer: atLeast("w6_1000_vs_best_peer", 1.5),
    w6_1000_pg_vs_best_pg_peer: above("w6_1000_pg_vs_best_pg_peer", 1),
    // Within 1.2× of the 10-step cost: 10-step ÷ 1000-step at least 1 / 1.2.
    w1_sqlite_step_10_over_1000: atLeast("w1_sqlite_step_10_over_1000", 0.83),
    w1_pg_step_10_over_1000: atLeast("w1_pg_step_10_over_1000", 0.83),
    w1_10_pg_vs_dbos: atLeast("w1_10_pg_vs_dbos", 1.5),
    w1_100_pg_vs_dbos: atLeast("w1_100_pg_vs_dbos", 1.5),
    w1_1000_pg_vs_dbos: atLeast("w1_1000_pg_vs_dbos", 1.5),
    w5_recovers_no_doubled_effect: {
      value: doubled.length ? Math.max(...doubled) : null,
      target: "Skein finishes every run; no system's completed step runs twice",
      ok: skeinRecovered && doubled.every((d) => d === 0),
    },
    w5_pg_first_resumed_after_open_ms: {
      value: pgResumedMax,
      target: "< 1000 in every repetition",
      ok: pgResumedMax !== null && pgResumedMax < 1000,
    },
  };
}

/** README's block: the ratios and targets of this run, and where it ran. */
export function readmeBlock(
  r: Record<string, number | null>,
  t: ReturnType<typeof targets>,
  meta: Record<string, unknown>,
): string {
  const ok = (key: string) => {
    const target = (t as Record<string, { ok: boolean; target: string }>)[key];
    return target ? `${target.target}: ${target.ok ? "yes" : "**no**"}` : "";
  };
  return `${table(
    ["ratio", "value", "target"],
    Object.entries(r).map(([k, v]) => [k, times(v), ok(k)]),
  )}

W5: ${ok("w5_recovers_no_doubled_effect")}. Measured ${String(meta.date).slice(0, 10)} on ${String(meta.cpus)} cores (client and database on the same cores), ${String(meta.repetitions)} repetitions, commit ${String(meta.commit ?? "?").slice(0, 8)}, in ${num(meta.duration_s as number)} s.`;
}

/** Writes peers.json and PEERS.md; returns the ratios and the targets. */
export function writeReport(
  input: ReportInput,
  jsonPath: string,
  mdPath: string,
): { ratios: Record<string, number | null>; targets: ReturnType<typeof targets> } {
  const r = ratios(input.results);
  const t = targets(input.results, r);
  const summary: Record<string, Record<string, Record<string, Stat>>> = {};
  for (const [id, bySystem] of Object.entries(input.results)) {
    for (const [system, metrics] of Object.entries(bySystem ?? {})) {
      const out: Record<string, Stat> = {};
      for (const [metric, samples] of Object.entries(metrics)) out[metric] = stat(samples);
      (summary[id] ??= {})[system] = out;
    }
  }
  const json = {
    ratios: r,
    targets: t,
    summary,
    samples: input.results,
    systems: Object.fromEntries(
      SYSTEMS.map((s) => [s.name, { label: label(s, input.versions), settings: input.settings[s.name] ?? null }]),
    ),
    versions: input.versions,
    meta: input.meta,
    failures: input.failures,
  };
  mkdirSync(dirname(jsonPath), { recursive: true });
  writeFileSync(jsonPath, `${JSON.stringify(json, roundReplacer, 2)}\n`);
  writeFileSync(mdPath, markdown(input, r, t));
  return { ratios: r, targets: t };
}

function roundReplacer(_key: string, value: unknown): unknown {
  if (typeof value !== "number" || !Number.isFinite(value) || Number.isInteger(value)) return value;
  return Math.abs(value) < 1 ? Number(value.toPrecision(3)) : Math.round(value * 100) / 100;
}

function label(s: SystemInfo, versions: Record<string, string>): string {
  return s.package ? `${s.label} ${versions[s.package] ?? "?"}` : s.label;
}

/** 3 significant digits, no exponent. */
function num(x: number | null): string {
  if (x === null) return "–";
  if (Number.isInteger(x)) return String(x);
  if (Math.abs(x) >= 100) return x.toFixed(0);
  if (Math.abs(x) >= 10) return x.toFixed(1);
  if (Math.abs(x) >= 1) return x.toFixed(2);
  return x.toPrecision(2);
}

function cell(samples: (number | null)[] | undefined): string {
  if (!samples || samples.length === 0) return "";
  const s = stat(samples);
  if (s.n === 0) return `not within the cap (${s.missing}/${samples.length})`;
  const range = s.n > 1 ? ` (${num(s.min)}–${num(s.max)})` : "";
  const missed = s.missing > 0 ? `, ${s.missing} not within the cap` : "";
  return `${num(s.median)}${range}${missed}`;
}

function times(x: number | null): string {
  return x === null ? "" : `${num(x)}×`;
}

/** A markdown table: the first column (names) left-aligned, the others (numbers) right-aligned unless `left`. */
function table(header: string[], rows: string[][], left = false): string {
  return [
    `| ${header.join(" | ")} |`,
    `| ${header.map((_, i) => (i === 0 || left ? "---" : "---:")).join(" | ")} |`,
    ...rows.map((r) => `| ${r.join(" | ")} |`),
  ].join("\n");
}

function markdown(input: ReportInput, r: Record<string, number | null>, t: ReturnType<typeof targets>): string {
  const { results, versions, meta } = input;
  const systems = SYSTEMS.filter((s) => Object.values(results).some((bySystem) => bySystem?.[s.name]));
  const name = (s: SystemInfo) => label(s, versions);
  const m = (id: string, s: SystemName, metric: string) => results[id]?.[s]?.[metric];
  /** Skein's advantage over a peer: `better` says which way the metric improves. */
  const vs = (id: string, s: SystemInfo, metric: string, skein: SystemName, better: "higher" | "lower") => {
    if (s.skein) return "";
    const peer = med(results, id, s.name, metric);
    const ours = med(results, id, skein, metric);
    return times(better === "higher" ? div(ours, peer) : div(peer, ours));
  };
  const reps = meta.repetitions;
  const out: string[] = [];
  out.push(`# Skein beside its peers

Generated by \`npm run bench:peers\` (bench/peers/run.ts) on ${String(meta.date).slice(0, 10)}: do not edit, run it again.
Every system ran the same workloads in this one invocation, each in a process of its own, taking
turns repetition by repetition (the order rotating), so that whatever else loaded the machine
loaded all of them alike. **Client and database share this machine's ${meta.cpus} cores**: the
systems' own processes, the PostgreSQL server and, on SQLite, the file, on ${String(meta.cpu_model)},
Node ${String(meta.node)}, PostgreSQL ${String((meta.postgres as Record<string, unknown> | undefined)?.server_version ?? "?")}
(synchronous_commit=${String((meta.postgres as Record<string, unknown> | undefined)?.synchronous_commit ?? "?")}), Skein at commit ${String(meta.commit ?? "?").slice(0, 8)}.
Load average at the start ${String(meta.loadavg_1m_at_start)}, at the end ${String(meta.loadavg_1m_at_end)}; the whole run took ${num(meta.duration_s as number)} s.

Method: every step is a no-op (W2-sleep and W5: it sleeps 50 ms); a run's input and every
step's output are 200 bytes. One warm-up repetition, then ${String(reps)}; each cell is the
median of the repetitions with their range (min–max) in brackets. W2 and W2-sleep are closed
loops: *c* clients each start a run as soon as their last one ended, for ${String(meta.window_ms)} ms. Each
PostgreSQL system has a fresh database of its own on the local server; each SQLite one a fresh
file. **×** columns: how many times better Skein is (runs/s: Skein ÷ peer; times: peer ÷ Skein),
against Skein on SQLite (synchronous=normal, its default) and against Skein on PostgreSQL.
Full numbers: [results/peers.json](results/peers.json).
`);

  out.push(`## Ratios

Skein (SQLite normal unless named) against each peer, > 1 when Skein is better: runs/s Skein ÷
peer; latency and time peer ÷ Skein.

${table(
  ["ratio", "value"],
  Object.entries(r).map(([k, v]) => [k, times(v)]),
)}
`);

  out.push(`## Targets

${table(
  ["target", "value", "wanted", "met"],
  Object.entries(t).map(([k, v]) => [k, num(v.value), v.target, v.ok ? "yes" : "**no**"]),
)}
`);

  // W1
  const w1 = systems.map((s) => [
    name(s),
    cell(m("w1", s.name, "step_p50_ms_10")),
    cell(m("w1", s.name, "step_p50_ms_100")),
    cell(m("w1", s.name, "step_p50_ms_1000")),
    cell(m("w1", s.name, "step_p99_ms_1000")),
    // Redis (BullMQ) has no count of this kind here: blank rather than the 0 that NaN − NaN became.
    s.store === "redis"
      ? ""
      : `${cell(m("w1", s.name, "writes_per_step"))} ${s.store === "sqlite" ? "rows" : "commits"}`,
    vs("w1", s, "step_p50_ms_1000", "skein-sqlite", "lower"),
    s.store === "postgres" ? vs("w1", s, "step_p50_ms_1000", "skein-pg", "lower") : "",
  ]);
  out.push(`## W1: one run of 10, 100 and 1,000 steps in a row

Per step: the time from one step's start to the next one's (the engine records the result and
starts the next step): flat from 10 to 1,000 steps when a step costs the same however long the
run already is. Writes per step: what one more step costs the database, from the runs of
100 and of 10 steps, (100-step run − 10-step run) ÷ 90: on SQLite the rows written
(\`total_changes()\` of the writing connection), on PostgreSQL the committed transactions of the
system's database (\`pg_stat_database.xact_commit\`, read with every connection closed, since a
backend reports its counts when it ends; it includes the system's reads and its background polling
during the run); not counted on Redis. × columns compare the 1,000-step p50.

${table(
  [
    "system",
    "10 steps p50 ms",
    "100 steps p50 ms",
    "1,000 steps p50 ms",
    "1,000 steps p99 ms",
    "writes per step",
    "× p50 vs Skein SQLite",
    "× p50 vs Skein PG",
  ],
  w1,
)}
`);

  for (const [workload, title, prefix] of [
    ["W2", "the 8-node DAG, no-op steps", "w2_c"],
    ["W2-sleep", "the 8-node DAG, 50 ms steps (critical path 200 ms)", "w2_sleep_c"],
  ] as const) {
    const rows: string[][] = [];
    for (const c of input.concurrencies) {
      const id = `${prefix}${c}`;
      for (const s of systems) {
        if (!results[id]?.[s.name]) continue;
        const row = [name(s), String(c), cell(m(id, s.name, "runs_per_s")), cell(m(id, s.name, "p50_ms"))];
        if (workload === "W2-sleep") row.push(cell(m(id, s.name, "above_critical_path_ms")));
        row.push(cell(m(id, s.name, "p99_ms")));
        row.push(vs(id, s, "runs_per_s", "skein-sqlite", "higher"));
        const latency = workload === "W2-sleep" ? "above_critical_path_ms" : "p50_ms";
        row.push(vs(id, s, latency, "skein-sqlite", "lower"));
        row.push(s.store === "postgres" ? vs(id, s, "runs_per_s", "skein-pg", "higher") : "");
        row.push(s.store === "postgres" ? vs(id, s, latency, "skein-pg", "lower") : "");
        rows.push(row);
      }
    }
    const lat = workload === "W2-sleep" ? "above 200 ms" : "p50";
    const header = ["system", "c", "runs/s", "p50 ms"];
    if (workload === "W2-sleep") header.push("p50 above 200 ms");
    header.push("p99 ms", "× runs/s vs SQLite", `× ${lat} vs SQLite`, "× runs/s vs PG", `× ${lat} vs PG`);
    out.push(`## ${workload}: ${title}

3 parallel steps → 1 → 3 parallel → 1 (the case study's shape), closed loop at concurrency *c*.
Latency: from the start call to the system reporting the run done.${
      workload === "W2-sleep"
        ? " Above 200 ms: the p50 less the 4 × 50 ms the steps themselves take, the time the engine adds."
        : ""
    }

${table(header, rows)}
`);
  }

  /** One row per system and n of a case measured at several n (W3, W6): name, n, the metrics, × by done time. */
  const byN = (prefix: string, ns: readonly number[], metrics: string[]) =>
    ns.flatMap((n) =>
      systems
        .filter((s) => results[`${prefix}${n}`]?.[s.name])
        .map((s) => {
          const id = `${prefix}${n}`;
          return [
            name(s),
            String(n),
            ...metrics.map((metric) => cell(m(id, s.name, metric))),
            vs(id, s, "all_done_ms", "skein-sqlite", "lower"),
            s.store === "postgres" ? vs(id, s, "all_done_ms", "skein-pg", "lower") : "",
          ];
        }),
    );
  const w3 = byN("w3_", input.fanouts, ["all_started_ms", "all_done_ms"]);
  out.push(`## W3: one step fanning out to n parallel steps

From the start call: until the last of the n children started, and until the run was done.

${table(["system", "n", "all started ms", "all done ms", "× done vs SQLite", "× done vs PG"], w3)}
`);

  const w6 = byN("w6_", W6_ITEMS, ["all_done_ms", "peak_rss_mb"]);
  out.push(`## W6: dynamic fan-out, a list of n items known only at run time

One run: a plan step returns a list of n items (200 bytes each), each item is processed by a
no-op step, at most ${W6_CONCURRENCY} at a time, then one step joins their outputs; each system with its
own idiom for it (below). Time from the start call to the join's end. Peak RSS: the kernel's
high-water mark of the system's process, which ran only W6 at this n (its warm-up and
repetitions), the system's own server (PostgreSQL, Redis) not included. graphile-worker and
pg-boss have no idiom for it and are left out.

${table(["system", "n", "all done ms", "peak RSS MB", "× vs SQLite", "× vs PG"], w6)}
`);

  const w5 = systems.map((s) => [
    name(s),
    cell(m("w5", s.name, "first_resumed_ms")),
    cell(m("w5", s.name, "first_resumed_after_open_ms")),
    cell(m("w5", s.name, "all_done_ms")),
    cell(m("w5", s.name, "runs_done")),
    cell(m("w5", s.name, "committed_at_kill")),
    cell(m("w5", s.name, "doubled")),
    cell(m("w5", s.name, "rerun_in_flight")),
  ]);
  out.push(`## W5: SIGKILL with 100 runs in flight, then a restart

100 runs of the DAG with 50 ms steps; each step appends its side effect to a file. The process
SIGKILLs itself once half of the 800 steps have appended, and a new process of the same system
starts on the same database. Times from the restart's spawn (Node start-up and imports
included; "from open": from the moment it opens the system), capped at ${String(meta.w5_cap_s)} s. Before
resuming, the new process reads which steps the database holds as done: **completed steps run
twice** counts those whose effect appended again (it must be 0); **in-flight steps run again**
counts steps whose effect appended before the kill but whose completion was not yet recorded
(allowed: every system here runs a step at least once). ${String(meta.w5_note ?? "")}

${table(
  [
    "system",
    "first resumed step ms",
    "from open ms",
    "all 100 done ms",
    "runs done",
    "steps done at the kill",
    "completed steps run twice",
    "in-flight steps run again",
  ],
  w5,
)}
`);

  out.push(`## How each system runs the workloads

${HOW}

## Versions and settings

${table(
  ["system", "settings"],
  SYSTEMS.map((s) => [
    name(s),
    Object.entries(input.settings[s.name] ?? {})
      .map(([k, v]) => `${k}: ${String(v)}`)
      .join("; "),
  ]),
  true,
)}

Packages: ${Object.entries(versions)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ")}.
${observations(results)}${notes(t)}
${input.failures.length ? `\n## Failures\n\n${input.failures.map((f) => `- ${f.split("\n")[0]}`).join("\n")}\n` : ""}`);
  return out.join("\n");
}

/** How each peer expresses the workloads, and what it cannot. */
const HOW = `- **Skein**: each shape is a workflow definition (JSON), every node an in-process agent;
  a run is \`startRun\`, its end seen by \`subscribe\`. W6: a \`map\` node over the plan's output
  (\`max_concurrency: 50\`), each item a child run of one agent, then the join reading the map's
  output. W5: the restarted engine puts the dead engine's attempts back by itself (at once on
  SQLite, where one engine owns the file; on PostgreSQL once the dead engine's session lock has
  been free for its 2 s grace, since a live engine whose connection was cut looks the same to
  the database until then).
- **DBOS**: one registered workflow runs a shape level by level: each level's steps started with
  \`DBOS.runStep\` and awaited with \`Promise.allSettled\` (the parallel form its tutorial allows).
  Levels are exact for these shapes; a general DAG would have to be written as code (or as child
  workflows), since DBOS has no dependency graph. W6: a child workflow per item enqueued on a
  \`WorkflowQueue\` with \`globalConcurrency: 50\` (its other settings default: the queue is polled at
  most once a second), the parent awaiting their handles. W5: \`DBOS.launch()\` recovers the executor's
  pending workflows by replaying them from their checkpoints; a recovered run counts as done when
  its workflow function returns (DBOS writes its status just after).
- **LangGraph**: each shape is a \`StateGraph\` with one node per step and the dependencies as edges
  (a join is \`addEdge([a, b, c], "review")\`), compiled with \`SqliteSaver\`; a run is \`invoke\` on a new
  thread; each node's output goes into the state (a sequence keeps only the last). LangGraph runs
  a graph in supersteps: a node starts only when the whole previous superstep is done, which for
  these shapes costs nothing. W6: the map-reduce idiom, a conditional edge returning one
  \`Send("item", …)\` per item, outputs gathered by a reducer, the run's \`maxConcurrency: 50\`. W5:
  LangGraph does not resume by itself; the restarted process invokes each unfinished thread again
  with a null input, as its documentation describes.
- **Mastra** (0.24: its 1.x needs Node 22.13): each shape is a workflow of \`createStep\`s, \`.then()\`
  for a level of one node and \`.parallel([...])\` for a level of several, on a \`Mastra\` instance with
  its LibSQL store (WAL, synchronous=NORMAL); a run is \`createRunAsync\` and \`start\`. Its default
  engine rewrites the run's whole snapshot (every step's result so far, one JSON row) when a step
  starts and when a step or a parallel block ends, so a step costs more the longer the run. W6:
  plan, \`.foreach(item, { concurrency: 50 })\` (batches of 50, each waiting for its slowest item),
  join. W5: Mastra does not resume by itself; the restarted process calls the documented
  \`Run.restart()\` on each run stored as running.
- **BullMQ**: each shape is a flow of jobs on a local Redis (FlowProducer): a parent job runs
  once its children completed and reads their values. A node with one successor is that
  successor's child (a sequence is a 1,000-deep nested flow); a node with several successors
  adds them itself once its step is done (a job has one parent), under its own parent. A run is
  done when its top job completes, seen on QueueEvents. One Worker per queue, concurrency 50.
  The same code runs on two servers: **BullMQ** on Redis's memory only (no snapshot, no AOF:
  nothing survives a restart of Redis), **BullMQ, Redis AOF everysec** on a Redis the bench
  starts with an append-only file (\`appendonly yes\`, \`appendfsync everysec\`, no snapshots):
  every write is appended to the file and the file fsynced once a second, the durability closest
  to SQLite's synchronous=normal (a crashed process loses nothing, a power cut the last second
  or so). W6: the plan job adds a flow, a join parent with one child per item on a queue whose
  Worker has concurrency 50. W5 (on both servers: the Worker dies, Redis does not): BullMQ's own
  recovery with its defaults: a dead worker's active jobs go back to wait after two stalled-job
  checks (every 30 s) once their 30 s lock expired, about a minute after the restart, past the
  cap.
- **graphile-worker, pg-boss**: queues have no workflows. A run is one job per step: the job runs
  its step, then, in one transaction with the queue's insert, records the step done and enqueues
  each successor whose dependencies are all done, under a lock on the run's row (so a join
  fires once); a job delivered again after its step was recorded skips it. That bookkeeping is
  the bench's code (bench/peers/systems/queue-dag.ts), which a user of a queue writes too.
  W5: graphile-worker leaves the jobs a dead worker had taken locked for 4 hours (fixed in 0.16);
  pg-boss retries them after their expiration (15 minutes by default, seen by maintenance every
  2 minutes): neither resumes those runs within the cap.`;

/** What this run's numbers say beyond the ratios, each sentence built from them. */
function observations(results: Results): string {
  const at = (id: string, s: SystemName, metric: string) => med(results, id, s, metric);
  const lines: string[] = [];
  const pgFirst = at("w5", "skein-pg", "first_resumed_ms");
  if (pgFirst !== null && pgFirst > 10_000) {
    lines.push(
      `Skein on PostgreSQL resumed its first step ${num(pgFirst / 1000)} s after the restart (on SQLite ${num(
        (at("w5", "skein-sqlite", "first_resumed_ms") ?? Number.NaN) / 1000,
      )} s): on PostgreSQL an engine takes over a dead engine's attempts only once the dead one's heartbeat is older than \`engineTimeoutMs\` (30 s by default), even when the dead engine ran on the same host and its pid is gone, which the SQLite store checks to recover at once.`,
    );
  }
  const full = at("w2_c1", "skein-sqlite-full", "p50_ms");
  const lg = at("w2_c1", "langgraph", "p50_ms");
  if (full !== null && lg !== null) {
    lines.push(
      `Durability on SQLite: LangGraph's SqliteSaver runs in WAL mode with synchronous=NORMAL (better-sqlite3's default; SqliteSaver sets none), as Skein does by default, so the SQLite normal rows compare like with like. With synchronous=full (an fsync per commit) Skein's W2 p50 at concurrency 1 is ${num(full)} ms against LangGraph's ${num(lg)} ms at NORMAL.`,
    );
  }
  const pg10 = at("w1", "skein-pg", "step_p50_ms_10");
  const pg1000 = at("w1", "skein-pg", "step_p50_ms_1000");
  const dbos10 = at("w1", "dbos", "step_p50_ms_10");
  const dbos1000 = at("w1", "dbos", "step_p50_ms_1000");
  if (pg10 !== null && pg1000 !== null && dbos10 !== null && dbos1000 !== null) {
    lines.push(
      `W1 on PostgreSQL: Skein ${num(pg10)} ms a step at 10 steps and ${num(pg1000)} ms at 1,000, DBOS ${num(dbos10)} and ${num(dbos1000)}. A Skein step is two round trips to the server (lock and read the run's row, which says whether the engine's copy of the run is current; then write the visit, its events and the next step's claim, and commit) and a WAL flush; DBOS checkpoints a step's output in one transaction and keeps the workflow's state in the process. The run's row is read, not its visits, so the cost does not grow with the chain.`,
    );
  }
  const mastra1000 = at("w1", "mastra", "step_p50_ms_1000");
  const mastra10 = at("w1", "mastra", "step_p50_ms_10");
  if (mastra10 !== null && mastra1000 !== null && mastra1000 > 2 * mastra10) {
    lines.push(
      `Mastra's step costs ${num(mastra10)} ms at 10 steps and ${num(mastra1000)} ms at 1,000: its default engine writes the run's whole snapshot, with every step's result so far, when each step starts and ends, so each step writes more than the last.`,
    );
  }
  const bullmq = at("w2_c32", "bullmq", "runs_per_s");
  const bullmqAof = at("w2_c32", "bullmq-aof", "runs_per_s");
  if (bullmq !== null && bullmqAof !== null) {
    lines.push(
      `BullMQ's W2 at concurrency 32: ${num(bullmq)} runs/s on Redis in memory, ${num(bullmqAof)} with the append-only file fsynced every second (Redis appends each write to the file as it answers, and fsyncs it in a background thread).`,
    );
  }
  const dbosW6 = at("w6_1000", "dbos", "all_done_ms");
  if (dbosW6 !== null && dbosW6 > 5000) {
    lines.push(
      `DBOS took ${num(dbosW6 / 1000)} s for W6's 1,000 items: a WorkflowQueue is dispatched by a loop that polls the database (at most once a second by default), taking at most the queue's free concurrency each time; a lower \`minPollingIntervalMs\` would shorten it, at the cost of more polling.`,
    );
  }
  const skeinW6 = at("w6_1000", "skein-sqlite", "all_done_ms");
  if (skeinW6 !== null) {
    lines.push(
      `Skein's W6 at 1,000 items took ${num(skeinW6)} ms on SQLite: each item of a \`map\` of an agent is a row holding its own attempts (claimed, leased, retried and taken over after a crash like a step, listed by \`listMapItems\`), without a run, a visit or events of its own.`,
    );
  }
  const rerun = at("w5", "skein-sqlite", "rerun_in_flight");
  const lgRerun = at("w5", "langgraph", "rerun_in_flight");
  if (rerun !== null && lgRerun !== null && rerun > lgRerun) {
    lines.push(
      `After the kill Skein ran ${num(rerun)} in-flight steps again (LangGraph ${num(lgRerun)}): a step's result becomes durable with the next flush, which commits every result waiting (group commit), while SqliteSaver writes each finished node's output at once; the kill lands in a burst of steps finishing together, and those whose flush had not committed run again, with the same execution_id for their side effects' idempotency.`,
    );
  }
  const dbosOpen = at("w5", "dbos", "first_resumed_after_open_ms");
  if (dbosOpen !== null) {
    lines.push(
      `DBOS started its first recovered step ${num(dbosOpen)} ms after \`DBOS.launch()\` began: DBOS 5 puts recovered workflows on its internal queue, which its poller picks up.`,
    );
  }
  return lines.length ? `\n## Observations\n\n${lines.map((l) => `- ${l}`).join("\n")}\n` : "";
}

/** What the numbers mean for the targets: written for the misses this machine shows. */
function notes(t: ReturnType<typeof targets>): string {
  const missed = Object.entries(t).filter(([, v]) => !v.ok);
  if (missed.length === 0) return "";
  return `\n## Targets missed\n\n${missed.map(([k]) => `- ${k}: ${NOTES[k] ?? "see the tables above."}`).join("\n")}\n`;
}

/**
 * What holds Skein back when a target is missed, as far as this machine shows it (profiles and
 * the W1 writes), keyed like `targets()`. Printed only for a target this run missed.
 */
const THROUGHPUT_NOTE =
  "at 32 runs in flight Skein on SQLite is bound by the CPU of its one Node thread, which runs the " +
  "32 clients, the engine and SQLite's statements. A CPU profile of the main bench's dag8 at c32 " +
  "(issue 35; 600–650 µs of CPU a run of 8 steps here) shows the runs sharing commits (about 8 " +
  "runs a transaction) and the cost in rows: 26 event rows (every transition is audited; 17% with " +
  "their JSON), 8 visit inserts and 12 visit updates that maintain up to 9 partial indexes (15%), " +
  "the commits' WAL writes (12%), the run rows (6%); the rest is the engine's JavaScript and 7% " +
  "garbage collection. LangGraph writes 3 rows a step and keeps no audit trail. The thread shares " +
  "the machine's 2 cores with the PostgreSQL server and the idle peers, and the ratio moved by a " +
  "quarter from one run to the next on this machine.";
const NOTES: Record<string, string> = {
  w2_c32_vs_langgraph: THROUGHPUT_NOTE,
  w2_c32_vs_dbos: THROUGHPUT_NOTE,
  w2_c1_latency_vs_langgraph:
    "a run at concurrency 1 is 5 transactions of Skein (start, three levels, end), each a SQLite " +
    "commit of about 70 µs plus its statements, and the wake-ups between them; on a loaded machine " +
    "each wake-up waits for a core, which adds the same few milliseconds to every system's latency " +
    "and shrinks the ratio of the fastest one most.",
  w2_c1_latency_vs_dbos: "see w2_c1_latency_vs_langgraph.",
  w2_c32_vs_mastra: THROUGHPUT_NOTE,
  w2_c32_vs_bullmq_aof: THROUGHPUT_NOTE,
  w1_pg_step_10_over_1000: "see the W1 observation.",
  w1_10_pg_vs_dbos: "see the W1 observation.",
  w1_100_pg_vs_dbos: "see the W1 observation.",
  w1_1000_pg_vs_dbos: "see the W1 observation.",
  w6_1000_vs_best_peer: "see the W6 observation.",
  w6_1000_pg_vs_best_pg_peer: "see the W6 observation.",
  w5_pg_first_resumed_after_open_ms:
    "an engine on PostgreSQL takes a dead engine's attempts once the dead one's session lock has " +
    "stayed free for 2 s (FREE_LOCK_GRACE_MS): a live engine whose connections the server cut " +
    "takes up to about 2 s under load to take its lock back, and with a shorter grace fault case b " +
    "ran a live engine's attempt twice (issue 17's note).",
  w3_500_vs_best_peer: "see the W3 table.",
  w5_recovers_no_doubled_effect: "see the W5 table and the failures below.",
};
