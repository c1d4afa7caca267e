/**
 * One attempt lifecycle for every row that holds an attempt (DESIGN §5, §7): a visit, or a
 * compensation row. The flush claims, renews, fences and applies results through this one
 * shape, so each rule is written once; which transition functions a row uses is chosen here.
 * A `workflow` node's child run holds a visit's attempt (holder `run:<child id>`) through this
 * same lifecycle: its end is that attempt's success or failure. (A `map` item is meant to be a further row here.)
 * Pure: no I/O.
 */
import {
  advanceCompensation,
  claimCompensation,
  compensationFailed,
  compensationSucceeded,
  interruptCompensation,
  renewCompensationLease,
  undoneExecutionId,
} from "./compensation.js";
import { type ApprovalRequest, awaitApproval } from "./kinds/agent.js";
import { itemExecutionId, itemMoves, MAP_HOLDER, parseItemExecutionId } from "./kinds/map.js";
import { executionId, itemChanges, type LoadedItem } from "./run-state.js";
import {
  claim,
  type Decision,
  failAttempt,
  failVisit,
  interrupt,
  type RunState,
  releaseCancelled,
  renewLease,
  succeed,
} from "./scheduler.js";
import type { Compensation, Json, MapItem, Visit, VisitError } from "./types.js";

/** A visit's identity: its run, node and visit number. */
export interface AttemptKey {
  run_id: string;
  node_id: string;
  visit: number;
}

export type Attempt = VisitAttempt | CompensationAttempt | ItemAttempt;

interface AttemptLifecycle {
  readonly kind: "visit" | "compensation" | "item";
  readonly rs: RunState;
  /** The visit's key (for a compensation row, the visit it undoes; for a map item, its map's visit). */
  readonly key: AttemptKey;
  readonly row: Visit | Compensation | MapItem;
  /** A visit's row is still the current one of its node (a compensation row always is). */
  readonly current: boolean;
  /** What names the attempt's row to agents and workers (stable across its attempts). */
  readonly executionId: string;
  readonly agentType: string;
  claim(holder: string, now: number): void;
  /** A heartbeat: the node's lease again, never past the deadline. */
  renew(now: number): void;
  succeed(output: Json, decision: Decision, now: number): void;
  /** A failed attempt: retried within the budget when retryable. */
  fail(error: VisitError, retryable: boolean, now: number, random: () => number): void;
  /** Failed for good, not retried (invalid_next, when_error). */
  failForGood(reason: string, error: VisitError, now: number, random: () => number): void;
  /** An agent's tool call waits for a person (a visit's attempt only: core/kinds/agent.ts). */
  awaitApproval(request: ApprovalRequest, now: number, random: () => number): void;
  /** The engine holding it died: due again now, without spending the retry budget. */
  interrupt(now: number): void;
  /** Its holder's attempt `attempt` returned after the row left RUNNING (the result was fenced). */
  returned(attempt: number, now: number): void;
  /** Its lease changed outside these functions: write it. */
  touched(): void;
}

/** `run_id:node_id:visit` → its parts (run ids may not contain ':' but node ids never do). */
export function parseExecutionId(executionId: string): AttemptKey | null {
  const last = executionId.lastIndexOf(":");
  const middle = executionId.lastIndexOf(":", last - 1);
  if (last < 0 || middle < 0) return null;
  const visit = Number(executionId.slice(last + 1));
  if (!Number.isInteger(visit) || visit < 1) return null;
  return { run_id: executionId.slice(0, middle), node_id: executionId.slice(middle + 1, last), visit };
}

/** The run an execution_id (of a visit or of a compensation) belongs to, or null. */
export function runOfExecution(executionId: string): string | null {
  const id = parseItemExecutionId(executionId)?.map ?? executionId;
  return parseExecutionId(undoneExecutionId(id) ?? id)?.run_id ?? null;
}

/** The item row a map item's execution_id names (its map visit's key and its index); null for any other id. */
export function itemKeyOf(executionId: string): (AttemptKey & { index: number }) | null {
  const item = parseItemExecutionId(executionId);
  const key = item ? parseExecutionId(item.map) : null;
  return item && key ? { ...key, index: item.index } : null;
}

/** The attempt an execution_id names in a loaded run: a visit's, or a compensation row's. */
export function attemptOf(rs: RunState, executionId: string): Attempt | undefined {
  const item = parseItemExecutionId(executionId);
  if (item) {
    const key = parseExecutionId(item.map);
    const loaded = rs.items?.get(executionId);
    const map = key && key.run_id === rs.run.run_id ? rs.current.get(key.node_id) : undefined;
    return key && loaded && map ? new ItemAttempt(rs, loaded, map, key) : undefined;
  }
  const undone = undoneExecutionId(executionId);
  const key = parseExecutionId(undone ?? executionId);
  if (!key || key.run_id !== rs.run.run_id) return undefined;
  if (undone === null) {
    const v = rs.current.get(key.node_id);
    return v ? visitAttempt(rs, v, key) : undefined;
  }
  const c = rs.compensations.find((x) => x.node_id === key.node_id && x.visit === key.visit);
  return c ? compensationAttempt(rs, c, key) : undefined;
}

