/**
 * claims (issue 40, DESIGN §17): what claiming costs when runs carry flow control, against the
 * same work without. A window parks RUNS one-node runs ready on a fresh SQLite file per variant
 * (an engine that serves no handler for their agent type starts them, so nothing claims them),
 * then opens an engine on each file whose handler for that type returns at once under
 * `agentConcurrency` of LIMIT: every attempt is claimed from the database's backlog by the claim
 * query, a few at a time as slots free, which is where priorities and keys change the work.
 *
 * The engines take turns of CHUNK attempts, one variant after another in a round (each round
 * starting with the next one), the others idle meanwhile: a round takes a fraction of a second,
 * so every variant's attempts run on the same machine as the baseline's (`default`), whose state
 * swings by a third within seconds on a shared host. A variant's figure for a window is the CPU
 * of its engine's threads over its attempts: the main thread's during its turns (the claim with
 * the result, the dispatch and the commits, the same in every variant but for the start
 * options) and its checkpoint thread's over the window (the WAL pages those commits wrote),
 * from /proc's schedstat. V8's compiler and collector helper threads are left out: their work
 * swings by a third between identical windows (the process's CPU is kept in `meta`).
 * `claim_cpu_us_<variant>` is the median over WINDOWS, `claim_cpu_<variant>_ratio` the mean over
 * them of the variant's figure over the baseline's, each window opening the engines in another
 * order (the first opened cost a few percent more). A first window is not counted (the JIT's
 * warming).
 *
 * A variant is its startRun options per run and, if it needs one, a setup of the engine that
 * parks the runs (registering more workflows, say). The variants with priorities are checked
 * too: their attempts must start in priority order.
 */

import { createEngine, type Engine, type StartRunOptions } from "../src/index.js";
import { type BenchDb, deferred, type Measured, progress, tempDb, threadIds, threadsCpuUs, within } from "./lib.js";

/** One way to start the same runs, measured against the others. */
export interface ClaimVariant {
  /** Its name in the metrics (`claim_cpu_us_<name>`). */
  name: string;
  /** startRun's options for the `i`-th run, beside the input `{ i }` every variant gives. */
  start(i: number): StartRunOptions;
  /** What the engine that parks the runs needs first (workflows beside CLAIM_WORKFLOW), if anything. */
  setup?(engine: Engine): Promise<void>;
  /** A problem with the order the attempts started in (their runs' `i`), or null. */
  check?(started: number[]): string | null;
}

/** The one node every run has: its agent type is the one the measuring engine limits. */
export const CLAIM_WORKFLOW = { id: "bench-claims", nodes: [{ node_id: "work", agent_type: "work" }] };

const PRIORITIES = 10;

/** Attempts must start in priority order (runs started with priority `i % PRIORITIES`). */
function inPriorityOrder(started: number[]): string | null {
  const priorities = started.map((i) => i % PRIORITIES);
  const back = priorities.findIndex((p, k) => k > 0 && p < (priorities[k - 1] as number));
  return back < 0
    ? null
    : `attempt ${back} started at priority ${priorities[back]} after one at ${priorities[back - 1]}`;
}

/**
 * The baseline, then priorities, keys (each run its own key: every end of a keyed run looks for
 * a run queued behind it, which is what keys add to the claims' commits), and both. Priorities
 * interleaved (run i has priority i mod 10) are claimed in another order than they were parked,
 * so each commit touches rows on more pages than the baseline's; `priorities_parked_in_order`
 * (runs parked a priority after another: claimed in the order they were written) measures the
 * claims' own cost of priorities without that, to tell the two apart.
 */
export const CLAIM_VARIANTS: ClaimVariant[] = [
  { name: "default", start: () => ({}) },
  { name: "priorities", start: (i) => ({ priority: i % PRIORITIES }), check: inPriorityOrder },
  {
    name: "priorities_parked_in_order",
    start: (i) => ({ priority: Math.floor((i * PRIORITIES) / RUNS) }),
    check: (started) => inPriorityOrder(started.map((i) => Math.floor((i * PRIORITIES) / RUNS))),
  },
  { name: "keys", start: (i) => ({ key: `k${i}` }) },
  { name: "priorities_keys", start: (i) => ({ priority: i % PRIORITIES, key: `k${i}` }), check: inPriorityOrder },
];

