/**
 * Engine.migrateRuns (DESIGN §16, upgrading runs in flight): finds the active top-level runs of
 * older versions of a workflow, and moves those the rule of core/upgrade.ts allows, a batch at
 * a time through the writer (which checks each again under its lock); a dry run only reads.
 * Also what registerWorkflow says of a new version: how many runs could move (`upgradable`).
 */
import { runState } from "../core/scheduler.js";
import type { Run } from "../core/types.js";
import { type MigrationRequest, requestRefusal, upgradeRefusals } from "../core/upgrade.js";
import type { WorkflowGraph } from "../definition/graph.js";
import { ITEM_SEPARATOR } from "../definition/kinds/map.js";
import { NotFoundError, type Problem, ValidationError } from "../errors.js";
import type { EngineParts } from "./engine-parts.js";
import { refuseNul } from "./identifiers.js";

/** Engine.migrateRuns' options. */
export interface MigrateRunsOptions {
  workflow_id: string;
  /** The version to move runs to: newer than theirs. */
  to_version: number;
  /** Only runs of this version (older than `to_version`). @defaultValue every older version */
  from_version?: number;
  /** Only these runs (at most 1000), each of the workflow; each is answered, moved or with its reasons. @defaultValue every active run of an older version */
  run_ids?: string[];
  /** Move nothing: answer what would move and why the others would not. @defaultValue false */
  dry_run?: boolean;
}

/** What migrateRuns did (or, with `dry_run`, would do). */
export interface MigrateRunsAnswer {
  /** The runs moved to `to_version`, each with the version it had. */
  moved: { run_id: string; from_version: number }[];
  /** The runs left as they were, each with every reason (core/upgrade.ts). */
  incompatible: { run_id: string; from_version: number; reasons: string[] }[];
  dry_run: boolean;
}

/** How many runs a new version could take over (registerWorkflow's `upgradable`). */
export interface Upgradable {
  /** Active (RUNNING) top-level runs of older versions, counted up to {@link UPGRADABLE_COUNT_LIMIT}. */
  active: number;
  /** How many of them were checked against the rule: the newest {@link UPGRADABLE_CHECK_LIMIT}. */
  checked: number;
  /** How many of those checked could move now (migrateRuns' dry run would list them). */
  compatible: number;
}

/** registerWorkflow counts at most this many active runs of older versions... */
export const UPGRADABLE_COUNT_LIMIT = 10_000;
/** ...and checks at most this many of them (each read with its visits). */
export const UPGRADABLE_CHECK_LIMIT = 1000;
/** At most this many runs named by one call. */
export const MAX_MIGRATE_RUN_IDS = 1000;
/** Runs moved by one writer input (one transaction locks them all). */
const MIGRATE_BATCH = 100;
/** Runs listed a page at a time. */
const PAGE = 500;

/** Engine.migrateRuns. */
export async function migrateRuns(p: EngineParts, options: MigrateRunsOptions): Promise<MigrateRunsAnswer> {
  const request = checkOptions(options);
  const dryRun = options.dry_run === true;
  // The target version must exist (NotFoundError); its graph is what each run is checked against.
  const { graph } = await p.registry.get(request.workflow_id, request.to_version);
  const answer: MigrateRunsAnswer = { moved: [], incompatible: [], dry_run: dryRun };
  const runs = options.run_ids
    ? await namedRuns(p, request.workflow_id, options.run_ids)
    : await activeRuns(p, request);
  if (dryRun) {
    for (const run of runs) {
      const reasons = await refusals(p, run, request, graph);
      if (reasons.length === 0) answer.moved.push({ run_id: run.run_id, from_version: run.workflow_version });
      else answer.incompatible.push({ run_id: run.run_id, from_version: run.workflow_version, reasons });
    }
    return answer;
  }
  for (let i = 0; i < runs.length; i += MIGRATE_BATCH) {
    const batch = runs.slice(i, i + MIGRATE_BATCH).map((r) => ({ run_id: r.run_id, version: r.workflow_version }));
    const done = await new Promise<Omit<MigrateRunsAnswer, "dry_run">>((resolve, reject) =>
      p.dispatcher.push({ kind: "migrate", runs: batch, request, done: { resolve, reject } }),
    );
    answer.moved.push(...done.moved);
    answer.incompatible.push(...done.incompatible);
  }
  return answer;
}

