/**
 * Usage and budgets (DESIGN §12), as pure functions: what a usage report may say, how a run's
 * usage adds up (its own and its descendants': a report is added to the run and every run above
 * it, in the same transaction), and when a budget stops the next attempt. No I/O.
 */
import type { Budget, Reservation, Reservations, Run, RunParent, RunUsage, Usage, Visit, VisitError } from "./types.js";

export const NO_USAGE: Readonly<RunUsage> = Object.freeze({ tokens_in: 0, tokens_out: 0, cost: 0 });

const USAGE_FIELDS = ["tokens_in", "tokens_out", "cost"] as const;
const BUDGET_FIELDS = ["max_tokens", "max_cost"] as const;

/** The reason of a visit a budget stopped: not retried, routable by next_on_failure. */
export const BUDGET_EXCEEDED = "budget_exceeded";

/**
 * Why `value` is not a usage report (an object of non-negative finite `tokens_in`, `tokens_out`,
 * `cost`, nothing else), or null. `at` prefixes the field named in the problem.
 */
export function usageProblem(value: unknown, at = "usage"): string | null {
  return figuresProblem(value, USAGE_FIELDS, at);
}

/** Why `value` is not a budget (`max_tokens`, `max_cost`: non-negative finite numbers), or null. */
export function budgetProblem(value: unknown, at = "budget"): string | null {
  return figuresProblem(value, BUDGET_FIELDS, at);
}

function figuresProblem(value: unknown, fields: readonly string[], at: string): string | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return `${at} must be an object with ${fields.join(", ")} (each optional), got ${describe(value)}`;
  }
  for (const [key, figure] of Object.entries(value)) {
    if (!fields.includes(key)) return `${at}.${key} is not a field; use ${fields.join(", ")}`;
    if (typeof figure !== "number" || !Number.isFinite(figure) || figure < 0) {
      return `${at}.${key} must be a non-negative finite number, got ${describe(figure)}`;
    }
  }
  return null;
}

function describe(value: unknown): string {
  if (value === undefined) return "undefined";
  if (typeof value === "number") return String(value);
  try {
    return JSON.stringify(value) ?? typeof value;
  } catch {
    return typeof value;
  }
}

/** `total` with `usage` added (a new object: run rows are compared by identity nowhere, but kept immutable anyway). */
export function addUsage(total: RunUsage, usage: Usage): RunUsage {
  return {
    tokens_in: total.tokens_in + (usage.tokens_in ?? 0),
    tokens_out: total.tokens_out + (usage.tokens_out ?? 0),
    cost: total.cost + (usage.cost ?? 0),
  };
}

/** A report that adds nothing (every figure absent or zero): not worth an input. */
export function isEmptyUsage(usage: Usage): boolean {
  return !usage.tokens_in && !usage.tokens_out && !usage.cost;
}

/** The runs a usage report of an attempt of `run` adds to: the run, then every run above it. */
export function usageRuns(run: Pick<Run, "run_id" | "parent">): string[] {
  if (run.parent === null) return [run.run_id];
  return [run.run_id, ...(run.parent.ancestors ?? [run.parent.run_id])];
}

/** What a child run of `parent` records of the runs above it (RunParent's `ancestors`, `budgeted`). */
function lineage(parent: Pick<Run, "run_id" | "parent" | "budget">): Pick<RunParent, "ancestors" | "budgeted"> {
  const above = parent.parent;
  const ancestors = usageRuns(parent);
  const budgeted = [...(parent.budget ? [parent.run_id] : []), ...(above?.budgeted ?? [])];
  return budgeted.length > 0 ? { ancestors, budgeted } : { ancestors };
}

/**
 * The `parent` of a run that `visit`'s attempt starts in `run`: a `workflow` node's child, or a
 * `map` visit's item `item`. One level deeper, with the lineage its usage is added to.
 */
export function parentLink(
  run: Pick<Run, "run_id" | "parent" | "budget">,
  visit: Pick<Visit, "node_id" | "visit" | "attempt">,
  item?: number,
  call?: string,
): RunParent {
  return {
    run_id: run.run_id,
    node_id: visit.node_id,
    visit: visit.visit,
    attempt: visit.attempt,
    depth: (run.parent?.depth ?? 0) + 1,
    ...(item === undefined ? {} : { item }),
    ...(call === undefined ? {} : { call }),
    ...lineage(run),
  };
}

/**
 * Why no further attempt may start under `run`'s own budget (its usage reached max_tokens or
 * max_cost), as the visit's error; null while within it. `whose`: how the message names the run.
 */
export function budgetReached(
  run: Pick<Run, "run_id" | "usage" | "budget">,
  whose: "this run" | "an ancestor",
): VisitError | null {
  const { budget, usage } = run;
  if (!budget) return null;
  const tokens = usage.tokens_in + usage.tokens_out;
  const over =
    budget.max_tokens !== undefined && tokens >= budget.max_tokens
      ? `${tokens} tokens used (tokens_in ${usage.tokens_in} + tokens_out ${usage.tokens_out}) of max_tokens ${budget.max_tokens}`
      : budget.max_cost !== undefined && usage.cost >= budget.max_cost
        ? `cost ${usage.cost} of max_cost ${budget.max_cost}`
        : null;
  if (over === null) return null;
  const who = whose === "this run" ? `run ${run.run_id}` : `run ${run.run_id} (an ancestor of this run)`;
  return {
    message:
      `${who} reached its budget: ${over}; no further attempt starts under it. ` +
      "Start a new run with a larger budget (startRun's budget, or the workflow's budget), or route budget_exceeded with next_on_failure",
    reason: BUDGET_EXCEEDED,
    details: { run_id: run.run_id, usage: { ...usage }, budget: { ...budget } },
  };
}

