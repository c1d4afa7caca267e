/** Reading a node's durable steps (DESIGN §14.1): what its visits' attempts recorded with `task.step`. */
import { NotFoundError } from "../errors.js";
import type { StepRow, Store } from "../store/store.js";
import { refuseNul } from "./identifiers.js";
import type { WorkflowRegistry } from "./registry.js";

/**
 * The steps of a run (of `nodeId` only, when given) over its visits, by node, visit, then the
 * order they were recorded in.
 * @throws NotFoundError for an unknown run, or a node its workflow does not have
 */
export async function listSteps(
  store: Store,
  registry: WorkflowRegistry,
  runId: string,
  nodeId?: string,
): Promise<StepRow[]> {
  refuseNul({ run_id: runId, node_id: nodeId });
  const run = await store.getRun(runId);
  if (!run) throw new NotFoundError(`run ${runId} does not exist; check the run id and the database`);
  const { graph } = await registry.get(run.workflow_id, run.workflow_version);
  if (nodeId !== undefined && !graph.nodes.has(nodeId)) {
    throw new NotFoundError(
      `workflow ${run.workflow_id} v${run.workflow_version} of run ${runId} has no node "${nodeId}"`,
    );
  }
  return store.runSteps(runId, nodeId);
}
