/**
 * The work of `review` and `listReviews` outside a flush: a decision checked and, for an
 * approval, the edges it fires worked out beforehand (JSONata is async, a flush is not);
 * and the pending reviews as users see them.
 */
import { approvalOf } from "../core/kinds/agent.js";
import type { Json } from "../core/types.js";
import { NotFoundError, ValidationError } from "../errors.js";
import type { Store } from "../store/store.js";
import type { AttemptRunner } from "./attempts/runner.js";
import type { PendingReview, ReviewOptions } from "./engine-options.js";
import { refuseNul } from "./identifiers.js";
import { jsonProblem } from "./json.js";
import type { Input } from "./writer/inputs.js";

/** The review input to queue, without its callback. */
export type ReviewInput = Omit<Extract<Input, { kind: "review" }>, "done">;

/** @throws ValidationError for a bad decision or output, NotFoundError for an unknown run. */
export async function reviewInput(
  store: Store,
  attempts: AttemptRunner,
  runId: string,
  nodeId: string,
  options: ReviewOptions,
): Promise<ReviewInput> {
  if (options.decision !== "approve" && options.decision !== "reject") {
    throw new ValidationError("Review decision is invalid", [
      { path: "decision", message: `must be "approve" or "reject", got ${JSON.stringify(options.decision)}` },
    ]);
  }
  const output = (options.output ?? null) as Json;
  const problem = jsonProblem(output, "output");
  if (problem) throw new ValidationError("Review output is not JSON", [{ path: "output", message: problem }]);
  const run = await store.getRun(runId);
  if (!run) throw new NotFoundError(`run ${runId} does not exist; check the run id and the database`);
  const decision = {
    decision: options.decision,
    by: options.by ?? null,
    admin: options.admin ?? null,
    comment: options.comment ?? null,
    output,
  };
  const approved = { decision: decision.decision, by: decision.by, comment: decision.comment, output };
  const next =
    options.decision === "approve"
      ? await attempts.outcomes.decideOutput(run, nodeId, approved)
      : { decision: { kind: "none" as const } };
  return {
    kind: "review",
    run_id: runId,
    node_id: nodeId,
    ...(options.execution_id !== undefined ? { execution_id: options.execution_id } : {}),
    decision,
    next: "decision" in next ? next.decision : next,
    workflow_version: run.workflow_version,
  };
}

/** What waits for people, oldest first. */
export async function pendingReviews(store: Store, runIds?: readonly string[]): Promise<PendingReview[]> {
  refuseNul({ run_ids: runIds });
  const out: PendingReview[] = [];
  for (const v of await store.listReviews(runIds)) {
    const approval = approvalOf(v);
    if (approval) {
      // An agent's tool call (core/kinds/agent.ts): the round is the call's key; the data, the tool and its arguments.
      out.push({
        run_id: v.run_id,
        workflow_id: v.workflow_id,
        node_id: v.node_id,
        visit: v.visit,
        execution_id: approval.key,
        title: `Approve a call of tool ${approval.tool}`,
        instructions: null,
        assignees: (approval.assignees ?? null) as Json,
        data: { tool: approval.tool, arguments: approval.arguments },
        requested_at: v.deadline_at === null ? v.started_at : v.deadline_at - approval.timeout * 1000,
        deadline_at: v.deadline_at,
        trace_id: v.trace_id,
      });
      continue;
    }
    const payload = (v.payload ?? {}) as Record<string, Json>;
    out.push({
      run_id: v.run_id,
      workflow_id: v.workflow_id,
      node_id: v.node_id,
      visit: v.visit,
      execution_id: v.execution_id,
      title: payload.title ?? null,
      instructions: payload.instructions ?? null,
      assignees: payload.assignees ?? null,
      data: v.payload,
      requested_at: v.started_at,
      deadline_at: v.deadline_at,
      trace_id: v.trace_id,
    });
  }
  return out;
}
