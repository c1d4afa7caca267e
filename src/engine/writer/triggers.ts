/**
 * Event triggers in the publish's transaction (DESIGN §17): each run engine/triggers.ts made is
 * started unless a run holds its key already (the same event published before: that run is
 * answered instead), in the transaction that delivers the event to the waiting runs and keeps
 * it. So a crash before the commit loses nothing (the publisher hears no answer and publishes
 * again), and one after it doubles nothing: a trigger starts one run per workflow and event.
 */
import { startRunState } from "../../core/scheduler.js";
import type { Run } from "../../core/types.js";
import type { FlushContext } from "./context.js";
import { KEY_TAKEN, ownTriggerRunProblem } from "./engine-keys.js";
import type { Input, PublishEventAnswer, TriggeredRun, TriggerRefusal } from "./inputs.js";

type PublishInput = Extract<Input, { kind: "publish_event" }>;

/** Starts the runs of a new event's triggers (or finds those started before): what the publish answers. */
export async function startTriggered(
  f: FlushContext,
  input: PublishInput,
): Promise<Pick<PublishEventAnswer, "started" | "not_started">> {
  const started: PublishEventAnswer["started"] = [];
  const not_started: TriggerRefusal[] = [...input.refused];
  for (const t of input.triggered) {
    const found = await underKey(f, t);
    if (found && "refusal" in found) not_started.push(found.refusal);
    else if (found) started.push(startedRef(found));
    else {
      const { graph } = await f.o.registry.get(t.run.workflow_id, t.run.workflow_version);
      const rs = startRunState(t.run, graph, f.now);
      // The run's first event says which event started it, and through which trigger.
      const first = rs.changes.events.find((e) => e.type === "run.started");
      if (first) Object.assign(first.data, { triggered_by: t.run.triggered_by, trigger: t.trigger });
      f.addRun(rs, 0);
      started.push(startedRef(t.run));
    }
  }
  for (const r of not_started) {
    f.o.logger.warn(
      { event: input.event.name, key: input.event.key, event_id: input.event.event_id, ...r },
      "skein: a trigger did not start a run for a published event; the event still reached the waiting runs and the other workflows",
    );
  }
  return { started, not_started };
}

/** A duplicate event's answer: the runs its triggers started when it was first published. */
export async function startedBefore(f: FlushContext, input: PublishInput): Promise<PublishEventAnswer["started"]> {
  const started: PublishEventAnswer["started"] = [];
  for (const t of input.triggered) {
    const found = await underKey(f, t);
    if (found && !("refusal" in found)) started.push(startedRef(found));
  }
  return started;
}

/**
 * The run under the trigger's key (this flush's, or the database's), a refusal when it is not
 * one a trigger started for this event (DESIGN §13.1: the engine checks a run before binding
 * to it), or null when there is none.
 */
async function underKey(f: FlushContext, t: TriggeredRun): Promise<Run | { refusal: TriggerRefusal } | null> {
  const key = t.run.idempotency_key as string;
  const found = f.newRuns.find((r) => r.idempotency_key === key) ?? (await f.tx.runByIdempotencyKey(key));
  if (!found) return null;
  const { triggered_by } = t.run;
  const foreign =
    triggered_by && ownTriggerRunProblem(found, key, { workflow_id: t.run.workflow_id, event: triggered_by });
  if (!foreign) return found;
  return {
    refusal: {
      workflow_id: t.run.workflow_id,
      workflow_version: t.run.workflow_version,
      trigger: t.trigger,
      reason: KEY_TAKEN,
      message: foreign,
      problems: [],
    },
  };
}

function startedRef(run: Run): PublishEventAnswer["started"][number] {
  return { workflow_id: run.workflow_id, workflow_version: run.workflow_version, run_id: run.run_id };
}