/**
 * The node next_on_failure routes a budget_exceeded failure to runs anyway (to report, to clean
 * up): a visit whose trigger is a visit the budget stopped. The nodes after it are checked again.
 */
export function exemptFromBudget(v: Pick<Visit, "trigger">, current: ReadonlyMap<string, Visit>): boolean {
  if (v.trigger === null) return false;
  const t = current.get(v.trigger.node_id);
  return t !== undefined && t.visit === v.trigger.visit && t.reason === BUDGET_EXCEEDED;
}

/** A budget as stored: only the figures given (a copy); null when it gives none. */
export function budgetOf(value: Budget | undefined | null): Budget | null {
  if (!value) return null;
  const out: Budget = {};
  if (value.max_tokens !== undefined) out.max_tokens = value.max_tokens;
  if (value.max_cost !== undefined) out.max_cost = value.max_cost;
  return Object.keys(out).length > 0 ? out : null;
}

/**
 * The runs whose budgets an attempt of `run` counts toward: its own (when it has one), then the
 * budgeted runs above it. Empty: no budget applies, nothing is reserved.
 */
export function budgetedRuns(run: Pick<Run, "run_id" | "parent" | "budget">): string[] {
  return [...(run.budget ? [run.run_id] : []), ...(run.parent?.budgeted ?? [])];
}

/** The key of an attempt's reservation in a run's `reserved` (DESIGN §13.1). */
export function reservationKey(executionId: string, attempt: number): string {
  return `${executionId}@${attempt}`;
}

/** The execution_id and attempt a reservation key names. */
export function parseReservationKey(key: string): { execution_id: string; attempt: number } {
  const at = key.lastIndexOf("@");
  return { execution_id: key.slice(0, at), attempt: Number(key.slice(at + 1)) };
}

/**
 * What an attempt is expected to use (DESIGN §13.1): the larger of its payload's `max_tokens`
 * and the tokens of the last call of its node (or agent type), the cost of that call; with
 * neither known, a probe: it reserves nothing and runs alone under each budget, and its report
 * makes the next attempts' expectation.
 */
export function expectedUsage(payload: unknown, last: RunUsage | undefined): Reservation {
  const max = (payload as { max_tokens?: unknown } | null)?.max_tokens;
  const fromPayload = typeof max === "number" && Number.isFinite(max) && max >= 0 ? max : undefined;
  if (fromPayload === undefined && last === undefined) return { tokens: 0, cost: 0, probe: true };
  const lastTokens = last ? last.tokens_in + last.tokens_out : 0;
  return { tokens: Math.max(fromPayload ?? 0, lastTokens), cost: last?.cost ?? 0 };
}

/**
 * Whether an attempt expecting `r` may start under `run`'s own budget now: its usage plus what
 * attempts in flight reserved is still under each figure, and (for a probe) no other probe is in
 * flight. So parallel attempts overshoot a budget by at most one attempt's overrun.
 */
export function reservationFits(run: Pick<Run, "usage" | "budget" | "reserved">, r: Reservation): boolean {
  const { budget, usage } = run;
  if (!budget) return true;
  const held = Object.values(run.reserved ?? {});
  if (r.probe && held.some((x) => x.probe)) return false;
  const tokens = usage.tokens_in + usage.tokens_out + held.reduce((n, x) => n + x.tokens, 0);
  const cost = usage.cost + held.reduce((n, x) => n + x.cost, 0);
  if (budget.max_tokens !== undefined && tokens >= budget.max_tokens) return false;
  if (budget.max_cost !== undefined && cost >= budget.max_cost) return false;
  return true;
}

/** `reserved` with `key` set to `r` (and `drop`, the attempt before, taken out); a new object. */
export function withReservation(
  reserved: Reservations | null,
  key: string,
  r: Reservation,
  drop: string,
): Reservations {
  const out: Reservations = { ...(reserved ?? {}) };
  delete out[drop];
  out[key] = r;
  return out;
}

/** `reserved` without `keys`; null when nothing is left. */
export function withoutReservations(reserved: Reservations | null, keys: readonly string[]): Reservations | null {
  if (!reserved) return null;
  const out: Reservations = { ...reserved };
  for (const k of keys) delete out[k];
  return Object.keys(out).length > 0 ? out : null;
}

/**
 * The first field in which `requested` (startRun's budget, which replaces the workflow's) allows
 * more than `workflow`'s budget: a larger figure, or a figure the workflow sets left out (no
 * figure is no limit). A field the workflow does not set is unlimited, so any figure lowers it.
 * Null: `requested` only lowers (or keeps) the workflow's budget.
 */
export function budgetRaise(
  requested: Budget,
  workflow: Budget | null | undefined,
): { field: (typeof BUDGET_FIELDS)[number]; workflow: number; requested: number | null } | null {
  for (const field of BUDGET_FIELDS) {
    const limit = workflow?.[field];
    if (limit === undefined) continue;
    const asked = requested[field];
    if (asked === undefined || asked > limit) return { field, workflow: limit, requested: asked ?? null };
  }
  return null;
}
