/**
 * Bulk actions by filter (DESIGN §16): one action on every run a filter matches, at most `cap` a
 * call. The runs are read a page at a time (newest first, by the `before` cursor) and each run's
 * action is the engine's own call for one run: its own dispatcher input, so a run is wholly done
 * or untouched, whatever happens to the process. A run that changed since its page was read is
 * refused with the call's reason (a ConflictError's message), not an error for the batch.
 *
 * The actions are a table (BULK_ACTIONS): each row says which runs it applies to and the call
 * made for each. Another action is another row.
 */
import type { RunStatus } from "../core/states.js";
import type { Run } from "../core/types.js";
import { ConflictError, type Problem, ValidationError } from "../errors.js";
import type { RunFilter } from "../store/store.js";
import type { ForkRunOptions, OperatorOptions } from "./engine-options.js";
import { refuseNul } from "./identifiers.js";
import type { MigrateRunsAnswer, MigrateRunsOptions } from "./migrate.js";

/** Which runs a bulk action looks at, before the action's own rule (BulkActionRow.statuses). */
export interface BulkFilter {
  workflow_id?: string;
  /** Only runs of this version of `workflow_id` (which it needs: versions are numbered per workflow). */
  workflow_version?: number;
  /** Only runs in this status (one the action applies to; any other matches none). */
  status?: RunStatus;
  /** Only runs created at or after this time (ms since the epoch). */
  created_after?: number;
  /** Only runs created before this time (ms since the epoch). */
  created_before?: number;
  /** Only runs carrying every one of these tags. */
  tags?: Readonly<Record<string, string>>;
  /** Only runs whose input or output contains this text, case-insensitively (at least 3 characters). */
  q?: string;
  /** Only runs whose id contains this, in any case. */
  id_contains?: string;
  /** Only paused runs (true), or only runs not paused (false). */
  paused?: boolean;
  /** Only runs created before this run: a previous answer's `next_before`, to go on past the runs it refused. */
  before?: string;
  /** Only runs of these workflows (none when empty): a token's workflow scope, resolved to ids. */
  workflow_ids?: readonly string[];
}

/** What to do to each run: one row of BULK_ACTIONS. */
export type BulkAction =
  | { kind: "cancel"; reason?: string; compensate?: boolean }
  | { kind: "retry"; from?: string; force?: boolean; fresh_steps?: boolean }
  | { kind: "pause"; reason?: string; by?: string }
  | { kind: "resume"; by?: string }
  /** A fork of each run (forkRun): the same `from` and edits for every one. */
  | ({ kind: "fork" } & ForkRunOptions)
  /** Each run moved to `to_version` of its workflow (migrateRuns); one the rule refuses is refused with its reasons. */
  | { kind: "migrate"; to_version: number };

export interface BulkOptions {
  filter: BulkFilter;
  action: BulkAction;
  /** Count the runs the action would apply to (and give the first few ids); change nothing. @defaultValue false */
  dry_run?: boolean;
  /** At most this many runs a call (1 to {@link BULK_MAX_CAP}). @defaultValue 1000 */
  cap?: number;
}

export interface BulkAnswer {
  /** Runs the filter matched that the action applies to, at most `cap`. */
  matched: number;
  /** Of those, the runs the action was applied to (0 on a dry run). */
  applied: number;
  /** Runs that changed since they were read (or otherwise refused the action), each with why. */
  refused: { run_id: string; reason: string }[];
  /** More runs matched than `cap`: call again (with `next_before` as the filter's `before` to go on past refused runs). */
  more: boolean;
  dry_run: boolean;
  /** The first (at most 10) runs matched, newest first. */
  run_ids: string[];
  /** When `more`: the last run matched, to pass as the filter's `before` for the rest; else null. */
  next_before: string | null;
}

/** The engine's calls a bulk action makes (Engine has them all). */
export interface BulkEngine {
  listRuns(filter: RunFilter): Promise<Run[]>;
  cancelRun(runId: string, options: { reason?: string; compensate?: boolean }): Promise<Run>;
  retryRun(runId: string, options: { from?: string; force?: boolean; fresh_steps?: boolean }): Promise<Run>;
  pauseRun(runId: string, options: OperatorOptions): Promise<Run>;
  resumeRun(runId: string, options: OperatorOptions): Promise<Run>;
  forkRun(runId: string, options: ForkRunOptions): Promise<Run>;
  migrateRuns(options: MigrateRunsOptions): Promise<MigrateRunsAnswer>;
}

