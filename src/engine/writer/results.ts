/**
 * Inputs a flush applies after checking them: attempts' results and heartbeats, in process or
 * from external workers (fenced by attempt, and for a worker by lease and holder, DESIGN §5,
 * §13), review decisions, redrives. The checks themselves are pure (core/attempt.ts,
 * core/preconditions.ts); this applies them to the loaded runs.
 */
import {
  type Attempt,
  type AttemptKey,
  attemptOf,
  fenceReason,
  holds,
  notHeldBy,
  parseExecutionId,
  sameReport,
} from "../../core/attempt.js";
import { undoneExecutionId } from "../../core/compensation.js";
import { approvalDecided, approvalOf } from "../../core/kinds/agent.js";
import { assigneeRefusal, retryRefusal, reviewRoundRefusal } from "../../core/preconditions.js";
import { redrive } from "../../core/redrive.js";
import { decideReview, event, failVisit, leaseExpiry, type RunState } from "../../core/scheduler.js";
import type { Json } from "../../core/types.js";
import { ConflictError, ForbiddenError, NotFoundError } from "../../errors.js";
import { addRunUsage } from "./budget.js";
import type { FlushContext } from "./context.js";
import type { AttemptRef, AttemptResult, Input, ReportAnswer } from "./inputs.js";
import { RATE_LIMITED, type Rates } from "./rates.js";
import type { RunKeys } from "./run-keys.js";

type ReportInput = Extract<Input, { kind: "report" }>;
type WorkerHeartbeat = Extract<Input, { kind: "worker_heartbeat" }>;
type StepInput = Extract<Input, { kind: "step" }>;
type Sender = Pick<ReportInput, "holder" | "agent_types">;

/**
 * Applies an attempt's result (of a visit or a compensation row), the one call for both paths:
 * in process (`sent` undefined) or reported by an external worker (`sent`, its report input).
 * The fence of DESIGN §5: the sender must hold the attempt (the row is current, RUNNING, at that
 * attempt); a result that does not is recorded as `result.fenced`, and a cancelled attempt that
 * returned releases its row. A worker's report adds only the checks of its sender (DESIGN §13,
 * refusals record nothing), its lease (the sweep may not have expired it yet), its usage, and
 * the answer: `accepted`; `duplicate` for the same report sent again; else a conflict. Who held
 * an attempt that has ended is checked before the report is queued (ExternalWorkers.verify).
 */
export async function applyResult(f: FlushContext, rates: Rates, r: AttemptResult, sent?: ReportInput): Promise<void> {
  const rs = await f.loadExecution(r.execution_id);
  const a = rs ? attemptOf(rs, r.execution_id) : undefined;
  if (sent === undefined) {
    if (a && holds(a, r.attempt)) {
      settle(f, a, r);
      return settleRates(rates, a, r);
    }
    if (a?.current) a.returned(r.attempt, f.now);
    // Fenced, but the tokens it reported were spent all the same.
    if (a && r.tokens) await rates.charge(a, r.tokens.expected, r.tokens.used, r.tokens.used > 0);
    if (rs) {
      const key = a?.key ?? parseExecutionId(undoneExecutionId(r.execution_id) ?? r.execution_id);
      fenced(f, rs, key, r, fenceReason(a, r.attempt));
    }
    return;
  }
  const { done } = sent;
  if (!rs || !a) return done.reject(new NotFoundError(`no task ${r.execution_id}; check the execution_id`));
  const refused = senderRefusal(a, r.execution_id, r.attempt, sent);
  if (refused) return done.reject(refused);
  if (holds(a, r.attempt) && !leaseExpired(a, f.now)) {
    // Checked as ended before it was queued, so it cannot be running again at this attempt.
    if (r.kind === "success" && r.decision === null) return done.reject(new ConflictError(notHeld(r)));
    // The attempt's usage counts with its accepted report (DESIGN §12), before it ends.
    if (sent.usage) await addRunUsage(f, sent.usage_runs, sent.usage, r.execution_id);
    settle(f, a, r);
    await settleRates(rates, a, r);
    return answer(f, a, done, "accepted");
  }
  if (a.row.attempt === r.attempt && sameReport(a.row, r)) return answer(f, a, done, "duplicate");
  const why = unheldWhy(a, r.attempt);
  fenced(f, a.rs, a.key, r, why, sent.holder);
  a.returned(r.attempt, f.now);
  f.out.callbacks.push(() => done.reject(new ConflictError(`${notHeld(r)}: ${why}`)));
}

/**
 * An external worker's heartbeat: checked like its report, then, as at the claim, the node's
 * lease (deadline, heartbeat_timeout) shortened by the worker's. A heartbeat for an attempt no
 * longer held is a conflict, and records nothing.
 */