/** registerWorkflow's `upgradable`: the active runs of older versions, and how many could move to `version`. */
export async function upgradable(p: EngineParts, workflowId: string, version: number): Promise<Upgradable> {
  const request = { workflow_id: workflowId, to_version: version, from_version: null };
  const runs = await activeRuns(p, request, UPGRADABLE_COUNT_LIMIT);
  const checking = runs.slice(0, UPGRADABLE_CHECK_LIMIT);
  if (checking.length === 0) return { active: runs.length, checked: 0, compatible: 0 };
  const { graph } = await p.registry.get(workflowId, version);
  let compatible = 0;
  for (const run of checking) if ((await refusals(p, run, request, graph)).length === 0) compatible++;
  return { active: runs.length, checked: checking.length, compatible };
}

function checkOptions(options: MigrateRunsOptions): MigrationRequest {
  const problems: Problem[] = [];
  const { workflow_id, to_version, from_version, run_ids } = options;
  if (typeof workflow_id !== "string" || workflow_id === "")
    problems.push({ path: "workflow_id", message: "must be a workflow id" });
  else if (workflow_id.includes(ITEM_SEPARATOR)) {
    problems.push({
      path: "workflow_id",
      message: `is the item workflow of a map node: its items follow their parent run's version; migrate "${workflow_id.split(ITEM_SEPARATOR)[0]}" instead`,
    });
  }
  const version = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 1;
  if (!version(to_version))
    problems.push({ path: "to_version", message: "must be a version number (an integer from 1)" });
  if (from_version !== undefined) {
    if (!version(from_version))
      problems.push({ path: "from_version", message: "must be a version number (an integer from 1)" });
    else if (version(to_version) && from_version >= to_version) {
      problems.push({
        path: "from_version",
        message: `must be older than to_version (${to_version}): runs move to a newer version only`,
      });
    }
  }
  if (run_ids !== undefined) {
    if (!Array.isArray(run_ids) || run_ids.some((id) => typeof id !== "string")) {
      problems.push({ path: "run_ids", message: "must be a list of run ids" });
    } else if (run_ids.length > MAX_MIGRATE_RUN_IDS) {
      problems.push({
        path: "run_ids",
        message: `names ${run_ids.length} runs; at most ${MAX_MIGRATE_RUN_IDS} a call`,
      });
    }
  }
  if (problems.length > 0) throw new ValidationError("migrateRuns' options are not valid", problems);
  refuseNul({ workflow_id, run_ids });
  return { workflow_id, to_version, from_version: from_version ?? null };
}

/** The runs named, each once, in the order given. @throws NotFoundError for a run that is not one of the workflow's */
async function namedRuns(p: EngineParts, workflowId: string, runIds: string[]): Promise<Run[]> {
  const runs: Run[] = [];
  for (const id of new Set(runIds)) {
    const run = await p.store.getRun(id);
    if (!run || run.workflow_id !== workflowId) {
      throw new NotFoundError(`run ${id} is not a run of workflow "${workflowId}"; check the run id`);
    }
    runs.push(run);
  }
  return runs;
}

/** The RUNNING top-level runs the request moves, newest first, at most `limit`. */
async function activeRuns(p: EngineParts, request: MigrationRequest, limit = Number.POSITIVE_INFINITY): Promise<Run[]> {
  const out: Run[] = [];
  let before: string | undefined;
  for (;;) {
    const page = await p.store.listRuns({
      workflow_id: request.workflow_id,
      status: "RUNNING",
      limit: PAGE,
      ...(before === undefined ? {} : { before }),
    });
    for (const run of page) {
      if (requestRefusal(run, request) === null) out.push(run);
      if (out.length >= limit) return out;
    }
    if (page.length < PAGE) return out;
    before = page[page.length - 1]?.run_id;
  }
}

/** Why the run would not move (a read, without a lock: the writer checks again). */
async function refusals(p: EngineParts, run: Run, request: MigrationRequest, to: WorkflowGraph): Promise<string[]> {
  const refused = requestRefusal(run, request);
  if (refused !== null) return [refused];
  const read = await p.store.readRun(run.run_id);
  if (!read) return ["the run no longer exists"];
  const { graph } = await p.registry.get(read.run.workflow_id, read.run.workflow_version);
  const again = requestRefusal(read.run, request);
  if (again !== null) return [again];
  return upgradeRefusals(runState(read.run, graph, read.visits, read.compensations), to);
}
