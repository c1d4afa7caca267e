/**
 * claims (issue 40, DESIGN §17): what claiming costs when runs carry flow control, against the
 * same work without. Each window parks RUNS one-node runs ready on a fresh SQLite file (an engine
 * that serves no handler for their agent type starts them, so nothing claims them), then opens
 * an engine whose handler for that type returns at once under `agentConcurrency` of LIMIT: every
 * attempt is claimed from the database's backlog by the claim query, a few at a time as slots
 * free, which is where priorities and keys change the work. The figure
 * (`claim_cpu_us_<variant>`) is this process's user + system CPU from the moment the handler is
 * let go (the first LIMIT attempts, claimed as the engine opened, wait for it) to the last run's
 * end, divided by the attempts: the claim with the result, the dispatch and the commits that go
 * with it, the same in every variant but for the start options. Windows alternate the variants,
 * each window starting with the next one, after a window that is not counted (noise on a shared
 * machine, the JIT's warming and the garbage of earlier windows fall on each alike); each figure is the median of WINDOWS, and
 * `claim_cpu_<variant>_ratio` the median of a variant's over the first's (the baseline, `default`) window by window.
 *
 * A variant is its startRun options per run and, if it needs one, a setup of the engine that
 * parks the runs (registering more workflows, say). The variants with priorities are checked
 * too: their attempts must start in priority order.
 */
import { createEngine, type Engine, type StartRunOptions } from "../src/index.js";
import { deferred, type Measured, progress, tempDb, within } from "./lib.js";

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
const WINDOWS = 10;
/** Runs started at once while parking them (the start flushes take them in batches). */
const START_BATCH = 200;

/** One window of a variant: its CPU per attempt, and a problem with its order if it has one. */
async function window(variant: ClaimVariant): Promise<{ usPerAttempt: number; problem: string | null }> {
  const db = tempDb(`claims-${variant.name}`);
  try {
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
    const go = deferred();
    const held = deferred();
    const ended = deferred();
    const started: number[] = [];
    let ends = 0;
    const engine = await createEngine({
      database: db.url,
      agentConcurrency: { work: LIMIT },
      agents: {
        work: async (task) => {
          if (started.push((task.input as { i: number }).i) === LIMIT) held.resolve();
          await go.promise;
          return { ok: true };
        },
      },
    });
    try {
      engine.subscribe((e) => {
        if (e.type === "run.succeeded" && ++ends === RUNS) ended.resolve();
      });
      // The first LIMIT attempts, claimed as the engine opened, wait for `go`: the measure starts with them.
      await within(held.promise, 30_000, `claims: ${variant.name}'s first ${LIMIT} attempts`);
      const before = process.cpuUsage();
      go.resolve();
      await within(ended.promise, 120_000, `claims: ${variant.name}'s ${RUNS} runs`);
      const used = process.cpuUsage(before);
      return { usPerAttempt: (used.user + used.system) / RUNS, problem: variant.check?.(started) ?? null };
    } finally {
      await engine.close();
    }
  } finally {
    await db.cleanup();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/** The claims measurement over `variants` (the first is the baseline of the ratios). */
export async function benchClaims(variants: ClaimVariant[] = CLAIM_VARIANTS): Promise<Measured> {
  const figures = new Map(variants.map((v) => [v.name, [] as number[]]));
  const failures: string[] = [];
  // A first window, not counted, warms the JIT and the page cache: otherwise the first variant pays for it.
  await window({ ...(variants[0] as ClaimVariant), name: "warm-up" });
  for (let w = 0; w < WINDOWS; w++) {
    // Each window starts with another variant: garbage the ones before leave falls on each alike.
    for (const variant of [...variants.slice(w % variants.length), ...variants.slice(0, w % variants.length)]) {
      const { usPerAttempt, problem } = await window(variant);
      figures.get(variant.name)?.push(usPerAttempt);
      if (problem) failures.push(`claims: ${variant.name}: ${problem}`);
      progress(`claims: ${variant.name}, window ${w + 1}: ${usPerAttempt.toFixed(0)} µs of CPU per attempt`);
    }
  }
  const metrics: Record<string, number> = {};
  const baseline = figures.get(variants[0]?.name ?? "") ?? [];
  for (const [name, xs] of figures) {
    metrics[`claim_cpu_us_${name}`] = median(xs);
    // Paired: each window's variant over the same window's baseline, run next to it (the machine's
    // state, which swings by half on a shared host, is then the same for both), the median of those.
    if (name !== variants[0]?.name) {
      metrics[`claim_cpu_${name}_ratio`] = median(xs.map((x, w) => x / (baseline[w] as number)));
    }
  }
  return {
    metrics,
    meta: {
      claims: {
        runs: RUNS,
        agent_concurrency: LIMIT,
        windows: WINDOWS,
        variants: Object.fromEntries(
          [...figures].map(([name, xs]) => [name, { min: Math.min(...xs), max: Math.max(...xs) }]),
        ),
      },
    },
    failures,
  };
}
