/**
 * Engine.forkRun (DESIGN §16): checks the call against the source run as committed (a top-level
 * run, a node of the workflow, payloads JSON of nodes the workflow has, the input of its
 * input_schema), builds the new run's row, and queues a `fork` for the dispatcher, which keeps
 * what the source did before `from` as the transaction reads it (writer/fork.ts).
 */
import type { Json, Run } from "../core/types.js";
import { ConflictError, NotFoundError, type Problem, ValidationError } from "../errors.js";
import type { ForkRunOptions } from "./engine-options.js";
import type { EngineParts } from "./engine-parts.js";
import { refuseNul } from "./identifiers.js";
import { canonicalJson, jsonProblem } from "./json.js";
import { ITEM_SEPARATOR, type LoadedWorkflow } from "./registry.js";
import { newRun } from "./run-start.js";
import { inRunStartSpan } from "./telemetry/tracing.js";

/** Engine.forkRun. */
export async function forkRun(p: EngineParts, runId: string, options: ForkRunOptions): Promise<Run> {
  const { from, scope } = options;
  refuseNul({ run_id: runId, from, scope });
  if (typeof from !== "string" || from === "") {
    throw new ValidationError("forkRun needs the node to fork from", [
      { path: "from", message: "must be a node id of the run's workflow" },
    ]);
  }
  const source = await p.store.getRun(runId);
  if (!source) throw new NotFoundError(`run ${runId} does not exist`);
  if (source.workflow_id.includes(ITEM_SEPARATOR) && source.parent !== null) {
    throw new ConflictError(
      `run ${runId} is an item run of map node ${source.parent.node_id} of run ${source.parent.run_id}; fork that run instead`,
    );
  }
  if (source.parent !== null) {
    throw new ConflictError(
      `run ${runId} is a child run of run ${source.parent.run_id} (node ${source.parent.node_id}); fork that run instead`,
    );
  }
  const workflow = await p.registry.get(source.workflow_id, options.version ?? source.workflow_version);
  if (!workflow.graph.nodes.has(from)) {
    throw new ValidationError(`Cannot fork run ${runId} from "${from}"`, [
      { path: "from", message: `workflow ${workflow.id}@${workflow.version} has no node "${from}"` },
    ]);
  }
  const payloads = payloadsOf(workflow, options.payloads, p.maxPayloadBytes);
  const input = (options.input === undefined ? source.input : options.input) as Json;
  return inRunStartSpan(workflow.id, undefined, (traceparent) => {
    const run: Run = {
      ...newRun(
        workflow,
        {
          input,
          scope: scope ?? source.scope ?? undefined,
          budget: source.budget ?? undefined,
          tags: source.tags,
          priority: source.priority,
        },
        p.clock.now(),
        p.maxPayloadBytes,
        traceparent,
      ),
      forked_from: { run_id: source.run_id, node_id: from },
    };
    const input_edited = options.input !== undefined && canonicalJson(run.input) !== canonicalJson(source.input);
    return new Promise<Run>((resolve, reject) =>
      p.dispatcher.push({
        kind: "fork",
        run_id: source.run_id,
        from,
        run,
        payloads,
        input_edited,
        done: { resolve, reject },
      }),
    );
  });
}

/**
 * forkRun's payloads, checked: an object of JSON values within the size limit, each of a node of
 * `workflow` and accepted by its kind as a resolved payload. Whether a node is kept is the
 * flush's to judge (the source may still be running).
 * @throws ValidationError naming every payload refused
 */
function payloadsOf(workflow: LoadedWorkflow, payloads: unknown, maxPayloadBytes: number): Record<string, Json> {
  if (payloads === undefined) return {};
  if (payloads === null || typeof payloads !== "object" || Array.isArray(payloads)) {
    throw new ValidationError("Fork payloads are not valid", [
      { path: "payloads", message: 'must be an object of payloads by node id, e.g. { "draft": { "tone": "formal" } }' },
    ]);
  }
  const problems: Problem[] = [];
  for (const [id, payload] of Object.entries(payloads)) {
    const path = `payloads.${id}`;
    const node = workflow.graph.nodes.get(id);
    const bad = jsonProblem(payload, path);
    if (!node) problems.push({ path, message: `workflow ${workflow.id}@${workflow.version} has no node "${id}"` });
    else if (bad) problems.push({ path, message: bad });
    else if (payload === null)
      problems.push({ path, message: "must not be null; leave the node out to resolve its payload" });
    else if (Buffer.byteLength(canonicalJson(payload as Json)) > maxPayloadBytes) {
      problems.push({ path, message: `is over the limit of ${maxPayloadBytes} bytes (maxPayloadBytes)` });
    } else {
      const refused = node.kind.checkResolved?.(payload as Json) ?? null;
      if (refused) problems.push({ path, message: refused });
    }
  }
  if (problems.length > 0) throw new ValidationError("Fork payloads are not valid", problems);
  return payloads as Record<string, Json>;
}