export async function workerHeartbeat(f: FlushContext, input: WorkerHeartbeat): Promise<void> {
  const { execution_id, attempt, done } = input;
  const rs = await f.loadExecution(execution_id);
  const a = rs ? attemptOf(rs, execution_id) : undefined;
  if (!rs || !a) return done.reject(new NotFoundError(`no task ${execution_id}; check the execution_id`));
  const refused = senderRefusal(a, execution_id, attempt, input);
  if (refused) return done.reject(refused);
  if (holds(a, attempt) && !leaseExpired(a, f.now)) {
    const { row } = a;
    const node = rs.graph.nodes.get(row.node_id);
    const nodeLease = node ? leaseExpiry(node, row, f.now) : row.deadline_at;
    row.lease_expires_at = Math.min(nodeLease ?? Number.POSITIVE_INFINITY, f.now + input.lease_ms);
    a.touched();
    return answer(f, a, done, "accepted");
  }
  const why = unheldWhy(a, attempt);
  f.out.callbacks.push(() => done.reject(new ConflictError(`${notHeld(input)}: ${why}`)));
}

/**
 * A durable step (DESIGN §14.1): recorded while its attempt holds its row, refused like a late
 * result otherwise (nothing recorded, no event: the attempt's own result is fenced later). A
 * worker's is checked like its report: sender, then holder and lease.
 */
export async function recordStep(f: FlushContext, input: StepInput): Promise<void> {
  const { execution_id, attempt, done } = input;
  const rs = await f.loadExecution(execution_id);
  const a = rs ? attemptOf(rs, execution_id) : undefined;
  if (!rs || !a) return done.reject(new NotFoundError(`no task ${execution_id}; check the execution_id`));
  const refused = input.sender ? senderRefusal(a, execution_id, attempt, input.sender) : null;
  if (refused) return done.reject(refused);
  if (!holds(a, attempt) || (input.sender && leaseExpired(a, f.now))) {
    const why = a.current ? unheldWhy(a, attempt) : "superseded";
    return done.reject(new ConflictError(`${notHeld(input)}: ${why}; step "${input.name}" was not recorded`));
  }
  const { run_id, node_id, visit } = a.key;
  const { name, output, size } = input;
  f.recordStep({ execution_id, name, run_id, node_id, visit, attempt, output, size, recorded_at: f.now }, done);
}

/** Progress of an attempt that still holds its visit, as the run's `node.progress` event (DESIGN §15). */
export async function recordProgress(f: FlushContext, input: Extract<Input, { kind: "progress" }>): Promise<void> {
  const rs = await f.loadExecution(input.execution_id);
  const a = rs ? attemptOf(rs, input.execution_id) : undefined;
  if (!rs || !a || !holds(a, input.attempt)) return;
  event(rs, "node.progress", a.key, f.now, { attempt: input.attempt, progress: input.progress });
}

/** An in-process attempt's heartbeat: renews its lease while it holds the attempt; answers whether it does. */
export async function heartbeat(f: FlushContext, input: Extract<Input, { kind: "heartbeat" }>): Promise<void> {
  const rs = await f.loadExecution(input.execution_id);
  const a = rs ? attemptOf(rs, input.execution_id) : undefined;
  const held = a !== undefined && holds(a, input.attempt);
  if (held) a.renew(f.now);
  else if (a?.current) a.returned(input.attempt, f.now);
  f.out.callbacks.push(() => input.done.resolve(held));
}

/** The transition a held attempt's result makes (core/attempt.ts: one lifecycle for visits and compensation rows). */
function settle(f: FlushContext, a: Attempt, r: AttemptResult): void {
  if (r.kind === "success") {
    // Always decided in process; a worker's undecided (late) success was refused before this.
    if (r.decision !== null) a.succeed(r.output, r.decision, f.now);
  } else if (r.kind === "failure") a.fail(r.error, r.retryable, f.now, f.o.random);
  else if (r.kind === "await_approval") a.awaitApproval(r.request, f.now, f.o.random);
  else a.failForGood(r.reason, r.error, f.now, f.o.random);
}

/**
 * What a held attempt's result does to its type's rate limits (rates.ts): the tokens it took at
 * its claim are settled with what it used (which, when it succeeded or reported any, is the
 * type's next expectation), and a provider's 429 with a Retry-After holds its type on every engine.
 */
async function settleRates(rates: Rates, a: Attempt, r: AttemptResult): Promise<void> {
  if (r.tokens) await rates.charge(a, r.tokens.expected, r.tokens.used, r.kind === "success" || r.tokens.used > 0);
  const wait = r.kind === "failure" && r.error.reason === RATE_LIMITED ? (r.error.retry_after_ms ?? 0) : 0;
  if (wait > 0) await rates.hold(a.agentType, wait);
}

/**
 * Why a worker may not report or heartbeat this attempt, or null (DESIGN §13): an agent type
 * its token may not report, an attempt another holder has, or a row superseded.
 */
function senderRefusal(a: Attempt, executionId: string, attempt: number, sender: Sender): Error | null {
  const { row } = a;
  if (sender.agent_types !== null && !sender.agent_types.includes(a.agentType)) {
    return new ForbiddenError(
      `this token may report tasks of ${sender.agent_types.join(", ")}, not ${a.agentType} (${executionId})`,
    );
  }
  if (row.attempt === attempt && row.holder !== null && row.holder !== sender.holder) {
    return new ConflictError(notHeldBy(executionId, attempt, row.holder));
  }
  if (!a.current) return new ConflictError(`attempt ${attempt} of ${executionId} is no longer held: superseded`);
  return null;
}

