/**
 * `agent`'s states (DESIGN §14.2): a tool call that needs approval. The loop (src/calls/agent/)
 * cannot wait days inside an attempt, so it ends the attempt asking for a review
 * (`AwaitingApproval`); the visit is IN_REVIEW, holding no attempt, with the request as its
 * `output` (what the inbox shows). A decision, or the request's timeout, is recorded as the
 * visit's step `approval:<turn>:<index>` and the visit is RETRYING, due now, without spending its
 * retry budget: its next attempt replays the recorded turns and calls, reads the decision, and
 * runs the call or tells the model it was rejected. One call waits at a time; a turn with two
 * such calls asks for the second after the first is decided.
 */
import { clearAttempt, event, type RunState, transition } from "../run-state.js";
import type { Json, Visit } from "../types.js";
import type { KindStates } from "./kind.js";

/** What a tool call waiting for approval asks, as the inbox shows it. */
export interface ApprovalRequest {
  /** The call's key, `<execution_id>:<turn>:<index>`: names this review round. */
  key: string;
  /** The step its decision is recorded as: `approval:<turn>:<index>`. */
  step: string;
  tool: string;
  arguments: Record<string, Json>;
  /** Who may decide (absent: any reviewer). */
  assignees?: string[];
  /** Seconds to wait for a decision; then the model hears the call was not approved. */
  timeout: number;
}

/** A decision as the loop reads it from the step `approval:<turn>:<index>`. */
export interface ApprovalDecision {
  decision: "approve" | "reject" | "timeout";
  by: string | null;
  comment: string | null;
}

/** Thrown by the loop in its attempt: the attempt ends and the visit waits for this review. */
export class AwaitingApproval extends Error {
  constructor(readonly request: ApprovalRequest) {
    super(`tool call ${request.key} (${request.tool}) waits for approval`);
    this.name = "AwaitingApproval";
  }
}

/** The request an IN_REVIEW agent visit waits on (its `output` while it waits), or null. */
export function approvalOf(v: Pick<Visit, "state" | "output">): ApprovalRequest | null {
  if (v.state !== "IN_REVIEW" || v.output === null || typeof v.output !== "object") return null;
  const approval = (v.output as { approval?: unknown }).approval;
  return approval && typeof approval === "object" ? (approval as ApprovalRequest) : null;
}

/** The attempt asked for a review: the visit waits, holding no attempt, until a decision or the timeout. */
export function awaitApproval(rs: RunState, v: Visit, request: ApprovalRequest, now: number): void {
  transition(rs, v, "IN_REVIEW");
  clearAttempt(v);
  v.output = { approval: request as unknown as Json };
  v.deadline_at = now + request.timeout * 1000;
  v.lease_expires_at = v.deadline_at;
  event(rs, "review.requested", v, now, {
    execution_id: request.key,
    title: `Approve a call of tool ${request.tool}`,
    instructions: null,
    assignees: request.assignees ?? null,
    data: { tool: request.tool, arguments: request.arguments },
    deadline_at: v.deadline_at,
  });
}

/**
 * The review is decided (or timed out): the decision becomes the step the loop reads, and the
 * visit is due again now. A retry in all but its budget: `failures` does not grow.
 */
export function approvalDecided(rs: RunState, v: Visit, decision: ApprovalDecision, now: number): void {
  const request = approvalOf(v);
  if (!request) return;
  event(rs, "review.decided", v, now, {
    execution_id: request.key,
    decision: decision.decision,
    by: decision.by,
    comment: decision.comment,
  });
  rs.changes.steps.push({
    execution_id: v.execution_id,
    name: request.step,
    attempt: v.attempt,
    output: decision as unknown as Json,
  });
  transition(rs, v, "RETRYING");
  clearAttempt(v);
  v.output = null;
  v.ready_at = now;
  rs.changes.readied.push(v);
}

export const agent: KindStates = {
  due(rs, v, now) {
    const request = approvalOf(v);
    if (!request) return;
    const comment = `no decision within ${request.timeout} s`;
    approvalDecided(rs, v, { decision: "timeout", by: null, comment }, now);
  },
};
