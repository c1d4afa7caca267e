/**
 * schedules10k_sweep_ms (DESIGN §11.5): the time of the one flush (a sweep) that fires 100 due
 * schedules in a database holding 10,000. 9,900 schedules fire once a year (`0 0 1 1 *`), 100
 * every minute (`* * * * *`, overlap "allow", so every slot starts a run); their workflow's only
 * node has no agent, so the 100 new runs park ready and nothing follows the sweep. The engine
 * runs on a ManualClock (SQLite file, synchronous=normal): each window moves it to the next
 * minute, which fires the engine's wake-up timer (nextDue: the schedules' next slot) and so one
 * sweep transaction: reading the due schedules by the `schedules_due` index, 100 runs started
 * (each checked against its idempotency key and written with its visits and events), 100
 * schedules advanced, the commit. Its duration is the engine's own measurement of the
 * transaction (the `skein_transaction_duration_seconds` histogram, read from an in-memory
 * MeterProvider: the sum it gained in that window, which must have exactly one transaction).
 * The metric is the median of WINDOWS windows; meta.schedules has min, max and each window's
 * wall time from moving the clock to the engine being idle.
 */
import { MeterProvider } from "@opentelemetry/sdk-metrics";
import { createEngine, type Engine, ManualClock } from "../src/index.js";
import { type Measured, progress, tempDb } from "./lib.js";
import { OnDemandReader, transactions } from "./transactions.js";
import { PARKED } from "./workloads.js";

const SCHEDULES = 10_000;
const DUE = 100;
const WINDOWS = 11;
const MINUTE = 60_000;
const HOUR = 3_600_000;

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Until no flush is queued or running (nothing follows the sweep: no agent serves the runs). */
async function idle(engine: Engine): Promise<void> {
  for (let quiet = 0; quiet < 2; ) {
    await turn();
    quiet = engine.activity().working ? 0 : quiet + 1;
  }
}

export async function benchSchedules(): Promise<Measured> {
  const db = tempDb("schedules");
  const reader = new OnDemandReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  // Half a minute past midnight: the every-minute schedules are next due at 00:01.
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 30));
  const engine = await createEngine({
    database: db.url,
    clock,
    meterProvider,
    // Only the wake-up timer sweeps: the periodic sweep and the heartbeat stay out of the windows.
    sweepIntervalMs: 24 * HOUR,
    heartbeatIntervalMs: 24 * HOUR,
    engineTimeoutMs: 72 * HOUR,
  });
  try {
    await engine.registerWorkflow(PARKED);
    const t0 = performance.now();
    for (let i = 0; i < SCHEDULES; i += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, SCHEDULES - i) }, (_, k) => {
          const n = i + k;
          const due = n % (SCHEDULES / DUE) === 0;
          return engine.putSchedule({
            schedule_id: `s${String(n).padStart(5, "0")}`,
            workflow_id: PARKED.id,
            cron: due ? "* * * * *" : "0 0 1 1 *",
            overlap: "allow",
          });
        }),
      );
    }
    progress(`schedules: ${SCHEDULES} schedules put in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    await idle(engine);
    const sweeps: number[] = [];
    const walls: number[] = [];
    const failures: string[] = [];
    for (let w = 0; w < WINDOWS; w++) {
      const before = await transactions(reader);
      const runsBefore = (await engine.listRuns({ limit: 100_000 })).length;
      const started = performance.now();
      // The next minute: the wake-up timer fires the sweep.
      await clock.advance(MINUTE);
      await idle(engine);
      walls.push(performance.now() - started);
      const after = await transactions(reader);
      const fired = (await engine.listRuns({ limit: 100_000 })).length - runsBefore;
      if (fired !== DUE) failures.push(`schedules: window ${w} started ${fired} runs, not ${DUE}`);
      if (after.count - before.count !== 1) {
        failures.push(`schedules: window ${w} had ${after.count - before.count} transactions, not the one sweep`);
      }
      sweeps.push((after.sum - before.sum) * 1000);
    }
    const sorted = [...sweeps].sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)] as number;
    return {
      metrics: { schedules10k_sweep_ms: median },
      meta: {
        schedules: {
          schedules: SCHEDULES,
          due: DUE,
          windows: WINDOWS,
          sweep_ms_min: sorted[0],
          sweep_ms_max: sorted[sorted.length - 1],
          wall_ms: walls,
        },
      },
      failures,
    };
  } finally {
    await engine.close();
    await meterProvider.shutdown();
    db.cleanup();
  }
}
