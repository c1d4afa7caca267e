/**
 * Reading a run: getRun's answer (the run, its current visits in document order, its
 * compensations and its child runs), and `waitForRun`, which resolves once a run has ended, told
 * by this engine's events and, on a store other engines share, by polling at the sweep interval
 * (another engine may end it).
 */
import type { Clock } from "../clock.js";
import type { RunStatus } from "../core/states.js";
import type { Run, Visit } from "../core/types.js";
import { NotFoundError, ValidationError } from "../errors.js";
import { MIN_SEARCH_CHARS, type RunFilter, type Store } from "../store/store.js";
import type { RunWithNodes } from "./engine-options.js";
import type { EngineParts } from "./engine-parts.js";
import { refuseNul } from "./identifiers.js";
import { mapProgress } from "./map-items.js";
import { tagsProblems } from "./run-start.js";
import { waitingOf } from "./waiting.js";

/** What reading and waiting for a run use of the engine's parts. */
export type RunReadParts = Pick<
  EngineParts,
  "store" | "registry" | "served" | "clock" | "options" | "closed" | "subscribers" | "rateLimits"
>;

/** @throws NotFoundError for an unknown run */
export async function readRunWithNodes(p: RunReadParts, runId: string): Promise<RunWithNodes> {
  refuseNul({ run_id: runId });
  const { store, registry } = p;
  const read = await store.readRun(runId);
  if (!read) throw new NotFoundError(`run ${runId} does not exist; check the run id and the database`);
  const { run, compensations } = read;
  // A map visit's counts as shown, with its items not started yet (the store keeps no such count).
  // A ready visit held back says why (waiting.ts): an agent type nothing serves, rate-limited, behind priority.
  const waiting = await waitingOf(p, run.ended_at === null && run.paused === null ? read.visits : []);
  const nodes = read.visits.map((v) => {
    const why = waiting.get(v.node_id);
    return { ...v, items: mapProgress(v.items), ...(why ? { waiting: why } : {}) };
  });
  const { graph } = await registry.get(run.workflow_id, run.workflow_version);
  const order = (v: Visit) => graph.nodes.get(v.node_id)?.index ?? 0;
  const waiting_reviews = nodes.filter((n) => n.state === "IN_REVIEW").length;
  // Map items are child runs too, but listChildren leaves them out: they are read by listMapItems, a page at a time.
  const children = await store.listChildren(runId);
  return { ...run, nodes: nodes.sort((a, b) => order(a) - order(b)), waiting_reviews, compensations, children };
}

const FINAL: ReadonlySet<RunStatus> = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);

/**
 * Engine.waitForRun: the run with its nodes once it ended. Polling (at the sweep interval, on a
 * shared store) stops once the engine is closed.
 */
export function waitForRun(p: RunReadParts, runId: string): Promise<RunWithNodes> {
  refuseNul({ run_id: runId });
  const c = { store: p.store, clock: p.clock, pollMs: p.options.sweepIntervalMs ?? 1000, closed: p.closed };
  return new Promise<RunWithNodes>((resolve, reject) => {
    let settled = false;
    let poll: ReturnType<Clock["setTimeout"]> | null = null;
    const finish = () => {
      if (settled) return;
      settled = true;
      unsubscribe();
      if (poll) c.clock.clearTimeout(poll);
      readRunWithNodes(p, runId).then(resolve, reject);
    };
    const check = () => {
      poll = null;
      if (settled || c.closed()) return;
      c.store.getRun(runId).then((run) => {
        if (run && FINAL.has(run.status)) finish();
        else if (!settled) poll = c.clock.setTimeout(check, c.pollMs);
      }, reject);
    };
    if (!c.store.exclusive) poll = c.clock.setTimeout(check, c.pollMs);
    const unsubscribe = p.subscribers.add((e) => {
      if (e.type === "run.succeeded" || e.type === "run.failed" || e.type === "run.cancelled") finish();
    }, runId);
    c.store.getRun(runId).then((run) => {
      if (!run) {
        settled = true;
        unsubscribe();
        reject(new NotFoundError(`run ${runId} does not exist`));
      } else if (FINAL.has(run.status)) finish();
    }, reject);
  });
}

/**
 * Engine.listRuns: newest first, `before` pages.
 * @throws ValidationError for a `q` shorter than 3 characters (the text index is of trigrams).
 */
export function listRuns(store: Store, filter: RunFilter): Promise<Run[]> {
  const { workflow_id, workflow_ids, before, schedule_id, id_prefix, q } = filter;
  refuseNul({ workflow_id, workflow_ids, before, schedule_id, id_prefix, q });
  if (filter.q !== undefined && [...filter.q].length < MIN_SEARCH_CHARS) {
    throw new ValidationError(
      `listRuns: q must be at least ${MIN_SEARCH_CHARS} characters (the search index is of trigrams), got ${JSON.stringify(filter.q)}`,
    );
  }
  if (filter.tags !== undefined) {
    const problems = tagsProblems(filter.tags, "tags");
    if (problems.length > 0) throw new ValidationError("listRuns: tags is not a valid filter", problems);
  }
  return store.listRuns(filter);
}
