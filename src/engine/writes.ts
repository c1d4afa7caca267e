/**
 * The Engine's writing methods: each checks its call, then queues an input for the dispatcher
 * (the only writer) and answers once the flush that applies it commits.
 */
import type { Json, Run, RunEvent, Visit } from "../core/types.js";
import { NotFoundError, ValidationError } from "../errors.js";
import type { OperatorOptions, ReviewOptions, StartRunOptions } from "./engine-options.js";
import type { EngineParts } from "./engine-parts.js";
import { newEvent, type PublishEventOptions, type SendEventOptions } from "./events.js";
import { refuseNul } from "./identifiers.js";
import { ITEM_SEPARATOR } from "./registry.js";
import { reviewInput } from "./reviews.js";
import { flowOf, newRun } from "./run-start.js";
import { scopeProblem } from "./scope.js";
import { inRunStartSpan } from "./telemetry/tracing.js";
import { prepareTriggers } from "./triggers.js";
import type { PublishEventAnswer, SendEventAnswer } from "./writer/inputs.js";

/** The events that end a run (a redrive starts it again, with run.retried). */
const RUN_END_EVENTS: ReadonlySet<string> = new Set(["run.succeeded", "run.failed", "run.cancelled"]);

/** Engine.startRun. */
export async function startRun(p: EngineParts, workflowId: string, options: StartRunOptions): Promise<Run> {
  const { idempotency_key, traceparent, scope } = options;
  refuseNul({ workflow_id: workflowId, idempotency_key, traceparent, scope });
  if (workflowId.includes(ITEM_SEPARATOR)) {
    throw new NotFoundError(
      `workflow "${workflowId}" is the item workflow of a map node: its runs are started by the map; start "${workflowId.split(ITEM_SEPARATOR)[0]}" instead`,
    );
  }
  const workflow = await p.registry.get(workflowId, options.version);
  const { onEvent, ...start } = options;
  // Set inside the span's callback (a holder, as TypeScript does not track closure assignments).
  const listening: { stop?: () => void; runId?: string } = {};
  let answer: Run;
  try {
    answer = await inRunStartSpan(workflow.id, start.traceparent, (traceparent) => {
      const run = newRun(workflow, start, p.clock.now(), p.maxPayloadBytes, traceparent);
      const flow = flowOf(start);
      // Listening before the run exists: none of its events can be published unheard.
      if (onEvent) Object.assign(listening, { stop: followRun(p, run.run_id, onEvent), runId: run.run_id });
      return new Promise<Run>((resolve, reject) =>
        p.dispatcher.push({ kind: "start", run, flow, done: { resolve, reject } }),
      );
    });
  } catch (e) {
    listening.stop?.();
    throw e;
  }
  if (onEvent && answer.run_id !== listening.runId) {
    // An idempotency key returned an existing run: its own history, from its first event.
    listening.stop?.();
    followRun(p, answer.run_id, onEvent);
  }
  return answer;
}

/**
 * startRun's onEvent: the run's events from its first, until it ends. An end in the history
 * may have been redriven since (run.retried), so only a live end, or the history's last
 * event being an end, stops it.
 */
function followRun(p: EngineParts, runId: string, onEvent: (event: RunEvent) => void): () => void {
  let live = false;
  let ended = false;
  const stop = p.subscribers.replay(
    (e) => {
      if (e.type === "node.progress") return; // onEvent hears the stored history only
      if (RUN_END_EVENTS.has(e.type)) ended = true;
      else if (e.type === "run.retried") ended = false;
      onEvent(e);
      if (live && ended) stop();
    },
    runId,
    {
      from: 0,
      readEvents: p.readEvents,
      onLive: () => {
        live = true;
        if (ended) stop();
      },
    },
  );
  return stop;
}

/** Engine.review. */
export async function review(p: EngineParts, runId: string, nodeId: string, options: ReviewOptions): Promise<Visit> {
  refuseNul({
    run_id: runId,
    node_id: nodeId,
    by: options.by,
    admin: options.admin,
    execution_id: options.execution_id,
  });
  const input = await reviewInput(p.store, p.attempts, runId, nodeId, options);
  return new Promise<Visit>((resolve, reject) => p.dispatcher.push({ ...input, done: { resolve, reject } }));
}

