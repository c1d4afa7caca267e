/**
 * Event triggers (DESIGN §17), before a publish is queued: the workflows whose latest version
 * declares the event, those the publisher's scope covers (DESIGN §13.1: others are passed over
 * without a word, as a scoped token does not see them), the first trigger of each that matches
 * the event's key, and the run it would start, its input made and checked and its idempotency
 * key the trigger's engine key. The flush starts them with the delivery, in one transaction
 * (writer/triggers.ts). Templates are evaluated here because JSONata is async and may run in the
 * sandbox: never inside a transaction.
 */
import { budgetOf } from "../core/budget.js";
import { scopeAllows } from "../core/scope.js";
import { DEFAULT_PRIORITY, type InboxEvent, type Json, type RunTrigger } from "../core/types.js";
import { ExpressionError } from "../definition/expressions.js";
import { matchingTrigger, type TriggerEvent, triggerInput } from "../definition/triggers.js";
import type { Problem } from "../errors.js";
import { uuidv7 } from "../ids.js";
import type { EngineParts } from "./engine-parts.js";
import { canonicalJson, jsonProblem } from "./json.js";
import type { LoadedWorkflow } from "./registry.js";
import { runRow } from "./run-start.js";
import { traceparentOf, tracer } from "./telemetry/tracing.js";
import { triggerKey } from "./writer/engine-keys.js";
import type { TriggeredRun, TriggerRefusal } from "./writer/inputs.js";

/** The runs an event's triggers would start, and the triggers that matched but cannot start one. */
export async function prepareTriggers(
  p: EngineParts,
  event: InboxEvent,
  scope: readonly string[] | null,
): Promise<{ runs: TriggeredRun[]; refused: TriggerRefusal[] }> {
  const runs: TriggeredRun[] = [];
  const refused: TriggerRefusal[] = [];
  const key = event.key as string;
  for (const { id, version } of await p.store.workflowsTriggeredBy(event.name)) {
    if (!scopeAllows(scope, id)) continue;
    const workflow = await p.registry.get(id, version);
    const trigger = matchingTrigger(workflow.triggers, event.name, key);
    if (!trigger) continue;
    const made = await triggeredRun(p, workflow, trigger.index, event, scope);
    if ("run" in made) runs.push(made);
    else refused.push(made);
  }
  return { runs, refused };
}

async function triggeredRun(
  p: EngineParts,
  workflow: LoadedWorkflow,
  index: number,
  e: InboxEvent,
  scope: readonly string[] | null,
): Promise<TriggeredRun | TriggerRefusal> {
  const trigger = workflow.triggers[index];
  if (!trigger) throw new Error(`skein: workflow ${workflow.id} has no trigger ${index}`);
  const refusal = (reason: TriggerRefusal["reason"], message: string, problems: Problem[]): TriggerRefusal => ({
    workflow_id: workflow.id,
    workflow_version: workflow.version,
    trigger: index,
    reason,
    message,
    problems,
  });
  const now = p.clock.now();
  const run_id = uuidv7(now);
  const traceparent = startSpan(workflow, run_id, e.name);
  const event: TriggerEvent = {
    name: e.name,
    key: e.key as string,
    payload: e.payload,
    idempotency_key: e.idempotency_key,
    event_id: e.event_id,
  };
  let input: unknown;
  try {
    input = await triggerInput(trigger, event, { run_id, trace_id: traceparent.slice(3, 35) });
  } catch (err) {
    if (!(err instanceof ExpressionError)) throw err;
    return refusal("input_failed", `the input of triggers[${index}] of ${workflow.id} failed: ${err.message}`, [
      { path: err.path, message: err.message },
    ]);
  }
  const notJson = jsonProblem((input ?? null) as Json, "input");
  const text = notJson === null ? canonicalJson(input ?? null) : "";
  const bytes = Buffer.byteLength(text);
  const problems: Problem[] =
    notJson !== null
      ? [{ path: "input", message: notJson }]
      : bytes > p.maxPayloadBytes
        ? [{ path: "input", message: `is ${bytes} bytes, over the limit of ${p.maxPayloadBytes} (maxPayloadBytes)` }]
        : workflow.checkInput(JSON.parse(text));
  if (problems.length > 0) {
    return refusal(
      "input_invalid",
      `the input triggers[${index}] made of event "${e.name}" does not match the input_schema of ${workflow.id}: ${problems.map((x) => `${x.path}: ${x.message}`).join("; ")}; publish an event whose payload fits, or change the trigger's input`,
      problems,
    );
  }
  const triggered_by: RunTrigger = {
    event: e.name,
    key: e.key as string,
    event_id: e.event_id,
    idempotency_key: e.idempotency_key,
  };
  const run = runRow(workflow, text, {
    run_id,
    traceparent,
    idempotency_key: triggerKey(workflow.id, triggered_by),
    parent: null,
    // A triggered run has the default priority (an event carries none).
    priority: DEFAULT_PRIORITY,
    budget: budgetOf(workflow.definition.budget),
    // The publisher's scope, as startRun records its caller's (DESIGN §13.1).
    scope: scope === null ? null : [...scope],
    tags: {},
    now,
    triggered_by,
  });
  return { run, trigger: index };
}

/** The run's `skein.run.start` span, under the publisher's active context, ended at once; its context is the run's traceparent. */
function startSpan(workflow: LoadedWorkflow, runId: string, eventName: string): string {
  const span = tracer().startSpan("skein.run.start", {
    attributes: {
      "skein.workflow_id": workflow.id,
      "skein.workflow_version": workflow.version,
      "skein.run_id": runId,
      "skein.event": eventName,
    },
  });
  span.end();
  return traceparentOf(span);
}