const RUNS = 2000;
const LIMIT = 4;
/** Attempts a lane runs at a turn: the unit whose CPU is measured. */
const CHUNK = 100;
/** Windows: each parks every variant's runs afresh and takes RUNS / CHUNK turns of each (a multiple of the variants' count). */
const WINDOWS = 5;
/** Runs started at once while parking them (the start flushes take them in batches). */
const START_BATCH = 200;

/** A variant's runs parked ready in a fresh SQLite file, for one window to claim. */
async function park(variant: ClaimVariant): Promise<BenchDb> {
  const db = tempDb(`claims-${variant.name}`);
  // Parked: no handler for `work` here, so every run's visit waits ready in the file.
  const parking = await createEngine({ database: db.url });
  try {
    await parking.registerWorkflow(CLAIM_WORKFLOW);
    await variant.setup?.(parking);
    for (let i = 0; i < RUNS; i += START_BATCH) {
      const batch = Array.from({ length: Math.min(START_BATCH, RUNS - i) }, (_, k) => i + k);
      await Promise.all(
        batch.map((n) => parking.startRun(CLAIM_WORKFLOW.id, { input: { i: n }, ...variant.start(n) })),
      );
    }
  } finally {
    await parking.close();
  }
  return db;
}

/**
 * A variant's engine on the file `park` made, whose handler lets attempts return only as far as
 * its turns allow: `turn` lets CHUNK more go and resolves once their runs have ended.
 */
interface Lane {
  variant: ClaimVariant;
  turn(): Promise<void>;
  /** The CPU its turns took so far, µs: the main thread's during them, and all its own threads' (its checkpoints, whenever they ran); the process's during them, for comparison. */
  used(): { engineUs: number | null; processUs: number };
  /** The runs' `i` in the order their attempts started. */
  started: number[];
  close(): Promise<void>;
}

async function openLane(variant: ClaimVariant, db: BenchDb): Promise<Lane> {
  const started: number[] = [];
  let allowed = 0;
  let ends = 0;
  let letGo = deferred();
  let ended = deferred();
  const before = threadIds();
  const engine = await createEngine({
    database: db.url,
    agentConcurrency: { work: LIMIT },
    agents: {
      work: async (task) => {
        const n = started.push((task.input as { i: number }).i);
        while (n > allowed) await letGo.promise;
        return { ok: true };
      },
    },
  });
  // The threads the engine started (its checkpoints'): not those of the engines opened after it.
  const own = new Set([...threadIds()].filter((tid) => !before.has(tid)));
  const main = new Set([String(process.pid)]);
  const ownAtStart = threadsCpuUs(own);
  let mainUs: number | null = 0;
  let processUs = 0;
  engine.subscribe((e) => {
    if (e.type === "run.succeeded" && ++ends === allowed) ended.resolve();
  });
  return {
    variant,
    started,
    async turn() {
      const cpu = { main: threadsCpuUs(main), process: process.cpuUsage() };
      allowed = Math.min(RUNS, allowed + CHUNK);
      ended = deferred();
      const go = letGo;
      letGo = deferred();
      go.resolve();
      await within(ended.promise, 60_000, `claims: ${variant.name}'s attempts up to ${allowed}`);
      const mainNow = threadsCpuUs(main);
      const used = process.cpuUsage(cpu.process);
      mainUs = mainUs === null || mainNow === null || cpu.main === null ? null : mainUs + mainNow - cpu.main;
      processUs += used.user + used.system;
    },
    used() {
      const ownNow = threadsCpuUs(own);
      const ownUs = ownNow === null || ownAtStart === null ? null : ownNow - ownAtStart;
      return { engineUs: mainUs === null || ownUs === null ? null : mainUs + ownUs, processUs };
    },
    async close() {
      await engine.close();
      await db.cleanup();
    },
  };
}