/** A worker's lease that has passed: the sweep may not have expired it yet. */
function leaseExpired(a: Attempt, now: number): boolean {
  return a.row.lease_expires_at !== null && a.row.lease_expires_at <= now;
}

/** Why a worker's current row is not held at `attempt` (its answer and its `result.fenced`). */
function unheldWhy(a: Attempt, attempt: number): string {
  if (a.row.attempt !== attempt) return `its current attempt is ${a.row.attempt}`;
  return a.row.state === "RUNNING" ? "its lease expired" : `it is ${a.row.state}`;
}

function notHeld(at: AttemptRef): string {
  return `attempt ${at.attempt} of ${at.execution_id} is no longer held`;
}

/** Answers a worker once committed, with the attempt's lease as the transaction leaves it. */
function answer(f: FlushContext, a: Attempt, done: ReportInput["done"], status: ReportAnswer["status"]): void {
  const { row } = a;
  f.out.callbacks.push(() => done.resolve({ status, lease_expires_at: row.lease_expires_at }));
}

/** Records a result that came for an attempt its sender no longer holds (`by`: a worker's holder). */
function fenced(
  f: FlushContext,
  rs: RunState,
  key: AttemptKey | null,
  r: AttemptResult,
  reason: string,
  by?: string,
): void {
  const data: Record<string, Json> = { execution_id: r.execution_id, attempt: r.attempt, result: r.kind, reason };
  if (by !== undefined) data.by = by;
  event(rs, "result.fenced", key, f.now, data);
}

/** A person's decision: exactly one wins, for the review round it names (DESIGN §5). */
export async function review(f: FlushContext, input: Extract<Input, { kind: "review" }>): Promise<void> {
  const { run_id, node_id, decision, done } = input;
  const rs = await f.load(run_id);
  const v = rs?.current.get(node_id);
  if (!rs || !v) return done.reject(new NotFoundError(`run ${run_id} has no node "${node_id}"`));
  // An agent's tool call waiting for approval: its round is the call's key, its assignees the tool's.
  const approval = approvalOf(v);
  const round = approval ? { ...v, execution_id: approval.key } : v;
  const assignees = approval ? approval.assignees : (v.payload as { assignees?: unknown } | null)?.assignees;
  const refused =
    reviewRoundRefusal(round, run_id, input.execution_id) ?? assigneeRefusal(node_id, assignees, decision);
  if (refused) return done.reject(refused);
  if (!approval && decision.decision === "approve" && rs.run.workflow_version !== input.workflow_version) {
    // Its edges were worked out against the version the run had (migrateRuns moved it since).
    return done.reject(
      new ConflictError(
        `run ${run_id} moved to version ${rs.run.workflow_version} of its workflow while the decision was made; decide again`,
      ),
    );
  }
  // An admin deciding as itself is recorded as itself alone.
  const recorded = decision.admin === decision.by ? { ...decision, admin: null } : decision;
  if (approval) {
    approvalDecided(rs, v, { decision: recorded.decision, by: recorded.by, comment: recorded.comment }, f.now);
  } else if (decision.decision === "approve" && "reason" in input.next) {
    failVisit(rs, v, input.next.reason, { message: input.next.message, reason: input.next.reason }, f.now);
  } else {
    decideReview(rs, v, recorded, "kind" in input.next ? input.next : { kind: "none" }, f.now);
  }
  const decided = { ...v };
  f.out.callbacks.push(() => done.resolve(decided));
}

/** A redrive (DESIGN §6): only a FAILED or CANCELLED run, and with `force` one that needs attention. */
export async function retry(f: FlushContext, input: Extract<Input, { kind: "retry" }>, keys: RunKeys): Promise<void> {
  const rs = await f.load(input.run_id);
  if (!rs) return input.done.reject(new NotFoundError(`run ${input.run_id} does not exist`));
  const refused = retryRefusal(rs.run, input, (id) => rs.graph.nodes.has(id)) ?? (await keys.retryConflict(rs.run));
  if (refused) return input.done.reject(refused);
  const before = new Map([...rs.current].map(([id, v]) => [id, { visit: v.visit, state: v.state }]));
  const again = redrive(rs, { from: input.from, force: input.force }, f.now);
  // A visit that did not succeed hands its durable steps to the one replacing it (DESIGN §14.1);
  // a success that runs again (downstream, `from`, undone) starts afresh: its steps were its work.
  if (!input.fresh_steps) {
    for (const node_id of again) {
      const old = before.get(node_id);
      const now = rs.current.get(node_id);
      if (!old || !now || old.state === "SUCCEEDED") continue;
      const run_id = rs.run.run_id;
      await f.tx.copySteps({ run_id, node_id, visit: old.visit }, { run_id, node_id, visit: now.visit });
    }
  }
  return f.answer(rs, input.done);
}
