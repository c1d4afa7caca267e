/**
 * waiting10k_rss_mb (benchWaiting): the same for 10,000 runs WAITING in a wait_event and a
 * sleep (DESIGN §11: a waiting run costs the engine nothing until its due time or its event).
 *
 * parked10k_rss_mb: the resident memory of an engine process holding 10,000 parked runs (their
 * only node is ready but no agent serves it). Measured in a child process of its own
 * (parked-child.ts, run with --expose-gc) so the bench's other work does not count: rss after a
 * global.gc() once every run is started. meta.parked.baseline_rss_mb is the same process with one
 * run (node + tsx's loader thread + an engine), so the runs' own share is the difference.
 */
import { spawn } from "node:child_process";
import { type Measured, progress, tempDb, within } from "./lib.js";

export async function benchParked(runs = 10_000): Promise<Measured> {
  // The same process with one run: what the runtime (node, tsx's loader thread, the engine) costs by itself.
  const baseline = await parkedChild(1);
  const result = await parkedChild(runs);
  const failures = result.parked === runs ? [] : [`parked: ${result.parked} of ${runs} runs are RUNNING`];
  if (!result.gc) failures.push("parked: global.gc was not exposed; rss includes garbage");
  progress(`parked: ${result.parked} runs parked, started in ${(result.start_ms / 1000).toFixed(1)} s`);
  return {
    metrics: { parked10k_rss_mb: result.rss_mb },
    meta: { parked: { ...result, baseline_rss_mb: baseline.rss_mb } },
    failures,
  };
}

export async function benchWaiting(runs = 10_000): Promise<Measured> {
  const baseline = await parkedChild(1, "waiting");
  const result = await parkedChild(runs, "waiting");
  const failures = result.parked === runs ? [] : [`waiting: ${result.parked} of ${runs} runs are RUNNING`];
  if (!result.gc) failures.push("waiting: global.gc was not exposed; rss includes garbage");
  progress(`waiting: ${result.parked} runs waiting, started in ${(result.start_ms / 1000).toFixed(1)} s`);
  return {
    metrics: { waiting10k_rss_mb: result.rss_mb },
    meta: { waiting: { ...result, baseline_rss_mb: baseline.rss_mb } },
    failures,
  };
}

interface ChildReport {
  runs: number;
  parked: number;
  start_ms: number;
  gc: boolean;
  rss_mb: number;
  heap_used_mb: number;
}

async function parkedChild(runs: number, workload: "ready" | "waiting" = "ready"): Promise<ChildReport> {
  const db = tempDb("parked");
  try {
    const child = spawn(
      process.execPath,
      ["--expose-gc", "--import", "tsx", "bench/parked-child.ts", db.path, String(runs), workload],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      out += chunk;
    });
    const code = await within(
      new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c))),
      120_000,
      "parked child",
    ).catch((e: unknown) => {
      child.kill("SIGKILL");
      throw e;
    });
    if (code !== 0) throw new Error(`parked child exited with ${code}`);
    return JSON.parse(out.trim().split("\n").pop() ?? "{}") as ChildReport;
  } finally {
    db.cleanup();
  }
}
