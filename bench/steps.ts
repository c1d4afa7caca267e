/**
 * step_p50_ms_10 and step_p50_ms_100 (issue 17, W1 of the peers bench): what one step of a
 * sequential chain costs as the chain grows. One run at a time of a chain of N no-op steps
 * (a -> b -> c ...), each run's duration divided by N; p50 over the runs. A per-step cost that
 * grows with N is a transaction reading the whole run where it needs a node and its neighbours.
 */
import { createEngine } from "../src/index.js";
import { type Measured, type NewDb, percentile, progress, tempDb, within } from "./lib.js";
import { noop } from "./workloads.js";

function chain(n: number) {
  return {
    id: `bench-chain${n}`,
    nodes: Array.from({ length: n }, (_, i) => ({
      node_id: `s${i}`,
      agent_type: "step",
      ...(i === 0 ? {} : { depends_on: [`s${i - 1}`] }),
    })),
  };
}

async function perStep(newDb: NewDb, n: number, runs: number, warmup: number): Promise<number[]> {
  const db = newDb(`steps${n}`);
  try {
    const engine = await createEngine({ database: db.url, agents: { step: noop } });
    try {
      const flow = chain(n);
      await engine.registerWorkflow(flow);
      const costs: number[] = [];
      for (let i = 0; i < warmup + runs; i++) {
        const t0 = performance.now();
        const run = await engine.startRun(flow.id);
        const done = await within(engine.waitForRun(run.run_id), 60_000, `chain of ${n}`);
        if (done.status !== "SUCCEEDED") throw new Error(`chain of ${n}: run ended ${done.status}`);
        if (i >= warmup) costs.push((performance.now() - t0) / n);
      }
      return costs;
    } finally {
      await engine.close();
    }
  } finally {
    await db.cleanup();
  }
}

export async function benchSteps({ db = tempDb as NewDb } = {}): Promise<Measured> {
  const ten = await perStep(db, 10, 100, 10);
  const hundred = await perStep(db, 100, 20, 2);
  progress(`steps: ${ten.length} chains of 10, ${hundred.length} chains of 100`);
  return {
    metrics: { step_p50_ms_10: percentile(ten, 50), step_p50_ms_100: percentile(hundred, 50) },
    meta: { steps: { runs_10: ten.length, runs_100: hundred.length } },
  };
}
