/**
 * The visit state machine of DESIGN §3 and the run status derived from it. Pure: no I/O.
 * Every state write in the engine goes through `assertTransition`.
 */

export const VISIT_STATES = [
  "PENDING",
  "RUNNING",
  "SUCCEEDED",
  "FAILED",
  "RETRYING",
  "IN_REVIEW",
  "WAITING",
  "SKIPPED",
  "CANCELLED",
] as const;
export type VisitState = (typeof VISIT_STATES)[number];

/**
 * QUEUED: started with a key (DESIGN §17) and held back before its first node, behind the active
 * run of its key or until its debounce window passes; it has no visits until it begins.
 */
export const RUN_STATUSES = ["QUEUED", "RUNNING", "COMPENSATING", "SUCCEEDED", "FAILED", "CANCELLED"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** Why a run ended early; none while it runs or when it simply finished. */
export type EndCause = "failed" | "cancelled" | "ttl" | "end";

const TRANSITIONS: Readonly<Record<VisitState, readonly VisitState[]>> = {
  // FAILED from PENDING: a visit that fails before any attempt (max_visits_exceeded, template_error).
  PENDING: ["RUNNING", "IN_REVIEW", "WAITING", "SKIPPED", "CANCELLED", "FAILED"],
  // IN_REVIEW from RUNNING: an agent's tool call waits for approval (core/kinds/agent.ts).
  RUNNING: ["SUCCEEDED", "FAILED", "RETRYING", "CANCELLED", "IN_REVIEW"],
  // FAILED from RETRYING: a budget that stops the next attempt (budget_exceeded, DESIGN §12).
  RETRYING: ["RUNNING", "CANCELLED", "FAILED"],
  // RETRYING from IN_REVIEW: the tool call's approval is decided; the agent's next attempt reads it.
  IN_REVIEW: ["SUCCEEDED", "FAILED", "CANCELLED", "RETRYING"],
  // Waiting for a time or an event, no attempt held (sleep, wait_event: DESIGN §11).
  WAITING: ["SUCCEEDED", "FAILED", "CANCELLED"],
  SUCCEEDED: [],
  FAILED: [],
  SKIPPED: [],
  CANCELLED: [],
};

export const TERMINAL_STATES: ReadonlySet<VisitState> = new Set(["SUCCEEDED", "FAILED", "SKIPPED", "CANCELLED"]);
/** States in which an attempt, a review or a wait holds the visit. */
export const ACTIVE_STATES: ReadonlySet<VisitState> = new Set(["RUNNING", "RETRYING", "IN_REVIEW", "WAITING"]);
/** States held without an attempt until something happens or their due time (`lease_expires_at`) passes. */
export const HELD_STATES: readonly VisitState[] = ["IN_REVIEW", "WAITING"];

export function isTerminal(state: VisitState): boolean {
  return TERMINAL_STATES.has(state);
}

export function canTransition(from: VisitState, to: VisitState): boolean {
  return TRANSITIONS[from].includes(to);
}

/** Throws when `from → to` is not in the table: a bug in the engine, never user input. */
export function assertTransition(from: VisitState, to: VisitState, where: string): void {
  if (!canTransition(from, to)) {
    throw new Error(`illegal visit transition ${from} -> ${to} (${where}); this is a Skein bug, please report it`);
  }
}

/** What the run status depends on: the run's current visits, its compensation rows, and why it ended. */
export interface RunStatusInput {
  visits: Iterable<{ state: VisitState; handled: boolean }>;
  /** States of the run's compensation rows (none until compensation exists for the run). */
  compensations?: Iterable<{ state: VisitState }>;
  /** Compensation was asked for (the run ended with work to undo) and its rows are not made yet. */
  compensationPlanned?: boolean;
  endCause: EndCause | null;
}

/** The run status as one pure function of the visits, compensations and end cause (DESIGN §3). */
export function deriveRunStatus({
  visits,
  compensations = [],
  compensationPlanned = false,
  endCause,
}: RunStatusInput): RunStatus {
  // Owed compensation comes first: no run is final while what it planned to undo has not run.
  if (compensationPlanned) return "COMPENSATING";
  for (const c of compensations) if (!isTerminal(c.state)) return "COMPENSATING";
  if (endCause === "cancelled") return "CANCELLED";
  if (endCause === "failed" || endCause === "ttl") return "FAILED";
  if (endCause === "end") return "SUCCEEDED";
  let failed = false;
  for (const v of visits) {
    if (!isTerminal(v.state)) return "RUNNING";
    if (v.state === "FAILED" && !v.handled) failed = true;
  }
  return failed ? "FAILED" : "SUCCEEDED";
}
