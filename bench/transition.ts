/**
 * transition: the cost of one persisted state transition with the real SqliteStore. Parked runs
 * are created through an engine (their visit is PENDING and ready), the engine is closed, and
 * the store is opened directly. Each sample is one `store.transaction` that updates one visit
 * row and inserts one event, as the engine does for one transition, then commits: the visit
 * flips between RUNNING (a claim: attempt, holder, lease) and RETRYING (ready again), so the
 * partial indexes move as they do in the engine. Timed with performance.now() around the
 * awaited transaction; rows are used round-robin.
 *
 * The `postgres` section's figure is the same with PostgresStore on a fresh schema of the local
 * server at its default durability (synchronous_commit on: each commit waits for the WAL flush).
 * The store's clock is the database's, so each transaction is four round trips: BEGIN (which
 * also reads the time), the visit's UPDATE, the event's INSERT, COMMIT.
 */
import type { Visit } from "../src/core/types.js";
import { createEngine } from "../src/index.js";
import { PostgresStore } from "../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../src/store/sqlite/sqlite-store.js";
import { EMPTY_BATCH, type LoadedRun, type Store } from "../src/store/store.js";
import { type BenchDb, percentile, progress, tempDb } from "./lib.js";
import { tempSchema } from "./postgres.js";
import { PARKED } from "./workloads.js";

const ROWS = 500;

export async function benchTransition(
  synchronous: "normal" | "full",
  samples = 2000,
  warmup = 200,
): Promise<{ p50: number; p99: number }> {
  const db = tempDb(`transition-${synchronous}`);
  const result = await measure(db, () => SqliteStore.open({ path: db.path, synchronous }), samples, warmup);
  progress(`transition (${synchronous}): ${samples} transactions`);
  return result;
}

/** The same on PostgreSQL: a fresh schema, PostgresStore with the database's clock. */
export async function benchPgTransition(samples = 500, warmup = 50): Promise<{ p50: number; p99: number }> {
  const db = tempSchema("transition");
  const url = new URL(db.url);
  url.searchParams.delete("schema");
  const result = await measure(
    db,
    () => PostgresStore.open({ url: url.toString(), schema: db.schema }),
    samples,
    warmup,
  );
  progress(`transition (postgres): ${samples} transactions`);
  return result;
}

async function measure(
  db: BenchDb,
  openStore: () => Promise<Store>,
  samples: number,
  warmup: number,
): Promise<{ p50: number; p99: number }> {
  try {
    const runIds = await parkRuns(db.url, ROWS);
    const store = await openStore();
    try {
      const loaded = (await store.transaction(async (tx) =>
        Promise.all(runIds.map((id) => tx.loadRun(id))),
      )) as (LoadedRun | null)[];
      const visits = loaded.map((r) => r?.visits[0]).filter((v): v is Visit => v !== undefined);
      const traces = new Map(loaded.map((r) => [r?.run.run_id, r?.run.trace_id ?? ""]));
      const times: number[] = [];
      for (let i = 0; i < warmup + samples; i++) {
        const v = visits[i % visits.length] as Visit;
        const t0 = performance.now();
        await store.transaction(async (tx) => {
          const event = flip(v, traces.get(v.run_id) ?? "");
          await tx.write({ ...EMPTY_BATCH, updateVisits: [v] });
          await tx.write({ ...EMPTY_BATCH, events: [event] });
        });
        const t1 = performance.now();
        if (i >= warmup) times.push(t1 - t0);
      }
      return { p50: percentile(times, 50), p99: percentile(times, 99) };
    } finally {
      await store.close();
    }
  } finally {
    await db.cleanup();
  }
}

/** Starts `count` runs that stay parked, then closes the engine. */
async function parkRuns(url: string, count: number): Promise<string[]> {
  const engine = await createEngine({ database: url });
  try {
    await engine.registerWorkflow(PARKED);
    const runs = await Promise.all(Array.from({ length: count }, () => engine.startRun(PARKED.id)));
    return runs.map((r) => r.run_id);
  } finally {
    await engine.close();
  }
}

/** One transition of `v`, as claim() or failAttempt() would make it, and its event. */
function flip(v: Visit, traceId: string) {
  const now = Date.now();
  if (v.state === "RUNNING") {
    v.state = "RETRYING";
    v.failures += 1;
    v.ready_at = now;
    v.holder = null;
    v.deadline_at = null;
    v.lease_expires_at = null;
  } else {
    v.state = "RUNNING";
    v.attempt += 1;
    v.ready_at = null;
    v.holder = "bench";
    v.started_at ??= now;
    v.deadline_at = now + 300_000;
    v.lease_expires_at = v.deadline_at;
  }
  return {
    run_id: v.run_id,
    type: v.state === "RUNNING" ? ("node.started" as const) : ("node.retrying" as const),
    node_id: v.node_id,
    visit: v.visit,
    trace_id: traceId,
    at: now,
    data: { attempt: v.attempt, holder: v.holder },
  };
}
