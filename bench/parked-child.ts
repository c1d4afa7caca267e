/**
 * The process whose memory the parked bench measures: `node --expose-gc --import tsx
 * bench/parked-child.ts <db path> [runs] [ready|waiting]`. An engine with no agent for `nobody`
 * starts 10,000 runs of a one-node `nobody` workflow (ready: parked, never claimed), or of a
 * workflow WAITING in a wait_event and a sleep (waiting), in batches of 500 awaited together.
 * After a global.gc() it prints one JSON line with its memory.
 */
import { createEngine } from "../src/index.js";
import { PARKED, WAITING } from "./workloads.js";

const path = process.argv[2];
const runs = Number(process.argv[3] ?? 10_000);
const workflow = process.argv[4] === "waiting" ? WAITING : PARKED;
const BATCH = 500;
if (!path) throw new Error("usage: parked-child.ts <db path> [runs]");

const gc = (globalThis as { gc?: () => void }).gc;
const engine = await createEngine({ database: `sqlite:${path}` });
try {
  await engine.registerWorkflow(workflow);
  const t0 = performance.now();
  for (let done = 0; done < runs; done += BATCH) {
    const n = Math.min(BATCH, runs - done);
    await Promise.all(Array.from({ length: n }, () => engine.startRun(workflow.id)));
  }
  const startMs = performance.now() - t0;
  gc?.();
  const m = process.memoryUsage();
  const mb = (bytes: number) => bytes / (1024 * 1024);
  const parked = (await engine.listRuns({ status: "RUNNING", limit: runs + 1 })).length;
  process.stdout.write(
    `${JSON.stringify({ runs, parked, start_ms: startMs, gc: gc !== undefined, rss_mb: mb(m.rss), heap_used_mb: mb(m.heapUsed), external_mb: mb(m.external) })}\n`,
  );
} finally {
  await engine.close();
}
