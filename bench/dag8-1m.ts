/**
 * dag8_runs_per_s_1m: dag8's throughput (dag8.ts's closed loop: 200 workers, 5,000-run windows
 * after a 500-run warm-up, the median of three) on a SQLite file that already holds 1,000,000
 * finished dag8 runs, against an empty file served beside it in the same process, windows
 * alternating (`dag8_runs_per_s_1m_empty`; target: at least 0.8 of it): the two sides share the
 * machine's moment, which dag8_runs_per_s, measured alone at another time, does not. What grows
 * with the history must not slow a new run: no statement of the hot path may scan runs, visits
 * or events.
 *
 * The file is made by Skein (migrations, the workflow, one real dag8 run as the template), then
 * filled directly with SQL, one INSERT ... SELECT per table and chunk: per run, the template's
 * run row, its 8 visits and its 26 events (the rows a real dag8 run leaves, with the same
 * columns and values), under a fresh UUIDv7-shaped run_id older than any new run's, with every
 * time column moved back so that the runs ended one every 2 s over the ~23 days before now.
 * About 35 million rows (a few GB); the fill is not part of the measured time.
 */
import Database from "better-sqlite3";
import { createEngine, type Engine } from "../src/index.js";
import { closedLoop, RunEnds } from "./dag8-loop.js";
import { type Measured, progress, tempDb } from "./lib.js";
import { DAG8, DAG8_AGENTS } from "./workloads.js";

const RUNS = 1_000_000;
/** Runs per fill transaction: a bounded WAL, checkpointed after each. */
const CHUNK = 50_000;
/** How far apart the history's runs ended, ms. */
const SPACING_MS = 2000;
/** A window stops issuing runs after this long (as dag8.ts's). */
const MAX_WINDOW_MS = 60_000;

/** Makes the file, with one real dag8 run in it; returns that run's id (the template). */
async function templateRun(url: string): Promise<string> {
  const engine = await createEngine({ database: url, agents: DAG8_AGENTS });
  try {
    await engine.registerWorkflow(DAG8);
    const run = await engine.startRun(DAG8.id);
    const done = await engine.waitForRun(run.run_id);
    if (done.status !== "SUCCEEDED") throw new Error(`dag8_1m: the template run ended ${done.status}`);
    return run.run_id;
  } finally {
    await engine.close();
  }
}

/**
 * The SELECT list copying a template row of `table` for run number `i`: the run id replaced,
 * every `*_at` column moved by `delta` (a column bound per row by the CTE), the rest as is.
 */
