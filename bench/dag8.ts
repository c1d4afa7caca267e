/**
 * dag8: the 8-node case-study shape (workloads.ts DAG8) with no-op agents, on a fresh SQLite file
 * (or, for the `postgres` section, a fresh PostgreSQL schema: the same method, smaller windows).
 *
 * - Throughput (`dag8_runs_per_s`, `dag8_p50_ms`, `dag8_p99_ms`): a closed loop of 200 workers,
 *   each starting a run and starting the next one when it ends, for 5,000 runs after a warm-up
 *   (PostgreSQL: 2,000 runs or 10 s, whichever comes first); the median of three such windows.
 *   A run's end is seen through one global `subscribe` listener (run.succeeded/failed/cancelled);
 *   latency is from the startRun call to that event; throughput is measured runs divided by the
 *   time from the first measured start to the last end.
 * - CPU (`dag8_cpu_us_per_run`): this process's user + system CPU over a closed loop of 32
 *   workers (the peers bench's W2 c32), divided by the runs it finished: what a run costs the
 *   machine, which wall time on a shared machine hides. After the windows above, three loops of
 *   1,000 runs (PostgreSQL: 400), and the median loop's figure: one loop moves by ±15 % on a
 *   shared machine. The engine, its store driver and the loop all run in this process (on
 *   PostgreSQL the server's own CPU is not counted).
 * - Serial (`dag8_serial_p50_ms`): one run at a time, from the startRun call to waitForRun
 *   resolving.
 */
import { createEngine, type Engine } from "../src/index.js";
import { deferred, type Measured, type NewDb, percentile, progress, tempDb, within } from "./lib.js";
import { DAG8, DAG8_AGENTS } from "./workloads.js";

/** Stops issuing new runs after this long, so a slow engine cannot blow the bench's time budget. */
const MAX_LOOP_MS = 60_000;

/** The CPU loop's workers: the peers bench's W2 concurrency (c32). */
const CPU_IN_FLIGHT = 32;

async function withEngine<T>(newDb: NewDb, name: string, fn: (engine: Engine) => Promise<T>): Promise<T> {
  const db = newDb(name);
  try {
    const engine = await createEngine({ database: db.url, agents: DAG8_AGENTS, maxConcurrency: 1000 });
    try {
      await engine.registerWorkflow(DAG8);
      return await fn(engine);
    } finally {
      await engine.close();
    }
  } finally {
    await db.cleanup();
  }
}

/**
 * Resolves run ends seen by one global listener; an end may arrive before startRun resolves.
 * `now` stamps each end (performance.now, or wallNow where processes compare times).
 */
export class RunEnds {
  private readonly waiting = new Map<string, (end: { at: number; type: string }) => void>();
  private readonly early = new Map<string, { at: number; type: string }>();

  constructor(
    engine: Engine,
    private readonly now: () => number = () => performance.now(),
  ) {
    engine.subscribe((e) => {
      if (e.type !== "run.succeeded" && e.type !== "run.failed" && e.type !== "run.cancelled") return;
      const end = { at: this.now(), type: e.type };
      const resolve = this.waiting.get(e.run_id);
      if (resolve) {
        this.waiting.delete(e.run_id);
        resolve(end);
      } else this.early.set(e.run_id, end);
    });
  }

  wait(runId: string): Promise<{ at: number; type: string }> {
    const early = this.early.get(runId);
    if (early) {
      this.early.delete(runId);
      return Promise.resolve(early);
    }
    const d = deferred<{ at: number; type: string }>();
    this.waiting.set(runId, d.resolve);
    return d.promise;
  }

  /** Runs waited for whose end has not been seen here (ended by another engine, or not yet). */
  waitedFor(): string[] {
    return [...this.waiting.keys()];
  }

  /** Ends a wait from outside (an end seen another way, e.g. in the database). */
  resolve(runId: string, end: { at: number; type: string }): void {
    const resolve = this.waiting.get(runId);
    this.waiting.delete(runId);
    resolve?.(end);
  }
}

/** Runs `total` runs with `inFlight` workers; returns latencies and the measured window. */
export async function closedLoop(engine: Engine, ends: RunEnds, total: number, inFlight: number, maxLoopMs: number) {
  const latencies: number[] = [];
  let issued = 0;
  let failed = 0;
  const first = performance.now();
  let last = first;
  const worker = async () => {
    while (issued < total && performance.now() - first < maxLoopMs) {
      issued += 1;
      const t0 = performance.now();
      const run = await engine.startRun(DAG8.id);
      const end = await ends.wait(run.run_id);
      if (end.type !== "run.succeeded") failed += 1;
      latencies.push(end.at - t0);
      last = Math.max(last, end.at);
    }
  };
  await within(Promise.all(Array.from({ length: inFlight }, worker)), maxLoopMs + 30_000, "dag8 closed loop");
  if (failed > 0) throw new Error(`dag8: ${failed} runs did not succeed`);
  return { latencies, seconds: (last - first) / 1000 };
}

