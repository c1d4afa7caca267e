/**
 * The idempotency keys the engine makes (DESIGN §13.1): a child run's, a map item's, a
 * schedule slot's and an event trigger's, all under the reserved prefix `skein:`, which clients may not use (startRun
 * refuses it), so nobody can take a key before the engine does. Before binding a visit or a
 * slot to a run found under one of these keys, the engine checks it is the run it would have
 * started (`ownRunProblem`); migration 014 moved the keys older versions made under the prefix.
 */
import {
  ENGINE_KEY_PREFIX,
  type Run,
  type RunParent,
  type RunTrigger,
  TRIGGER_KEY_PREFIX,
  type Visit,
} from "../../core/types.js";
import { ValidationError } from "../../errors.js";
import { sha256 } from "../json.js";

export { ENGINE_KEY_PREFIX };

/** A visit's reason when a run it would start is taken: another run holds its engine key (not retried). */
export const KEY_TAKEN = "idempotency_key_taken";

/** The key of the child run that is attempt `v.attempt` of a `workflow` visit. */
export function childKey(v: Pick<Visit, "execution_id" | "attempt">): string {
  return `${ENGINE_KEY_PREFIX}${v.execution_id}:${v.attempt}`;
}

/** The key of item `index`'s run of attempt `v.attempt` of a `map` visit. */
export function itemKey(v: Pick<Visit, "execution_id" | "attempt">, index: number): string {
  return `${ENGINE_KEY_PREFIX}${v.execution_id}:${v.attempt}:${index}`;
}

/** The key of the child run that is tool call `<turn>:<index>` of an `agent` visit (any of its attempts). */
export function toolCallKey(v: Pick<Visit, "execution_id">, call: string): string {
  return `${ENGINE_KEY_PREFIX}${v.execution_id}:tool:${call}`;
}

/**
 * The key of the run a trigger of `workflowId` starts for a published event (DESIGN §17): one per
 * workflow and (name, key, idempotency key), the event's identity (the inbox's unique index), so
 * the same event published again starts nothing, even after the inbox pruned it. The event's
 * fields are hashed: three 200-character names would make a key too long to index well.
 */
export function triggerKey(workflowId: string, event: Omit<RunTrigger, "event_id">): string {
  return `${TRIGGER_KEY_PREFIX}${workflowId}:${sha256(`${event.event}\n${event.key}\n${event.idempotency_key}`)}`;
}

/**
 * Why a run found under a trigger's key is not the one the trigger would have started (a
 * top-level run of `workflowId` triggered by that event), or null when it is.
 */
export function ownTriggerRunProblem(
  found: Run,
  key: string,
  expected: { workflow_id: string; event: Omit<RunTrigger, "event_id"> },
): string | null {
  const t = found.triggered_by;
  const same =
    found.parent === null &&
    found.workflow_id === expected.workflow_id &&
    t !== null &&
    t.event === expected.event.event &&
    t.key === expected.event.key &&
    t.idempotency_key === expected.event.idempotency_key;
  if (same) return null;
  return `the engine's idempotency key ${key} is held by run ${found.run_id} (of ${found.workflow_id}), which is not the run a trigger of ${expected.workflow_id} started for event "${expected.event.event}" (key "${expected.event.key}"): it was not started by this engine (written to the database directly); cancel or prune run ${found.run_id}, then publish the event again`;
}

/**
 * Why a run found under an engine key is not the one the engine would have started (its parent
 * attempt and item, or its schedule), or null when it is.
 */
export function ownRunProblem(
  found: Run,
  key: string,
  expected: { parent: Omit<RunParent, "depth">; schedule_id?: undefined } | { schedule_id: string; parent?: undefined },
): string | null {
  const p = found.parent;
  const same = expected.parent
    ? p !== null &&
      p.run_id === expected.parent.run_id &&
      p.node_id === expected.parent.node_id &&
      p.visit === expected.parent.visit &&
      // A tool call's run is its call's, whichever attempt of the visit started it.
      (expected.parent.call !== undefined ? p.call === expected.parent.call : p.attempt === expected.parent.attempt) &&
      p.item === expected.parent.item
    : p === null && found.schedule_id === expected.schedule_id;
  if (same) return null;
  const wanted = expected.parent
    ? `${expected.parent.call === undefined ? `attempt ${expected.parent.attempt}` : `tool call ${expected.parent.call}`} of ${expected.parent.node_id} (visit ${expected.parent.visit}) of run ${expected.parent.run_id}${expected.parent.item === undefined ? "" : `, item ${expected.parent.item}`}`
    : `a slot of schedule ${expected.schedule_id}`;
  return `the engine's idempotency key ${key} is held by run ${found.run_id} (of ${found.workflow_id}), which is not the run of ${wanted}: it was not started by this engine (written to the database directly, or before the key was reserved); cancel or prune run ${found.run_id}, then retry this run`;
}

/**
 * @throws ValidationError for a client's idempotency key the engine reserves (`skein:`); one with
 * a NUL character is refused before, with every id a caller sends (identifiers.ts)
 */
export function checkClientKey(key: string | undefined, path = "idempotency_key"): void {
  if (key === undefined) return;
  if (key.startsWith(ENGINE_KEY_PREFIX)) {
    throw new ValidationError("The idempotency key is reserved", [
      {
        path,
        message: `may not start with "${ENGINE_KEY_PREFIX}": keys with that prefix are the engine's own (child runs, map items, schedule slots, event triggers); choose another key`,
      },
    ]);
  }
}
