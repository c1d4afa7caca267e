/**
 * dag8 across engine processes (postgres section: `dag8_runs_per_s_2engines`,
 * `dag8_runs_per_s_4engines`): the closed-loop dag8 workload of dag8.ts, 200 runs in flight in
 * all, served by 2 and by 4 engine processes (pg-dag8-child.ts, through tsx) on one fresh schema
 * per engine count.
 *
 * Who starts the runs: the engine processes themselves, each with its share of the 200 workers
 * (200 / N), through its own `startRun`, as the one-engine figure does in process. A run's first
 * nodes are claimed by the transaction that inserts it, and what a result makes ready is claimed
 * by the engine that recorded it (maxConcurrency 1000: nothing is left over a limit), so a run
 * stays on the engine that started it and no NOTIFY is needed: the engines share the database
 * (its CPU, its WAL flushes, its indexes) and the machine's cores. The cross-engine hand-off is
 * xproc.ts's measurement. How ends are seen: by each engine's `subscribe`; a run that another
 * engine finished is found by polling the runs table (pg-dag8-child.ts) and counted in meta
 * `polled_runs` (0 when every run stayed where it started).
 *
 * Windows are time-boxed, not counted, so that no engine idles while another finishes its share:
 * the parent picks t0 (300 ms ahead, on the clock the processes share, lib.ts wallNow), and every
 * child runs its loop from t0 to t1 = t0 + WINDOW_S (no run starts later). Throughput is the runs
 * of all engines that ended within [t0, t1], divided by the time from t0 to the last of those
 * ends: the runs of a closed loop move in waves (a flush carries every run that has a result
 * waiting), and dividing by WINDOW_S would count a wave that ended just after t1 as idle time.
 * This is dag8.ts's "first start to last end" over the runs that ended in the box. Latency
 * (meta) is from startRun to the end, of every run started in the window. A warm-up window, then
 * three; the window with the median throughput. Each engine count starts after a CHECKPOINT. The same harness with ONE engine process (meta
 * `engines_1`) shows what the child processes themselves cost against the in-process figure.
 */
import { createClient } from "../src/index.js";
import { BenchChild, type Message } from "./children.js";
import { type Measured, percentile, progress, wallNow } from "./lib.js";
import { checkpoint, tempSchema } from "./postgres.js";
import { DAG8 } from "./workloads.js";

const WINDOW_S = 6;
const WARMUP_S = 2;
const REPETITIONS = 3;
const IN_FLIGHT = 200;

interface LoopReport extends Message {
  type: "loop";
  runs: [number, number][];
  failed: number;
  polled: number;
}

interface Window {
  rate: number;
  latencies: number[];
  perEngine: number[];
  polled: number;
}

export async function benchPgEngines(counts: number[] = [1, 2, 4]): Promise<Measured> {
  const metrics: Record<string, number> = {};
  const meta: Record<string, unknown> = {
    in_flight: IN_FLIGHT,
    window_s: WINDOW_S,
    warmup_s: WARMUP_S,
    windows: REPETITIONS,
    started_by: "the engine processes (200 / N workers each)",
  };
  const failures: string[] = [];
  for (const n of counts) {
    // Each engine count starts from the same quiet server, as each measurement does (run.ts):
    // the WAL of the counts before it is not checkpointed during its windows.
    await checkpoint();
    const { median, sorted, failed } = await served(n);
    if (n > 1) metrics[`dag8_runs_per_s_${n}engines`] = median.rate;
    meta[`engines_${n}`] = {
      runs_per_s: median.rate,
      runs_per_s_min: sorted[0]?.rate ?? 0,
      runs_per_s_max: sorted[sorted.length - 1]?.rate ?? 0,
      p50_ms: percentile(median.latencies, 50),
      p99_ms: percentile(median.latencies, 99),
      runs_per_engine: median.perEngine,
      polled_runs: median.polled,
    };
    if (failed > 0) failures.push(`dag8 on ${n} engines: ${failed} runs did not succeed`);
  }
  return { metrics, meta: { dag8_engines: meta }, failures };
}

/** N engine processes on a fresh schema: the windows, sorted by throughput, and the median one. */
async function served(n: number): Promise<{ median: Window; sorted: Window[]; failed: number }> {
  const db = tempSchema(`dag8_${n}engines`);
  const children: BenchChild[] = [];
  try {
    // Migrates the schema and registers the workflow once, before the engines race to.
    const client = await createClient({ database: db.url });
    try {
      await client.registerWorkflow(DAG8);
    } finally {
      await client.close();
    }
    for (let i = 0; i < n; i++) {
      children.push(new BenchChild(`dag8 engine ${i + 1}/${n}`, "bench/pg-dag8-child.ts", [db.url]));
    }
    await Promise.all(children.map((c) => c.take("ready", 60_000)));
    let failed = 0;
    const window = async (seconds: number): Promise<Window> => {
      const from = wallNow() + 300;
      const until = from + seconds * 1000;
      children.forEach((c, i) => {
        // 200 workers in all, spread as evenly as they go.
        const share = Math.floor(IN_FLIGHT / n) + (i < IN_FLIGHT % n ? 1 : 0);
        c.send({ cmd: "loop", from, until, inFlight: share });
      });
      const reports = await Promise.all(children.map((c) => c.take<LoopReport>("loop", seconds * 1000 + 60_000)));
      const inBox = reports.map((r) => r.runs.filter(([, end]) => end <= until));
      const perEngine = inBox.map((runs) => runs.length);
      const lastEnd = Math.max(from, ...inBox.flatMap((runs) => runs.map(([, end]) => end)));
      failed += reports.reduce((sum, r) => sum + r.failed, 0);
      return {
        rate: lastEnd > from ? (perEngine.reduce((a, b) => a + b, 0) * 1000) / (lastEnd - from) : 0,
        latencies: reports.flatMap((r) => r.runs.map(([start, end]) => end - start)),
        perEngine,
        polled: reports.reduce((sum, r) => sum + r.polled, 0),
      };
    };
    await window(WARMUP_S);
    const windows: Window[] = [];
    for (let r = 0; r < REPETITIONS; r++) {
      const w = await window(WINDOW_S);
      progress(`dag8 on ${n} engine process(es): ${w.rate.toFixed(0)} runs/s (${w.perEngine.join(" + ")} runs)`);
      windows.push(w);
    }
    const sorted = [...windows].sort((a, b) => a.rate - b.rate);
    return { median: sorted[Math.floor(sorted.length / 2)] as Window, sorted, failed };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await db.cleanup();
  }
}
