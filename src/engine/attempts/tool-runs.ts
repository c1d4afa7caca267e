/**
 * An agent tool's call run as a child run of its visit (DESIGN §14.2): a `workflow` tool's, or a
 * tool whose agent no agent of this engine serves (a run of one node of that agent, for a worker
 * to claim). The writer starts it under an engine key made from the call's (`tool_run`), or finds
 * the one an earlier attempt started; the loop waits here for its end, its output the call's
 * result. Its end settles nothing else: the visit's attempt is the loop's.
 */
import type { Task } from "../../agents/task.js";
import type { ChildCall } from "../../calls/agent/tools.js";
import type { Json } from "../../core/types.js";
import type { Store } from "../../store/store.js";
import { itemWorkflowId, type WorkflowRegistry } from "../registry.js";
import { type RunReadParts, waitForRun } from "../run-read.js";
import type { Submit } from "../writer/inputs.js";

export function toolRuns(o: {
  store: Store;
  registry: Pick<WorkflowRegistry, "storeDerived">;
  submit: Submit;
  /** What waiting for a run's end reads with (the engine's parts, there once it is wired). */
  reads: () => RunReadParts;
}): (task: Task, call: string, request: ChildCall, signal: AbortSignal) => Promise<Json> {
  return async (task, call, request, signal) => {
    let target: { workflow_id: string; version: number | null; input: Json };
    if ("tool" in request) {
      // The tool's workflow is derived from the visit's own, at its version (registry.ts).
      const run = await o.store.getRun(task.run_id);
      if (!run) throw new Error(`run ${task.run_id} is gone`);
      await o.registry.storeDerived(run.workflow_id, run.workflow_version);
      const workflow_id = itemWorkflowId(run.workflow_id, task.node_id, request.tool);
      target = { workflow_id, version: run.workflow_version, input: request.input };
    } else target = request;
    const runId = await new Promise<string>((resolve, reject) => {
      o.submit({
        kind: "tool_run",
        execution_id: task.execution_id,
        attempt: task.attempt,
        call,
        ...target,
        done: { resolve, reject },
      });
    });
    signal.throwIfAborted();
    const ended = await new Promise<Awaited<ReturnType<typeof waitForRun>>>((resolve, reject) => {
      const aborted = () => reject(signal.reason);
      signal.addEventListener("abort", aborted, { once: true });
      waitForRun(o.reads(), runId)
        .then(resolve, reject)
        .finally(() => signal.removeEventListener("abort", aborted));
    });
    // A workflow's output is its ending nodes' by id, as a `workflow` node's; the tool's own run's is its node's.
    if (ended.status === "SUCCEEDED")
      return "tool" in request ? ((ended.output as { call?: Json }).call ?? null) : ended.output;
    const how = ended.status === "FAILED" ? "failed" : "was cancelled";
    throw new Error(
      `child run ${runId} of ${ended.workflow_id} ${how}${ended.error ? `: ${ended.error.message}` : ""}`,
    );
  };
}