/** Figures of a variant, a window each: CPU per attempt, and the same over the baseline's. */
interface Figures {
  engine: number[];
  process: number[];
  ratios: number[];
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/**
 * One window: every variant's lane open at once, taking turns of CHUNK attempts in a round (each
 * round starting with another lane), so that each variant's attempts run beside the baseline's,
 * a round a fraction of a second: the machine's state, which swings by a third within seconds on
 * a shared host, is then alike for all, and the window's ratio compares like with like.
 */
async function measureWindow(
  variants: ClaimVariant[],
  baseline: string,
  figures: Map<string, Figures>,
  failures: string[],
) {
  const dbs: BenchDb[] = [];
  for (const variant of variants) dbs.push(await park(variant));
  const lanes: Lane[] = [];
  try {
    for (const [k, variant] of variants.entries()) lanes.push(await openLane(variant, dbs[k] as BenchDb));
    for (let round = 0; round < RUNS / CHUNK; round++) {
      for (const lane of [...lanes.slice(round % lanes.length), ...lanes.slice(0, round % lanes.length)]) {
        await lane.turn();
      }
    }
    const perAttempt = new Map<string, number>();
    for (const lane of lanes) {
      const { engineUs, processUs } = lane.used();
      const f = figures.get(lane.variant.name) as Figures;
      f.process.push(processUs / RUNS);
      f.engine.push((engineUs ?? processUs) / RUNS);
      perAttempt.set(lane.variant.name, (engineUs ?? processUs) / RUNS);
      const problem = lane.variant.check?.(lane.started.slice(0, RUNS));
      if (problem) failures.push(`claims: ${lane.variant.name}: ${problem}`);
    }
    const base = perAttempt.get(baseline) as number;
    for (const [name, us] of perAttempt) figures.get(name)?.ratios.push(us / base);
  } finally {
    for (const lane of lanes) await lane.close();
    for (const db of dbs.slice(lanes.length)) await db.cleanup();
  }
}

/** The claims measurement over `variants` (the first is the baseline of the ratios). */
export async function benchClaims(variants: ClaimVariant[] = CLAIM_VARIANTS): Promise<Measured> {
  const failures: string[] = [];
  const fresh = () => new Map(variants.map((v) => [v.name, { engine: [], process: [], ratios: [] } as Figures]));
  const baseline = variants[0]?.name as string;
  // A first window, not counted, warms the JIT and the page cache: otherwise the first variant pays for it.
  await measureWindow(variants, baseline, fresh(), []);
  const figures = fresh();
  for (let w = 0; w < WINDOWS; w++) {
    // The engines opened first cost a few percent more, the same work (a baseline beside
    // copies of itself read 1.00, 0.97, 0.94 by the order they were opened in): each window opens
    // them in another order, each variant first once in every `variants.length` windows.
    const order = [...variants.slice(w % variants.length), ...variants.slice(0, w % variants.length)];
    await measureWindow(order, baseline, figures, failures);
    const line = [...figures].map(([name, f]) => `${name} ${f.engine.at(-1)?.toFixed(0)}`).join(", ");
    progress(`claims: window ${w + 1} of ${WINDOWS}, µs of the engine's CPU per attempt: ${line}`);
  }
  const metrics: Record<string, number> = {};
  for (const [name, f] of figures) {
    metrics[`claim_cpu_us_${name}`] = median(f.engine);
    // The mean over windows, not the median: the windows' orders balance each other only together.
    if (name !== baseline) metrics[`claim_cpu_${name}_ratio`] = f.ratios.reduce((a, b) => a + b, 0) / f.ratios.length;
  }
  const range = (xs: number[]) => ({ min: Math.min(...xs), max: Math.max(...xs) });
  return {
    metrics,
    meta: {
      claims: {
        runs: RUNS,
        agent_concurrency: LIMIT,
        chunk: CHUNK,
        windows: WINDOWS,
        variants: Object.fromEntries(
          [...figures].map(([name, f]) => [
            name,
            {
              engine: range(f.engine),
              // The process's CPU too (V8's compiler and collector helpers with the engine's), for comparison.
              process: { median: median(f.process), ...range(f.process) },
              ratio: range(f.ratios),
            },
          ]),
        ),
      },
    },
    failures,
  };
}