/** Only an agent node's visit can wait for a person between its attempts. */
const NO_APPROVAL: VisitError = {
  message: "a tool call's approval can be asked only by an agent node's visit, not by a compensation or a map item",
  reason: "invalid_output",
};

/** A visit's attempt (one object per use, methods on the prototype: no closures on the hot path). */
class VisitAttempt implements AttemptLifecycle {
  readonly kind = "visit";
  constructor(
    readonly rs: RunState,
    readonly row: Visit,
    readonly key: AttemptKey,
  ) {}
  get current(): boolean {
    return this.row.visit === this.key.visit;
  }
  get executionId(): string {
    return this.row.execution_id;
  }
  get agentType(): string {
    return this.row.agent_type;
  }
  claim(holder: string, now: number): void {
    claim(this.rs, this.row, holder, now);
  }
  renew(now: number): void {
    renewLease(this.rs, this.row, now);
  }
  succeed(output: Json, decision: Decision, now: number): void {
    succeed(this.rs, this.row, output, decision, now);
  }
  fail(error: VisitError, retryable: boolean, now: number, random: () => number): void {
    failAttempt(this.rs, this.row, error, retryable, now, random);
  }
  failForGood(reason: string, error: VisitError, now: number): void {
    failVisit(this.rs, this.row, reason, error, now);
  }
  awaitApproval(request: ApprovalRequest, now: number): void {
    awaitApproval(this.rs, this.row, request, now);
  }
  interrupt(now: number): void {
    interrupt(this.rs, this.row, now);
  }
  returned(attempt: number, now: number): void {
    if (this.row.state !== "CANCELLED" || this.row.attempt !== attempt) return;
    // The cancelled attempt returned: compensation, which waits for it, may start.
    releaseCancelled(this.rs, this.row);
    advanceCompensation(this.rs, now);
  }
  touched(): void {
    if (!this.rs.changes.inserted.has(this.row)) this.rs.changes.updated.add(this.row);
  }
}

/** A compensation row's attempt: the same lifecycle, its own transitions and events (DESIGN §6). */
class CompensationAttempt implements AttemptLifecycle {
  readonly kind = "compensation";
  readonly current = true;
  constructor(
    readonly rs: RunState,
    readonly row: Compensation,
    readonly key: AttemptKey,
  ) {}
  get executionId(): string {
    return this.row.execution_id;
  }
  get agentType(): string {
    return this.row.agent_type;
  }
  claim(holder: string, now: number): void {
    claimCompensation(this.rs, this.row, holder, now);
  }
  renew(now: number): void {
    renewCompensationLease(this.rs, this.row, now);
  }
  succeed(output: Json, _decision: Decision, now: number): void {
    compensationSucceeded(this.rs, this.row, output, now);
  }
  fail(error: VisitError, retryable: boolean, now: number, random: () => number): void {
    compensationFailed(this.rs, this.row, error, retryable, now, random);
  }
  failForGood(reason: string, error: VisitError, now: number, random: () => number): void {
    compensationFailed(this.rs, this.row, error, false, now, random, reason);
  }
  awaitApproval(_request: ApprovalRequest, now: number, random: () => number): void {
    this.failForGood("invalid_output", NO_APPROVAL, now, random);
  }
  interrupt(now: number): void {
    interruptCompensation(this.rs, this.row, now);
  }
  returned(): void {}
  touched(): void {
    this.rs.changes.compensations.add(this.row);
  }
}

/**
 * A map item's attempt (core/kinds/map.ts `itemMoves`): current while its map visit is its node's
 * current one and still holds its items; its events are the map's run's, under the map's visit.
 */