/** One bulk action: the runs it applies to and the call made for each. */
export interface BulkActionRow<A> {
  /** The statuses of the runs it applies to (read by the store's index, with the filter). */
  statuses: readonly RunStatus[];
  /**
   * Child runs too (they carry their root's tags): a pause holds one run, so pausing a tree is
   * pausing each of its runs. Otherwise top-level runs only (a child follows its parent: it is
   * cancelled with it, and redriven by redriving it).
   */
  childRuns?: true;
  /** What else the runs it applies to match, read with the filter (a field the filter sets itself wins). */
  where?: Pick<RunFilter, "paused">;
  /** Of those, the ones it applies to (default: all), for a rule the status alone does not tell. */
  applies?: (run: Run, action: A) => boolean;
  /** The action on one run: one engine call, one dispatcher input, one transaction. */
  apply: (engine: BulkEngine, run: Run, action: A) => Promise<unknown>;
}

type Rows = { [K in BulkAction["kind"]]: BulkActionRow<Extract<BulkAction, { kind: K }>> };

/** The bulk actions by kind. */
export const BULK_ACTIONS: Rows = {
  cancel: {
    statuses: ["QUEUED", "RUNNING"],
    apply: (engine, run, { reason, compensate }) =>
      engine.cancelRun(run.run_id, {
        ...(reason === undefined ? {} : { reason }),
        ...(compensate === undefined ? {} : { compensate }),
      }),
  },
  retry: {
    statuses: ["FAILED", "CANCELLED"],
    apply: (engine, run, { from, force, fresh_steps }) =>
      engine.retryRun(run.run_id, {
        ...(from === undefined ? {} : { from }),
        ...(force === undefined ? {} : { force }),
        ...(fresh_steps === undefined ? {} : { fresh_steps }),
      }),
  },
  pause: {
    statuses: ["RUNNING"],
    childRuns: true,
    where: { paused: false },
    apply: (engine, run, { reason, by }) =>
      engine.pauseRun(run.run_id, { ...(reason === undefined ? {} : { reason }), ...(by === undefined ? {} : { by }) }),
  },
  resume: {
    statuses: ["RUNNING"],
    childRuns: true,
    where: { paused: true },
    apply: (engine, run, { by }) => engine.resumeRun(run.run_id, by === undefined ? {} : { by }),
  },
  // A fork of a finished run or a running one (the source is not changed); of roots only.
  fork: {
    statuses: ["RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"],
    apply: (engine, run, { kind: _, ...options }) => engine.forkRun(run.run_id, options),
  },
  // Runs of older versions only; the rule's reasons (core/upgrade.ts) are the run's refusal.
  migrate: {
    statuses: ["RUNNING"],
    applies: (run, { to_version }) => run.workflow_version < to_version,
    apply: async (engine, run, { to_version }) => {
      const answer = await engine.migrateRuns({ workflow_id: run.workflow_id, to_version, run_ids: [run.run_id] });
      const refused = answer.incompatible[0];
      if (refused) throw new ConflictError(refused.reasons.join("; "));
    },
  },
};

export const BULK_DEFAULT_CAP = 1000;
export const BULK_MAX_CAP = 10_000;
/** Per-run calls in flight at once: enough for the dispatcher to apply many in one flush, few enough to bound memory. */
export const BULK_IN_FLIGHT = 32;
/** Runs read a page. */
const PAGE = 500;
/** Run ids the answer gives. */
const IDS_SHOWN = 10;

/** What a per-run call's error means for the batch: these codes are that run's refusal, anything else stops it. */
const REFUSALS: ReadonlySet<string> = new Set(["conflict", "not_found", "forbidden"]);

/**
 * Engine.bulkRuns.
 * @throws ValidationError for a bad filter, action or cap (nothing is done); any error of a
 *   per-run call that is not a refusal (the database, a closed engine): the runs done before it stay done
 */
