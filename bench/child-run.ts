/**
 * child_run_overhead_ms: what a `workflow` node (DESIGN §11.1) adds to the work it runs. On a
 * fresh SQLite file, one run at a time: a one-node workflow run directly, and the same node run
 * as the child run of a one-node parent (`workflow` node). Runs alternate (direct, through a
 * child, ...) so both see the same file and machine state; latency is from the startRun call to
 * waitForRun resolving. The metric is p50(through a child) - p50(direct); target < 1 ms.
 */
import { createEngine } from "../src/index.js";
import { type Measured, percentile, progress, tempDb, within } from "./lib.js";

const ONE = { id: "one", nodes: [{ node_id: "work", agent_type: "noop" }] };
const VIA = { id: "via", nodes: [{ node_id: "sub", agent_type: "workflow", payload: { workflow_id: "one" } }] };

export async function benchChildRun({ runs = 300, warmup = 30 } = {}): Promise<Measured> {
  const db = tempDb("child-run");
  try {
    const engine = await createEngine({ database: db.url, agents: { noop: () => ({}) } });
    try {
      await engine.registerWorkflow(ONE);
      await engine.registerWorkflow(VIA);
      const direct: number[] = [];
      const child: number[] = [];
      const once = async (workflow: string): Promise<number> => {
        const t0 = performance.now();
        const run = await engine.startRun(workflow);
        const done = await within(engine.waitForRun(run.run_id), 10_000, `${workflow} run`);
        const t1 = performance.now();
        if (done.status !== "SUCCEEDED") throw new Error(`child run overhead: a ${workflow} run ended ${done.status}`);
        return t1 - t0;
      };
      for (let i = 0; i < warmup + runs; i++) {
        const d = await once("one");
        const c = await once("via");
        if (i >= warmup) {
          direct.push(d);
          child.push(c);
        }
      }
      progress(`child run overhead: ${runs} runs each way`);
      const p50Direct = percentile(direct, 50);
      const p50Child = percentile(child, 50);
      return {
        metrics: { child_run_overhead_ms: p50Child - p50Direct },
        meta: { child_run: { runs, p50_direct_ms: p50Direct, p50_through_child_ms: p50Child } },
      };
    } finally {
      await engine.close();
    }
  } finally {
    db.cleanup();
  }
}