/**
 * The closed loop settles into waves of runs moving together, so one 5,000-run window varies
 * by ±20% from one repetition to the next: the metric is the median of three windows.
 */
export async function benchDag8({
  db = tempDb as NewDb,
  total = 5000,
  inFlight = 200,
  warmup = 500,
  repetitions = 3,
  maxLoopMs = MAX_LOOP_MS,
  cpuRuns = 1000,
} = {}): Promise<Measured> {
  return withEngine(db, "dag8", async (engine) => {
    const ends = new RunEnds(engine);
    await closedLoop(engine, ends, warmup, inFlight, maxLoopMs);
    progress(`dag8: warm-up of ${warmup} runs done`);
    const windows: { rate: number; latencies: number[]; seconds: number }[] = [];
    for (let r = 0; r < repetitions; r++) {
      const { latencies, seconds } = await closedLoop(engine, ends, total, inFlight, maxLoopMs);
      if (latencies.length < total) progress(`dag8: stopped after ${latencies.length} runs (time cap)`);
      progress(`dag8: ${latencies.length} runs in ${seconds.toFixed(2)} s`);
      windows.push({ rate: latencies.length / seconds, latencies, seconds });
    }
    const cpuLoops: { usPerRun: number; runs: number; userMs: number; systemMs: number }[] = [];
    for (let r = 0; r < repetitions; r++) cpuLoops.push(await cpuLoop(engine, ends, cpuRuns, maxLoopMs));
    cpuLoops.sort((a, b) => a.usPerRun - b.usPerRun);
    const cpu = cpuLoops[Math.floor(cpuLoops.length / 2)] as (typeof cpuLoops)[number];
    const sorted = [...windows].sort((a, b) => a.rate - b.rate);
    const median = sorted[Math.floor(sorted.length / 2)] as (typeof windows)[number];
    return {
      metrics: {
        dag8_runs_per_s: median.rate,
        dag8_p50_ms: percentile(median.latencies, 50),
        dag8_p99_ms: percentile(median.latencies, 99),
        dag8_cpu_us_per_run: cpu.usPerRun,
      },
      meta: {
        dag8: {
          runs_per_window: total,
          windows: repetitions,
          runs_per_s_min: sorted[0]?.rate ?? 0,
          runs_per_s_max: sorted[sorted.length - 1]?.rate ?? 0,
          in_flight: inFlight,
          warmup_runs: warmup,
          max_window_s: maxLoopMs / 1000,
          cpu_runs_per_loop: cpu.runs,
          cpu_loops: cpuLoops.length,
          cpu_in_flight: CPU_IN_FLIGHT,
          cpu_us_per_run_min: cpuLoops[0]?.usPerRun ?? 0,
          cpu_us_per_run_max: cpuLoops[cpuLoops.length - 1]?.usPerRun ?? 0,
          cpu_user_ms: cpu.userMs,
          cpu_system_ms: cpu.systemMs,
        },
      },
    };
  });
}

/** One CPU loop: `runs` runs at CPU_IN_FLIGHT, and this process's CPU over them. */
async function cpuLoop(engine: Engine, ends: RunEnds, runs: number, maxLoopMs: number) {
  const before = process.cpuUsage();
  const { latencies } = await closedLoop(engine, ends, runs, CPU_IN_FLIGHT, maxLoopMs);
  const used = process.cpuUsage(before);
  const usPerRun = (used.user + used.system) / latencies.length;
  progress(`dag8: ${latencies.length} runs at ${CPU_IN_FLIGHT} in flight, ${usPerRun.toFixed(0)} µs of CPU each`);
  return { usPerRun, runs: latencies.length, userMs: used.user / 1000, systemMs: used.system / 1000 };
}

export async function benchDag8Serial({ db = tempDb as NewDb, runs = 300, warmup = 30 } = {}): Promise<Measured> {
  return withEngine(db, "dag8-serial", async (engine) => {
    const latencies: number[] = [];
    for (let i = 0; i < warmup + runs; i++) {
      const t0 = performance.now();
      const run = await engine.startRun(DAG8.id);
      const done = await within(engine.waitForRun(run.run_id), 10_000, "dag8 serial run");
      const t1 = performance.now();
      if (done.status !== "SUCCEEDED") throw new Error(`dag8 serial: run ended ${done.status}`);
      if (i >= warmup) latencies.push(t1 - t0);
    }
    progress(`dag8 serial: ${latencies.length} runs`);
    return {
      metrics: { dag8_serial_p50_ms: percentile(latencies, 50), dag8_serial_p99_ms: percentile(latencies, 99) },
    };
  });
}
