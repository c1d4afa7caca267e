/**
 * Inputs a flush answers after checking them: external workers' reports (fenced by attempt,
 * lease and holder, DESIGN §5, §13), review decisions, redrives. The checks themselves are
 * pure (core/attempt.ts, core/preconditions.ts); this applies them to the loaded runs.
 */
import { attemptOf, notHeldBy, sameReport } from "../../core/attempt.js";
import { assigneeRefusal, retryRefusal, reviewRoundRefusal } from "../../core/preconditions.js";
import { redrive } from "../../core/redrive.js";
import { decideReview, event, failVisit, leaseExpiry } from "../../core/scheduler.js";
import { ConflictError, ForbiddenError, NotFoundError } from "../../errors.js";
import { addRunUsage } from "./budget.js";
import type { FlushContext } from "./context.js";
import type { Input, ReportAnswer } from "./inputs.js";

/**
 * An external worker's report. Held means: the row (visit or compensation) is current and
 * RUNNING at that attempt, held by this worker (DESIGN §13), and its lease has not passed (the
 * sweep may not have expired it yet). The same report sent again is answered `duplicate`;
 * anything else for an attempt not held is a conflict. Refusals for another token's or worker's
 * attempt record nothing. Who held an attempt that has ended is checked before the report is
 * queued (ExternalWorkers.verify).
 */
export async function report(f: FlushContext, input: Extract<Input, { kind: "report" }>): Promise<void> {
  const { report, done } = input;
  const rs = await f.loadExecution(input.execution_id);
  const a = rs ? attemptOf(rs, input.execution_id) : undefined;
  if (!rs || !a) return done.reject(new NotFoundError(`no task ${input.execution_id}; check the execution_id`));
  const { row, key } = a;
  if (input.agent_types !== null && !input.agent_types.includes(row.agent_type)) {
    return done.reject(
      new ForbiddenError(
        `this token may report tasks of ${input.agent_types.join(", ")}, not ${row.agent_type} (${input.execution_id})`,
      ),
    );
  }
  if (row.attempt === input.attempt && row.holder !== null && row.holder !== input.holder) {
    return done.reject(new ConflictError(notHeldBy(input.execution_id, input.attempt, row.holder)));
  }
  if (!a.current) {
    return done.reject(
      new ConflictError(`attempt ${input.attempt} of ${input.execution_id} is no longer held: superseded`),
    );
  }
  const answer = (status: ReportAnswer["status"]) => {
    f.out.callbacks.push(() => done.resolve({ status, lease_expires_at: row.lease_expires_at }));
  };
  const expired = row.lease_expires_at !== null && row.lease_expires_at <= f.now;
  if (row.state === "RUNNING" && row.attempt === input.attempt && !expired) {
    // The attempt's usage counts with its accepted report (DESIGN §12), before it ends.
    if (report.kind !== "heartbeat" && report.usage)
      await addRunUsage(f, input.usage_runs, report.usage, input.execution_id);
    if (report.kind === "heartbeat") {
      // As at the claim: the node's lease (deadline, heartbeat_timeout), shortened by the worker's.
      const node = rs.graph.nodes.get(row.node_id);
      const nodeLease = node ? leaseExpiry(node, row, f.now) : row.deadline_at;
      row.lease_expires_at = Math.min(nodeLease ?? Number.POSITIVE_INFINITY, f.now + report.lease_ms);
      a.touched();
    } else if (report.kind === "failure") a.fail(report.error, report.retryable, f.now, f.o.random);
    else if (report.kind === "fail_visit") a.failForGood(report.reason, report.error, f.now, f.o.random);
    else if (report.decision !== null) a.succeed(report.output, report.decision, f.now);
    else {
      // Checked as ended before it was queued, so it cannot be running again at this attempt.
      return done.reject(new ConflictError(`attempt ${input.attempt} of ${input.execution_id} is no longer held`));
    }
    return answer("accepted");
  }
  if (row.attempt === input.attempt && sameReport(row, report)) return answer("duplicate");
  const why =
    row.attempt !== input.attempt
      ? `its current attempt is ${row.attempt}`
      : row.state === "RUNNING"
        ? "its lease expired"
        : `it is ${row.state}`;
  if (report.kind !== "heartbeat") {
    event(rs, "result.fenced", key, f.now, {
      execution_id: input.execution_id,
      attempt: input.attempt,
      result: report.kind,
      reason: why,
      by: input.holder,
    });
    a.returned(input.attempt, f.now);
  }
  f.out.callbacks.push(() =>
    done.reject(new ConflictError(`attempt ${input.attempt} of ${input.execution_id} is no longer held: ${why}`)),
  );
}

/** A person's decision: exactly one wins, for the review round it names (DESIGN §5). */
export async function review(f: FlushContext, input: Extract<Input, { kind: "review" }>): Promise<void> {
  const { run_id, node_id, decision, done } = input;
  const rs = await f.load(run_id);
  const v = rs?.current.get(node_id);
  if (!rs || !v) return done.reject(new NotFoundError(`run ${run_id} has no node "${node_id}"`));
  const refused =
    reviewRoundRefusal(v, run_id, input.execution_id) ??
    assigneeRefusal(node_id, (v.payload as { assignees?: unknown } | null)?.assignees, decision);
  if (refused) return done.reject(refused);
  // An admin deciding as itself is recorded as itself alone.
  const recorded = decision.admin === decision.by ? { ...decision, admin: null } : decision;
  if (decision.decision === "approve" && "reason" in input.next) {
    failVisit(rs, v, input.next.reason, { message: input.next.message, reason: input.next.reason }, f.now);
  } else {
    decideReview(rs, v, recorded, "kind" in input.next ? input.next : { kind: "none" }, f.now);
  }
  const decided = { ...v };
  f.out.callbacks.push(() => done.resolve(decided));
}

/** A redrive (DESIGN §6): only a FAILED or CANCELLED run, and with `force` one that needs attention. */
export async function retry(f: FlushContext, input: Extract<Input, { kind: "retry" }>): Promise<void> {
  const rs = await f.load(input.run_id);
  if (!rs) return input.done.reject(new NotFoundError(`run ${input.run_id} does not exist`));
  const refused = retryRefusal(rs.run, input, (id) => rs.graph.nodes.has(id));
  if (refused) return input.done.reject(refused);
  redrive(rs, { from: input.from, force: input.force }, f.now);
  return f.answer(rs, input.done);
}
