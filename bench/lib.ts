/** Small helpers shared by the bench measurements: temp databases, percentiles, clocks, progress. */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A fresh database for one measurement: `url` for createEngine; `cleanup` removes it (await it: it may be async). */
export interface BenchDb {
  url: string;
  cleanup(): unknown;
}

/** Makes a fresh database named after the measurement: `tempDb` (SQLite) or `tempSchema` (PostgreSQL). */
export type NewDb = (name: string) => BenchDb;

/** A fresh directory for one measurement's SQLite file; `cleanup` removes it. */
export function tempDb(name: string): { path: string; url: string; cleanup(): void } {
  const dir = mkdtempSync(join(process.env.BENCH_TMPDIR ?? tmpdir(), `skein-bench-${name}-`));
  const path = join(dir, "skein.db");
  return { path, url: `sqlite:${path}`, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** What one measurement returns: its metrics (numbers) and anything worth keeping in `meta`. */
export interface Measured {
  metrics: Record<string, number>;
  meta?: Record<string, unknown>;
  /** Problems that make the numbers untrustworthy (reported loudly, exit code 1). */
  failures?: string[];
}

/** Nearest-rank percentile (p in 0..100) of a list of samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

/** Rounds for the report: 3 significant decimals below 1, else 2 decimals. */
export function round(x: number): number {
  if (!Number.isFinite(x)) return x;
  return Math.abs(x) < 1 ? Number(x.toPrecision(3)) : Math.round(x * 100) / 100;
}

/**
 * Epoch ms with sub-ms precision, comparable between processes on this machine: each process's
 * high-resolution start time (performance.timeOrigin, read from the system clock) plus its
 * monotonic time since.
 */
export function wallNow(): number {
  return performance.timeOrigin + performance.now();
}

/** Progress goes to stderr; stdout is kept for the final table. */
export function progress(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

/** A promise with its resolve function exposed (for "the Nth handler call happened"). */
export function deferred<T = void>(): { promise: Promise<T>; resolve(value: T): void; reject(e: unknown): void } {
  let resolve!: (value: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Rejects with a clear message if `promise` has not settled within `ms` (a hung measurement must not hang the bench). */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`bench: ${what} did not finish within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** This process's threads (their ids), from /proc: empty where there is none (not Linux). */
export function threadIds(): Set<string> {
  try {
    return new Set(readdirSync("/proc/self/task"));
  } catch {
    return new Set();
  }
}

/**
 * CPU time in µs of the threads `tids` names (this process's main thread is `String(process.pid)`;
 * an engine's own are those it started, such as its checkpoint thread), from each thread's /proc
 * schedstat; null where there is none (not Linux). A thread that ended in between is not counted.
 * Measuring threads, not the process, leaves out V8's compiler and collector helpers, whose work
 * swings by a third between identical runs.
 */
export function threadsCpuUs(tids: ReadonlySet<string>): number | null {
  let ns = 0;
  try {
    for (const tid of readdirSync("/proc/self/task")) {
      if (tids.has(tid)) ns += Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    }
  } catch {
    return null;
  }
  return ns / 1000;
}
