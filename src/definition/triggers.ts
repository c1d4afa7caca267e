/**
 * A workflow's `triggers` (DESIGN §17): the events published by key (`publishEvent`) that start a
 * run of it. Pure: the checks registration makes, which trigger an event matches, and the input a
 * trigger makes of an event. Starting the runs is the engine's (engine/triggers.ts).
 *
 * Decisions where DESIGN is silent:
 * - One run per workflow and event: the FIRST trigger whose event (and key, if it names one)
 *   matches makes it. A trigger the ones before it always take first is refused, so the list
 *   never holds one that cannot fire (a keyed trigger goes before a keyless one of its event).
 * - `input` is JSON whose strings may hold templates, as a payload's; they see `event` (name, key,
 *   payload, idempotency_key, event_id) and the new run's `run` ids. It is worked out before the
 *   run starts, so reading `nodes` or `secrets` is refused. Without `input` the event's payload
 *   is the input.
 */
import type { Problem } from "../errors.js";
import { type CompiledPayload, compilePayload } from "./expressions.js";
import type { TriggerDefinition, WorkflowDefinition } from "./schema.js";

/** What a trigger's input templates see of the published event. */
export interface TriggerEvent {
  name: string;
  key: string;
  payload: unknown;
  /** The publisher's idempotency key, else the event's id. */
  idempotency_key: string;
  event_id: string;
}

/** A trigger with its input's templates parsed. */
export interface CompiledTrigger {
  /** Its place in `triggers` (`triggers[index]`). */
  readonly index: number;
  readonly event: string;
  /** The only key it fires for; null: any key. */
  readonly key: string | null;
  /** Its input's templates; null when its input holds none (`literal`) or it has no input. */
  readonly template: CompiledPayload | null;
  /** Its input when it holds no template; undefined: the event's payload is the input. */
  readonly literal: unknown;
}

const NO_SECRETS =
  "secrets may not be read in a trigger's input: it becomes the run's input, which anyone who may read the run reads; read the secret in the payload of the node that needs it";

/**
 * The triggers of a definition that passed validation, compiled.
 * @throws nothing: their templates parsed when they were checked (`triggerProblems`)
 */
export function compileTriggers(def: WorkflowDefinition): CompiledTrigger[] {
  return (def.triggers ?? []).map((t, index) => {
    const compiled = t.input === undefined ? null : compileInput(t, index).template;
    return {
      index,
      event: t.event,
      key: t.key ?? null,
      template: compiled,
      literal: compiled === null ? t.input : undefined,
    };
  });
}

/** The distinct event names a definition's triggers start runs on (what the store indexes). */
export function triggerEvents(def: WorkflowDefinition): string[] {
  return [...new Set((def.triggers ?? []).map((t) => t.event))];
}

/** The trigger that starts a run for an event `name` published with `key`: the first that matches, or null. */
export function matchingTrigger(
  triggers: readonly CompiledTrigger[],
  name: string,
  key: string,
): CompiledTrigger | null {
  return triggers.find((t) => t.event === name && (t.key === null || t.key === key)) ?? null;
}

/**
 * The run input `trigger` makes of `event`: its input with templates resolved, its literal input,
 * or the event's payload. `run`: the ids of the run it starts.
 * @throws ExpressionError when a template fails
 */
export async function triggerInput(
  trigger: CompiledTrigger,
  event: TriggerEvent,
  run: { run_id: string; trace_id: string },
): Promise<unknown> {
  if (trigger.template) return trigger.template.resolve({ input: null, nodes: {}, run, event });
  return trigger.literal === undefined ? event.payload : trigger.literal;
}

/** What is wrong with a definition's triggers, each with its path (`triggers[1].input.total`). */
export function triggerProblems(def: WorkflowDefinition): Problem[] {
  const problems: Problem[] = [];
  const triggers = def.triggers ?? [];
  triggers.forEach((t, i) => {
    const shadow = triggers
      .slice(0, i)
      .findIndex((u) => u.event === t.event && (u.key === undefined || u.key === t.key));
    if (shadow >= 0) {
      const earlier = triggers[shadow] as TriggerDefinition;
      problems.push({
        path: `triggers[${i}]`,
        message:
          earlier.key === undefined
            ? `never fires: triggers[${shadow}] takes every "${t.event}" event first (the first trigger that matches starts the run); put the triggers with a key before the one without`
            : `duplicate trigger: triggers[${shadow}] already takes "${t.event}" events with key "${t.key}"; remove one`,
      });
    }
    if (t.input === undefined) return;
    const { template, problems: parsed } = compileInput(t, i);
    problems.push(...parsed);
    for (const read of template?.reads ?? []) {
      problems.push({
        path: read.path,
        message: `reads nodes.${read.node_id}, but a trigger's input is worked out from the event before the run starts: it may read event.name, event.key, event.payload, event.idempotency_key and event.event_id`,
      });
    }
  });
  return problems;
}

function compileInput(t: TriggerDefinition, index: number): ReturnType<typeof compilePayload> {
  return compilePayload(t.input, `triggers[${index}].input`, { secretsRefused: NO_SECRETS });
}
