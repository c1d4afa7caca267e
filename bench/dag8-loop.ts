/**
 * dag8's closed loops, apart from any engine: they take the engine they drive, and import only
 * its types, so the guard (guard.ts) can drive another checkout's engine with them.
 */
import type { Engine } from "../src/index.js";
import { deferred, progress, within } from "./lib.js";
import { DAG8 } from "./workloads.js";

/** The CPU loop's workers: the peers bench's W2 concurrency (c32). */
export const CPU_IN_FLIGHT = 32;

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

/** One CPU loop: `runs` runs at CPU_IN_FLIGHT, and this process's CPU over them. */
export async function cpuLoop(engine: Engine, ends: RunEnds, runs: number, maxLoopMs: number) {
  const before = process.cpuUsage();
  const { latencies } = await closedLoop(engine, ends, runs, CPU_IN_FLIGHT, maxLoopMs);
  const used = process.cpuUsage(before);
  const usPerRun = (used.user + used.system) / latencies.length;
  progress(`dag8: ${latencies.length} runs at ${CPU_IN_FLIGHT} in flight, ${usPerRun.toFixed(0)} µs of CPU each`);
  return { usPerRun, runs: latencies.length, userMs: used.user / 1000, systemMs: used.system / 1000 };
}
