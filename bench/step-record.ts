/**
 * Durable steps (DESIGN §14.1, issue 36): what recording one `task.step` costs on SQLite.
 *
 * - `step_record_us`: the p50 of one `await task.step(name, fn)` whose `fn` returns a 200-byte
 *   result at once, recorded and committed before it returns; one visit records steps in a loop,
 *   so each is a transaction of its own (the engine idle otherwise): after a warm-up, the median
 *   of WINDOWS windows' p50s. Target: at most
 *   2 × `transition_p50_ms` (one persisted transition: an update and an event, committed).
 * - `step_record_c100_us`: 100 visits record steps at once, CONCURRENT each: wall time over the
 *   steps recorded. `step_record_c100_steps_per_commit`: steps over the write transactions the
 *   engine committed meanwhile (its skein_transaction_duration_seconds count): group commit
 *   makes it well over 1 (100 concurrent steps do not cost 100 commits).
 *
 * `npx tsx bench/step-record.ts` runs it alone and prints the metrics.
 */
import { fileURLToPath } from "node:url";
import { MeterProvider } from "@opentelemetry/sdk-metrics";
import { createEngine, type Task } from "../src/index.js";
import { type Measured, percentile, progress, tempDb, within } from "./lib.js";
import { OnDemandReader, transactions } from "./transactions.js";

/** Sequential steps per window, windows (the metric is their median p50: this machine is shared), warm-up steps. */
const SEQUENTIAL = 2000;
const WINDOWS = 5;
const WARMUP = 2000;
const VISITS = 100;
const PER_VISIT = 100;
/** A 200-byte result. */
const RESULT = { text: "x".repeat(189) };

export async function benchStepRecord(): Promise<Measured> {
  if (JSON.stringify(RESULT).length !== 200) throw new Error("the step result must be 200 bytes of JSON");
  const db = tempDb("step-record");
  const reader = new OnDemandReader();
  const windows: number[][] = Array.from({ length: WINDOWS }, () => []);
  let mode: "sequential" | "concurrent" = "sequential";
  const engine = await createEngine({
    database: db.url,
    meterProvider: new MeterProvider({ readers: [reader] }),
    agents: {
      stepper: async (task: Task) => {
        const n = mode === "sequential" ? WARMUP + WINDOWS * SEQUENTIAL : PER_VISIT;
        for (let i = 0; i < n; i++) {
          const t0 = performance.now();
          await task.step(`s${i}`, () => RESULT);
          const window = windows[Math.floor((i - WARMUP) / SEQUENTIAL)];
          if (mode === "sequential" && i >= WARMUP) window?.push((performance.now() - t0) * 1000);
        }
        return null;
      },
    },
  });
  try {
    await engine.registerWorkflow({ id: "stepper", nodes: [{ node_id: "s", agent_type: "stepper", timeout: 3600 }] });
    const one = await engine.startRun("stepper");
    await within(engine.waitForRun(one.run_id), 120_000, "the sequential steps");

    mode = "concurrent";
    const before = (await transactions(reader)).count;
    const t0 = performance.now();
    const runs = await Promise.all(Array.from({ length: VISITS }, () => engine.startRun("stepper")));
    await within(Promise.all(runs.map((r) => engine.waitForRun(r.run_id))), 120_000, "the concurrent steps");
    const wallUs = (performance.now() - t0) * 1000;
    const commits = (await transactions(reader)).count - before;
    const steps = VISITS * PER_VISIT;
    const p50s = windows.map((w) => percentile(w, 50)).sort((a, b) => a - b);
    progress(
      `step_record: ${WINDOWS} × ${SEQUENTIAL} sequential steps, ${steps} concurrent in ${commits} transactions`,
    );
    return {
      metrics: {
        step_record_us: p50s[Math.floor(WINDOWS / 2)] as number,
        step_record_c100_us: wallUs / steps,
        step_record_c100_steps_per_commit: steps / commits,
      },
      meta: {
        step_record: {
          windows: WINDOWS,
          per_window: SEQUENTIAL,
          p50_min: p50s[0],
          p50_max: p50s[WINDOWS - 1],
          visits: VISITS,
          per_visit: PER_VISIT,
          commits,
        },
      },
    };
  } finally {
    await engine.close();
    db.cleanup();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(JSON.stringify(await benchStepRecord(), null, 2));
}