/** Engine.sendEvent. */
export async function sendEvent(
  p: EngineParts,
  runId: string,
  name: string,
  payload: Json,
  options: SendEventOptions,
): Promise<SendEventAnswer> {
  refuseNul({ run_id: runId, name, idempotency_key: options.idempotency_key });
  const event = newEvent(
    { run_id: runId, name, payload, idempotency_key: options.idempotency_key },
    { maxPayloadBytes: p.maxPayloadBytes, now: p.clock.now() },
  );
  return new Promise<SendEventAnswer>((resolve, reject) =>
    p.dispatcher.push({ kind: "send_event", run_id: runId, event, done: { resolve, reject } }),
  );
}

/** Engine.publishEvent. */
export async function publishEvent(
  p: EngineParts,
  name: string,
  key: string,
  payload: Json,
  options: PublishEventOptions,
): Promise<PublishEventAnswer> {
  refuseNul({ name, key, idempotency_key: options.idempotency_key, scope: options.scope });
  const bad = options.scope === undefined ? null : scopeProblem(options.scope);
  if (bad) throw new ValidationError("The event's scope is not valid", [{ path: "scope", message: bad }]);
  const event = newEvent(
    { run_id: null, name, key, payload, idempotency_key: options.idempotency_key },
    { maxPayloadBytes: p.maxPayloadBytes, now: p.clock.now() },
  );
  // The waiting runs are found first, so that the flush locks them as it begins (in order).
  const run_ids = await p.store.runsWaitingOnKey(name, key, 10_000);
  const scope = options.scope ? [...options.scope] : null;
  // The runs the workflows' triggers start, their inputs made here (JSONata is async), started in the flush.
  const { runs: triggered, refused } = await prepareTriggers(p, event, scope);
  return new Promise<PublishEventAnswer>((resolve, reject) =>
    p.dispatcher.push({
      kind: "publish_event",
      run_ids,
      event,
      scope,
      triggered,
      refused,
      done: { resolve, reject },
    }),
  );
}

/** Engine.cancelRun. */
export function cancelRun(p: EngineParts, runId: string, options: { reason?: string; compensate?: boolean }) {
  refuseNul({ run_id: runId });
  return new Promise<Run>((resolve, reject) =>
    p.dispatcher.push({
      kind: "cancel",
      run_id: runId,
      ...(options.reason !== undefined ? { reason: options.reason } : {}),
      compensate: options.compensate === true,
      done: { resolve, reject },
    }),
  );
}

/** Engine.retryRun. */
export function retryRun(
  p: EngineParts,
  runId: string,
  options: { from?: string; force?: boolean; fresh_steps?: boolean },
) {
  refuseNul({ run_id: runId, from: options.from });
  return new Promise<Run>((resolve, reject) =>
    p.dispatcher.push({
      kind: "retry",
      run_id: runId,
      from: options.from ?? null,
      force: options.force === true,
      fresh_steps: options.fresh_steps === true,
      done: { resolve, reject },
    }),
  );
}

/** Engine.pauseRun and Engine.resumeRun. */
export function operate(p: EngineParts, kind: "pause" | "resume", runId: string, options: OperatorOptions) {
  refuseNul({ run_id: runId, by: options.by, reason: options.reason });
  return new Promise<Run>((resolve, reject) =>
    p.dispatcher.push({ kind, run_id: runId, ...operator(options), done: { resolve, reject } }),
  );
}

/** Engine.failVisit. */
export function failNode(p: EngineParts, runId: string, nodeId: string, options: OperatorOptions) {
  refuseNul({ run_id: runId, node_id: nodeId, by: options.by, reason: options.reason });
  return new Promise<Run>((resolve, reject) =>
    p.dispatcher.push({
      kind: "fail_node",
      run_id: runId,
      node_id: nodeId,
      ...operator(options),
      done: { resolve, reject },
    }),
  );
}

function operator(options: OperatorOptions): { by: string | null; reason: string | null } {
  return { by: options.by ?? null, reason: options.reason ?? null };
}
