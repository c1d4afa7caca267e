/**
 * What a cancel, a redrive or a review decision requires of a run before it changes anything
 * (DESIGN §5, §6, §13): the refusal to answer, or null. Pure: no I/O.
 */
import { ConflictError, ForbiddenError, NotFoundError } from "../errors.js";
import type { ReviewDecision } from "./scheduler.js";
import type { Run, Visit } from "./types.js";

/** A cancel needs a run that has not ended. */
export function cancelRefusal(run: Run): ConflictError | null {
  if (run.ended_at === null) return null;
  const what = run.status === "COMPENSATING" ? "is compensating" : `already ended ${run.status}`;
  return new ConflictError(`run ${run.run_id} ${what}; nothing to cancel`);
}

/** An event needs a run that has not ended (DESIGN §11.2: sending to a finished run is a conflict). */
export function eventRefusal(run: Run, name: string): ConflictError | null {
  if (run.ended_at === null) return null;
  const what = run.status === "COMPENSATING" ? "is compensating" : `already ended ${run.status}`;
  return new ConflictError(`run ${run.run_id} ${what}; it takes no more events (event "${name}" was not stored)`);
}

/** A redrive: only a FAILED or CANCELLED top-level run, and with `force` one that needs attention. */
export function retryRefusal(
  run: Run,
  options: { from: string | null; force: boolean },
  hasNode: (id: string) => boolean,
): ConflictError | NotFoundError | null {
  if (run.status !== "FAILED" && run.status !== "CANCELLED") {
    return new ConflictError(`run ${run.run_id} is ${run.status}; only a FAILED or CANCELLED run can be retried`);
  }
  if (run.parent !== null) {
    // Its parent attempt has ended (it failed with this child): a redriven child would answer no one.
    return new ConflictError(
      `run ${run.run_id} is a child run of run ${run.parent.run_id} (node ${run.parent.node_id}); retry the parent run, which starts a new child for that node`,
    );
  }
  if (run.needs_attention && !options.force) {
    return new ConflictError(
      `run ${run.run_id} needs attention: a compensation failed for good. Undo its effect by hand, then retry with force`,
    );
  }
  if (options.from !== null && !hasNode(options.from)) {
    return new NotFoundError(`workflow ${run.workflow_id} has no node "${options.from}" to retry from`);
  }
  return null;
}

/** A decision needs the node IN_REVIEW, at the round it names (exactly one decision wins). */
export function reviewRoundRefusal(v: Visit, runId: string, executionId: string | undefined): ConflictError | null {
  if (v.state === "IN_REVIEW" && (executionId === undefined || executionId === v.execution_id)) return null;
  const what = v.state === "IN_REVIEW" ? `its current round is ${v.execution_id}` : `it is ${v.state}`;
  return new ConflictError(`node ${v.node_id} of run ${runId} is not waiting for this decision: ${what}`);
}

/**
 * Why `decision` may not decide a review with these `assignees` (null: it may). Fails closed
 * (DESIGN §13): assignees that are anything but a list (or absent) let nobody decide, and an
 * admin decides only *as* one of the assignees.
 */
export function assigneeRefusal(nodeId: string, assignees: unknown, decision: ReviewDecision): ForbiddenError | null {
  if (assignees === undefined || assignees === null) return null;
  if (!Array.isArray(assignees)) {
    return new ForbiddenError(
      `nobody may decide ${nodeId}: its assignees are not a list of names; fix the workflow's payload.assignees`,
    );
  }
  if (assignees.includes(decision.by)) return null;
  const names = assignees.join(", ");
  if (decision.admin !== null && decision.admin === decision.by) {
    return new ForbiddenError(
      `${decision.admin} is not an assignee of ${nodeId}: an admin decides as one of its assignees; choose one with by (one of: ${names})`,
    );
  }
  return new ForbiddenError(
    `${decision.by ?? "an anonymous reviewer"} may not decide ${nodeId}: assignees are ${names}`,
  );
}
