/**
 * postgres.recovery_ms: failover between engines on PostgreSQL. Two engine processes
 * (pg-recovery-child.ts, default options: engineTimeoutMs 30 s, sweepIntervalMs 500 ms) each hold
 * attempts in flight, the victim RUNS of them; the victim is SIGKILLed (and reaped), and the
 * figure is from the kill to the survivor's handler being called for the first of the victim's
 * attempts again (attempt 2), both on the clock the processes share (lib.ts wallNow). The
 * survivor sees the victim's advisory lock free at its next sweep and takes it as dead at the
 * sweep FREE_LOCK_GRACE_MS (2 s) later (the grace a live engine's cut connection gets), so the
 * figure lies between the grace and one sweep interval more, plus the recovering transaction. The kill
 * comes just after the survivor opened, whose first sweep is one interval after it started: the
 * figure is near the worst case, not the average. Its median over TRIALS kills on fresh schemas. Meta: every trial's figure, the time to the last
 * re-run, and the kill to the `node.interrupted` event's database time. Every re-run must carry
 * an execution_id the victim held, at its next attempt; anything else is a failure.
 */
import pg from "pg";
import { BenchChild, type Message } from "./children.js";
import { type Measured, percentile, progress, round, wallNow } from "./lib.js";
import { tempSchema } from "./postgres.js";

const RUNS = 50;
const SURVIVOR_RUNS = 10;
const TRIALS = 5;
const WAIT_MS = 60_000;

interface Trial {
  first_ms: number;
  all_ms: number;
  interrupted_event_ms: number;
}

export async function benchPgRecovery(): Promise<Measured> {
  const failures: string[] = [];
  const trials: Trial[] = [];
  for (let i = 0; i < TRIALS; i++) trials.push(await trial(failures));
  const firsts = trials.map((t) => t.first_ms);
  progress(`pg recovery: ${firsts.map((t) => round(t)).join(", ")} ms to the first re-run`);
  return {
    metrics: { recovery_ms: percentile(firsts, 50) },
    meta: {
      recovery: {
        runs: RUNS,
        survivor_runs: SURVIVOR_RUNS,
        trials: trials.map((t) => ({
          first_ms: round(t.first_ms),
          all_ms: round(t.all_ms),
          interrupted_event_ms: round(t.interrupted_event_ms),
        })),
        max_ms: round(Math.max(...firsts)),
      },
    },
    failures,
  };
}

async function trial(failures: string[]): Promise<Trial> {
  const db = tempSchema("pg_recovery");
  const victim = new BenchChild("pg-recovery victim", "bench/pg-recovery-child.ts", [db.url, "victim", String(RUNS)]);
  let survivor: BenchChild | undefined;
  try {
    const { executions } = await victim.take<Message & { executions: { execution_id: string; attempt: number }[] }>(
      "ready",
      WAIT_MS,
    );
    // Opened once the victim's runs are all claimed: it finds them only by recovering them.
    survivor = new BenchChild("pg-recovery survivor", "bench/pg-recovery-child.ts", [
      db.url,
      "survivor",
      String(SURVIVOR_RUNS),
    ]);
    await survivor.take("ready", WAIT_MS);
    const killedAt = wallNow();
    await victim.kill();
    const held = new Map(executions.map((e) => [e.execution_id, e.attempt]));
    const seen = new Map<string, number>();
    let first = Number.NaN;
    let last = Number.NaN;
    while (seen.size < RUNS) {
      const rerun = await survivor.take<Message & { execution_id: string; attempt: number; at: number }>(
        "rerun",
        WAIT_MS,
      );
      if (seen.size === 0) first = rerun.at - killedAt;
      last = rerun.at - killedAt;
      if (held.get(rerun.execution_id) !== rerun.attempt - 1) {
        failures.push(`pg recovery: re-ran ${rerun.execution_id} at attempt ${rerun.attempt}, not the victim's next`);
      }
      seen.set(rerun.execution_id, rerun.attempt);
    }
    return {
      first_ms: first,
      all_ms: last,
      interrupted_event_ms: (await firstInterruption(db.url, db.schema)) - killedAt,
    };
  } finally {
    await survivor?.stop();
    await victim.kill();
    await db.cleanup();
  }
}

/** The database time of the first node.interrupted event (the recovering transaction's). */
async function firstInterruption(url: string, schema: string): Promise<number> {
  const client = new pg.Client({ connectionString: url.replace(/[?&]schema=[^&]*/, "") });
  await client.connect();
  try {
    const { rows } = await client.query<{ at: number }>(
      `SELECT min(at)::float8 AS at FROM ${pg.escapeIdentifier(schema)}.events WHERE type = 'node.interrupted'`,
    );
    return rows[0]?.at ?? Number.NaN;
  } finally {
    await client.end();
  }
}