class ItemAttempt implements AttemptLifecycle {
  readonly kind = "item";
  constructor(
    readonly rs: RunState,
    readonly item: LoadedItem,
    /** The current visit of the map's node (`key` says which visit the item belongs to). */
    readonly map: Visit,
    readonly key: AttemptKey,
  ) {}
  get row(): MapItem {
    return this.item.row;
  }
  get current(): boolean {
    return this.map.visit === this.key.visit && this.map.holder === MAP_HOLDER;
  }
  get executionId(): string {
    return itemExecutionId(executionId(this.key.run_id, this.key.node_id, this.key.visit), this.row.index);
  }
  get agentType(): string {
    return this.row.agent_type ?? this.item.node.agent_type;
  }
  claim(holder: string, now: number): void {
    itemMoves.claim(this.rs, this.item, holder, now);
  }
  renew(now: number): void {
    itemMoves.renew(this.rs, this.item, now);
  }
  succeed(output: Json, _decision: Decision, now: number): void {
    itemMoves.succeed(this.rs, this.map, this.item, output, now);
  }
  fail(error: VisitError, retryable: boolean, now: number, random: () => number): void {
    itemMoves.fail(this.rs, this.map, this.item, error, retryable, now, random);
  }
  failForGood(reason: string, error: VisitError, now: number): void {
    itemMoves.failForGood(this.rs, this.map, this.item, reason, error, now);
  }
  awaitApproval(_request: ApprovalRequest, now: number): void {
    this.failForGood("invalid_output", NO_APPROVAL, now);
  }
  interrupt(now: number): void {
    itemMoves.interrupt(this.rs, this.map, this.item, now);
  }
  /** A cancelled item counted as ended when it was cancelled: nothing waits for its attempt. */
  returned(): void {}
  touched(): void {
    itemChanges(this.rs).rows.add(this.item.row);
  }
}

/** The attempt of an item row this flush read (`rs.items`), of map visit `map`. */
export function itemAttempt(rs: RunState, item: LoadedItem, map: Visit): Attempt {
  return new ItemAttempt(rs, item, map, { run_id: map.run_id, node_id: map.node_id, visit: item.row.visit });
}

export function visitAttempt(
  rs: RunState,
  v: Visit,
  key: AttemptKey = { run_id: v.run_id, node_id: v.node_id, visit: v.visit },
): Attempt {
  return new VisitAttempt(rs, v, key);
}

export function compensationAttempt(
  rs: RunState,
  c: Compensation,
  key: AttemptKey = { run_id: c.run_id, node_id: c.node_id, visit: c.visit },
): Attempt {
  return new CompensationAttempt(rs, c, key);
}

/** The sender of a result still holds the attempt: the row is current, RUNNING, at that attempt (the fence, DESIGN §5). */
export function holds(a: Attempt, attempt: number): boolean {
  return a.current && a.row.state === "RUNNING" && a.row.attempt === attempt;
}

/** Why a result for `attempt` is fenced (recorded in `result.fenced`). */
export function fenceReason(a: Attempt | undefined, attempt: number): string {
  if (!a?.current) return "superseded";
  if (a.row.attempt !== attempt) return "stale_attempt";
  return `visit is ${a.row.state}`;
}

/** Ready, resolved and still waiting for an attempt (in memory, which may be ahead of the database). */
export function isClaimable(v: Visit, now: number): boolean {
  return (
    v.is_current &&
    (v.state === "PENDING" || v.state === "RETRYING") &&
    v.ready_at !== null &&
    v.ready_at <= now &&
    v.payload !== null
  );
}

/**
 * A running attempt (of a visit or a compensation) whose lease or deadline passed: why it
 * failed, and why its signal is aborted. Null while it still holds. `seconds`: the node's timeout.
 */
export function expiry(
  a: Pick<Visit, "state" | "attempt" | "deadline_at" | "lease_expires_at">,
  seconds: number | undefined,
  now: number,
): { error: VisitError; abort: "timeout" | "lease_expired" } | null {
  if (a.state !== "RUNNING" || a.lease_expires_at === null || a.lease_expires_at > now) return null;
  if (a.deadline_at !== null && a.deadline_at <= now) {
    return {
      error: { message: `attempt ${a.attempt} timed out after ${seconds} s`, reason: "timeout" },
      abort: "timeout",
    };
  }
  return {
    error: { message: `attempt ${a.attempt} sent no heartbeat in time`, reason: "lease_expired" },
    abort: "lease_expired",
  };
}

/** Why a report for an attempt another holder has is refused (who holds it is not told). */
export function notHeldBy(executionId: string, attempt: number, holder: string): string {
  const who = holder.startsWith("worker:") ? "another worker claimed it" : "an engine runs it in process";
  return `attempt ${attempt} of ${executionId} is not held by this worker: ${who}`;
}

/** The report that left the row as it is: sent again by a worker that missed the answer (idempotency). */
export function sameReport(
  v: Pick<Visit, "state" | "output" | "error">,
  report:
    | { kind: "success"; output: Json }
    | { kind: "failure" | "fail_visit"; error: VisitError }
    | { kind: "heartbeat" | "await_approval" },
): boolean {
  if (report.kind === "success") {
    return v.state === "SUCCEEDED" && JSON.stringify(v.output) === JSON.stringify(report.output);
  }
  if (!("error" in report)) return false;
  return (v.state === "RETRYING" || v.state === "FAILED") && v.error?.message === report.error.message;
}