function copyColumns(db: Database.Database, table: string, overrides: Record<string, string>): string[] {
  const columns = (db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((c) => c.name);
  return columns.map((c) => {
    if (overrides[c] !== undefined) return `${overrides[c]} AS ${c}`;
    if (c.endsWith("_at")) return `t.${c} - n.delta AS ${c}`;
    return `t.${c}`;
  });
}

/** Fills the file with RUNS finished copies of the template run. */
function fill(path: string, templateId: string, runs: number): void {
  const db = new Database(path);
  try {
    db.pragma("synchronous = OFF");
    db.pragma("cache_size = -262144");
    const runId = "printf('0180%04x-%04x-7000-8000-%012x', n.i / 65536, n.i % 65536, n.i)";
    // delta: how far back run i is moved, so that the last one ended a day before the template.
    const numbers = `WITH RECURSIVE n(i, delta) AS (
        SELECT @from, 86400000 + (@total - @from) * ${SPACING_MS}
        UNION ALL SELECT i + 1, 86400000 + (@total - i - 1) * ${SPACING_MS} FROM n WHERE i + 1 < @to)`;
    const insert = (table: string, overrides: Record<string, string>, order: string) => {
      const columns = copyColumns(db, table, overrides);
      return db.prepare(
        `INSERT INTO ${table} (${columns.map((c) => c.split(" AS ").pop()?.replace(/^t\./, "")).join(", ")})
         ${numbers} SELECT ${columns.join(", ")} FROM n CROSS JOIN ${table} t WHERE t.run_id = @template ORDER BY n.i, ${order}`,
      );
    };
    const lastSeq = db.prepare("SELECT max(last_seq) FROM event_batches").pluck().get() as number;
    const statements = [
      insert("runs", { run_id: runId, idempotency_key: "NULL" }, "t.run_id"),
      insert(
        "visits",
        { run_id: runId, execution_id: `${runId} || ':' || t.node_id || ':' || t.visit` },
        "t.node_id, t.visit",
      ),
      // A row per run and transaction (migration 020), keyed by its last seq: run i's copies get
      // the template's seqs moved past every copy before it, so no two rows' seqs overlap.
      insert("event_batches", { run_id: runId, last_seq: `t.last_seq + (n.i + 1) * ${lastSeq}` }, "t.last_seq"),
    ];
    for (let from = 0; from < runs; from += CHUNK) {
      const params = { from, to: Math.min(runs, from + CHUNK), total: runs, template: templateId };
      db.transaction(() => {
        for (const s of statements) s.run(params);
      })();
      db.pragma("wal_checkpoint(TRUNCATE)");
      if ((from / CHUNK) % 4 === 3) progress(`dag8_1m: ${from + CHUNK} runs in the file`);
    }
    // No ANALYZE: Skein never runs one, so the planner sees the file as a user's would.
    const written = db.prepare("SELECT count(*) FROM runs").pluck().get() as number;
    if (written !== runs + 1) throw new Error(`dag8_1m: the file holds ${written} runs, not ${runs + 1}`);
  } finally {
    db.close();
  }
}

/** An engine serving dag8 on `url`, with its run-end listener. */
async function dag8Engine(url: string): Promise<{ engine: Engine; ends: RunEnds }> {
  const engine = await createEngine({ database: url, agents: DAG8_AGENTS, maxConcurrency: 1000 });
  await engine.registerWorkflow(DAG8);
  return { engine, ends: new RunEnds(engine) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/**
 * The windows alternate between the filled file and an empty one, served side by side in this
 * process: on a machine whose load drifts (other processes share its cores), the ratio of the
 * two medians is what the history costs, where the two metrics alone move by 2x.
 */
export async function benchDag8OneMillion({
  runs = RUNS,
  total = 5000,
  inFlight = 200,
  warmup = 500,
  windows = 3,
} = {}): Promise<Measured> {
  const filled = tempDb("dag8-1m");
  const empty = tempDb("dag8-1m-empty");
  const open: Engine[] = [];
  try {
    const t0 = performance.now();
    const template = await templateRun(filled.url);
    fill(filled.path, template, runs);
    const fillSeconds = (performance.now() - t0) / 1000;
    progress(`dag8_1m: ${runs} finished runs written in ${fillSeconds.toFixed(1)} s`);
    const sides = { filled: await dag8Engine(filled.url), empty: await dag8Engine(empty.url) };
    open.push(sides.filled.engine, sides.empty.engine);
    const rates: Record<keyof typeof sides, number[]> = { filled: [], empty: [] };
    for (const side of ["filled", "empty"] as const) {
      await closedLoop(sides[side].engine, sides[side].ends, warmup, inFlight, MAX_WINDOW_MS);
    }
    for (let w = 0; w < windows; w++) {
      for (const side of ["filled", "empty"] as const) {
        const { latencies, seconds } = await closedLoop(
          sides[side].engine,
          sides[side].ends,
          total,
          inFlight,
          MAX_WINDOW_MS,
        );
        rates[side].push(latencies.length / seconds);
        progress(`dag8_1m: ${side} file: ${latencies.length} runs in ${seconds.toFixed(2)} s`);
      }
    }
    const filledRate = median(rates.filled);
    const emptyRate = median(rates.empty);
    return {
      metrics: { dag8_runs_per_s_1m: filledRate, dag8_runs_per_s_1m_empty: emptyRate },
      meta: {
        dag8_1m: {
          history_runs: runs,
          history_rows_per_run: "1 run, 8 visits, 26 events (a real dag8 run's rows)",
          fill_s: fillSeconds,
          runs_per_window: total,
          windows,
          in_flight: inFlight,
          warmup_runs: warmup,
          runs_per_s_filled: rates.filled,
          runs_per_s_empty_alternating: rates.empty,
          ratio_to_empty_alternating: filledRate / emptyRate,
        },
      },
    };
  } finally {
    await Promise.all(open.map((e) => e.close()));
    filled.cleanup();
    empty.cleanup();
  }
}