export async function bulkRuns(engine: BulkEngine, options: BulkOptions): Promise<BulkAnswer> {
  const { filter, action } = options;
  const dryRun = options.dry_run === true;
  const cap = options.cap ?? BULK_DEFAULT_CAP;
  const row = checkOptions(options, cap) as BulkActionRow<BulkAction>;

  const statuses =
    filter.status === undefined ? row.statuses : row.statuses.filter((status) => status === filter.status);
  const answer: BulkAnswer = {
    matched: 0,
    applied: 0,
    refused: [],
    more: false,
    dry_run: dryRun,
    run_ids: [],
    next_before: null,
  };
  if (statuses.length === 0) return answer;

  const { status: _status, before: start, ...rest } = filter;
  const pool = new Pool(BULK_IN_FLIGHT);
  let before = start;
  let lastMatched: string | null = null;
  try {
    paging: for (;;) {
      const limit = Math.min(PAGE, cap - answer.matched + 1);
      const page = await engine.listRuns({
        ...row.where,
        ...rest,
        statuses,
        ...(row.childRuns ? {} : { top_level: true }),
        limit,
        ...(before === undefined ? {} : { before }),
      });
      for (const run of page) {
        if (row.applies && !row.applies(run, action)) continue;
        if (answer.matched === cap) {
          answer.more = true;
          answer.next_before = lastMatched;
          break paging;
        }
        answer.matched += 1;
        lastMatched = run.run_id;
        if (answer.run_ids.length < IDS_SHOWN) answer.run_ids.push(run.run_id);
        if (dryRun) continue;
        await pool.add(() =>
          row.apply(engine, run, action).then(
            () => {
              answer.applied += 1;
            },
            (e: unknown) => {
              if (!isRefusal(e)) throw e;
              answer.refused.push({ run_id: run.run_id, reason: e.message });
            },
          ),
        );
      }
      const last = page[page.length - 1];
      if (page.length < limit || !last) break;
      before = last.run_id;
    }
  } finally {
    await pool.drain();
  }
  return answer;
}

function isRefusal(e: unknown): e is Error & { code: string } {
  return e instanceof Error && REFUSALS.has((e as { code?: unknown }).code as string);
}

/** The row of the action, once the options are checked. @throws ValidationError listing every problem */
function checkOptions(options: BulkOptions, cap: number): BulkActionRow<never> {
  const { filter, action } = options;
  refuseNul({
    workflow_id: filter.workflow_id,
    workflow_ids: filter.workflow_ids,
    q: filter.q,
    id_contains: filter.id_contains,
    before: filter.before,
    ...(action?.kind === "retry" || action?.kind === "fork" ? { from: action.from } : {}),
    ...(action?.kind === "cancel" || action?.kind === "pause" ? { reason: action.reason } : {}),
    ...(action?.kind === "pause" || action?.kind === "resume" ? { by: action.by } : {}),
  });
  const problems: Problem[] = [];
  const row = Object.hasOwn(BULK_ACTIONS, action?.kind) ? BULK_ACTIONS[action.kind] : undefined;
  if (!row) {
    problems.push({ path: "action.kind", message: `is one of ${Object.keys(BULK_ACTIONS).join(", ")}` });
  }
  if (!Number.isInteger(cap) || cap < 1 || cap > BULK_MAX_CAP) {
    problems.push({
      path: "cap",
      message: `is a whole number from 1 to ${BULK_MAX_CAP} (got ${cap}); call again while the answer says more: true`,
    });
  }
  if (action?.kind === "migrate" && filter.workflow_id === undefined) {
    problems.push({ path: "filter.workflow_id", message: "is needed to migrate: versions are numbered per workflow" });
  }
  const version = filter.workflow_version;
  if (version !== undefined && (!Number.isInteger(version) || version < 1)) {
    problems.push({ path: "filter.workflow_version", message: "is a whole number from 1" });
  } else if (version !== undefined && filter.workflow_id === undefined) {
    problems.push({
      path: "filter.workflow_version",
      message: "needs filter.workflow_id: versions are numbered per workflow",
    });
  }
  if (problems.length > 0) throw new ValidationError("bulkRuns: the call is not valid", problems);
  return row as BulkActionRow<never>;
}

/** At most `size` promises in flight; the first error is thrown by `add` or `drain`, and no more are started after it. */
class Pool {
  private readonly running = new Set<Promise<void>>();
  private failed: { error: unknown } | null = null;

  constructor(private readonly size: number) {}

  /** Starts `task` once fewer than `size` run. @throws the first error of a task */
  async add(task: () => Promise<void>): Promise<void> {
    while (this.running.size >= this.size) await Promise.race(this.running);
    this.throwFailure();
    const p: Promise<void> = task().then(
      () => {
        this.running.delete(p);
      },
      (error: unknown) => {
        this.running.delete(p);
        this.failed ??= { error };
      },
    );
    this.running.add(p);
  }

  /** Waits for every task started. @throws the first error of a task */
  async drain(): Promise<void> {
    await Promise.all(this.running);
    this.throwFailure();
  }

  private throwFailure(): void {
    if (this.failed) throw this.failed.error;
  }
}
