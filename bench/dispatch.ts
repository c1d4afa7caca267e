/**
 * dispatch50: how fast a fan-out reaches its agents. A parent node with 50 children that
 * depend on it (no-op agents, maxConcurrency 64). Measured from the moment the parent handler
 * returns (performance.now() just before `return`) to the moment the 50th child handler is
 * invoked (performance.now() at its first line): the result check, one transaction that makes
 * the 50 children ready and claims them, the commit, and the dispatch. One run at a time. The
 * `postgres` section's figure is the same on a fresh PostgreSQL schema.
 */
import { createEngine } from "../src/index.js";
import { deferred, type Measured, type NewDb, percentile, progress, tempDb, within } from "./lib.js";
import { FANOUT50, noop } from "./workloads.js";

export async function benchDispatch50({ db: newDb = tempDb as NewDb, reps = 30, warmup = 5 } = {}): Promise<Measured> {
  const db = newDb("dispatch50");
  let parentReturned = 0;
  let children = 0;
  let fiftieth = deferred<number>();
  const engine = await createEngine({
    database: db.url,
    maxConcurrency: 64,
    agents: {
      parent: () => {
        children = 0;
        parentReturned = performance.now();
        return { ok: true };
      },
      child: (task) => {
        const now = performance.now();
        children += 1;
        if (children === 50) fiftieth.resolve(now);
        return noop(task);
      },
    },
  });
  const samples: number[] = [];
  try {
    await engine.registerWorkflow(FANOUT50);
    for (let i = 0; i < warmup + reps; i++) {
      fiftieth = deferred<number>();
      const run = await engine.startRun(FANOUT50.id);
      const at = await within(fiftieth.promise, 10_000, "dispatch50: 50 children");
      const done = await within(engine.waitForRun(run.run_id), 10_000, "dispatch50: run end");
      if (done.status !== "SUCCEEDED") throw new Error(`dispatch50: run ended ${done.status}`);
      if (i >= warmup) samples.push(at - parentReturned);
    }
  } finally {
    await engine.close();
    await db.cleanup();
  }
  progress(`dispatch50: ${samples.length} runs`);
  return {
    metrics: { dispatch50_p50_ms: percentile(samples, 50), dispatch50_p99_ms: percentile(samples, 99) },
    meta: { dispatch50: { runs: samples.length, max_concurrency: 64 } },
  };
}
