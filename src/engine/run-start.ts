/**
 * A new run as `startRun` queues it: the input checked (JSON, size, the workflow's
 * input_schema) and the run row built with its trace context. Nothing is written here.
 */
import { budgetOf, budgetProblem, NO_USAGE } from "../core/budget.js";
import { scopeAllows } from "../core/scope.js";
import type { Budget, Json, OnActive, Run, RunFork, RunTags, RunTrigger, StartFlow } from "../core/types.js";
import { DEFAULT_PRIORITY } from "../core/types.js";
import { ValidationError } from "../errors.js";
import { uuidv7 } from "../ids.js";
import type { StartRunOptions } from "./engine-options.js";
import { canonicalJson, jsonProblem, sha256 } from "./json.js";
import type { LoadedWorkflow } from "./registry.js";
import { scopeProblem } from "./scope.js";
import { checkClientKey } from "./writer/engine-keys.js";

/**
 * `traceparent`: the run's trace context (its start span's: tracing.ts).
 * @throws ValidationError for an input that is not JSON, too large, or not of the input_schema.
 */
export function newRun(
  workflow: LoadedWorkflow,
  options: StartRunOptions,
  now: number,
  maxPayloadBytes: number,
  traceparent: string,
): Run {
  const input = (options.input ?? {}) as Json;
  checkClientKey(options.idempotency_key);
  const problem = jsonProblem(input, "input");
  if (problem) throw new ValidationError("Run input is not JSON", [{ path: "input", message: problem }]);
  const text = canonicalJson(input);
  if (Buffer.byteLength(text) > maxPayloadBytes) {
    throw new ValidationError(
      `Run input is ${Buffer.byteLength(text)} bytes, over the limit of ${maxPayloadBytes} (maxPayloadBytes); pass a reference to large data instead`,
    );
  }
  const problems = workflow.checkInput(input);
  if (problems.length > 0)
    throw new ValidationError(`Run input does not match the input_schema of ${workflow.id}`, problems);
  if (options.scope !== undefined) {
    const bad = scopeProblem(options.scope);
    if (bad) throw new ValidationError("Run scope is not valid", [{ path: "scope", message: bad }]);
    if (!scopeAllows(options.scope, workflow.id)) {
      throw new ValidationError("Run scope does not cover its own workflow", [
        { path: "scope", message: `does not cover "${workflow.id}": a run may only be started within its scope` },
      ]);
    }
  }
  const tags = tagsOf(options.tags);
  const priority = priorityOf(options.priority);
  if (options.budget !== undefined) {
    const bad = budgetProblem(options.budget);
    if (bad) throw new ValidationError("Run budget is not valid", [{ path: "budget", message: bad }]);
  }
  const key = keyOf(options);
  return runRow(workflow, text, {
    run_id: uuidv7(now),
    key,
    traceparent,
    idempotency_key: options.idempotency_key ?? null,
    parent: null,
    // startRun's budget replaces the workflow's (DESIGN §12).
    budget: budgetOf(options.budget ?? workflow.definition.budget),
    scope: options.scope ? [...options.scope] : null,
    tags,
    priority,
    now,
  });
}

const ON_ACTIVE: readonly OnActive[] = ["queue", "reject", "cancel_active", "skip"];
/** The longest key, in characters. */
export const MAX_KEY_LENGTH = 256;
/** The longest debounce window: a day (a longer wait is a schedule's job). */
export const MAX_DEBOUNCE_SECONDS = 86_400;

/** startRun's key, checked; null without one. */
function keyOf(options: StartRunOptions): string | null {
  const { key } = options;
  if (key === undefined) return null;
  if (typeof key !== "string" || key.length === 0 || key.length > MAX_KEY_LENGTH) {
    throw new ValidationError("Run key is not valid", [
      { path: "key", message: `must be a string of 1 to ${MAX_KEY_LENGTH} characters` },
    ]);
  }
  return key;
}

/**
 * startRun's `on_active` and `debounce_seconds`, checked; null for a start without a key.
 * @throws ValidationError naming the option that is not valid, or given without a key
 */
export function flowOf(options: StartRunOptions): StartFlow | null {
  const { key, on_active, debounce_seconds } = options;
  const problems: { path: string; message: string }[] = [];
  if (key === undefined) {
    if (on_active !== undefined) problems.push({ path: "on_active", message: "needs a key: give key as well" });
    if (debounce_seconds !== undefined) {
      problems.push({ path: "debounce_seconds", message: "needs a key: the runs of one key are debounced together" });
    }
  }
  if (on_active !== undefined && !ON_ACTIVE.includes(on_active)) {
    problems.push({ path: "on_active", message: `must be one of ${ON_ACTIVE.join(", ")}` });
  }
  if (debounce_seconds !== undefined) {
    if (
      typeof debounce_seconds !== "number" ||
      !Number.isFinite(debounce_seconds) ||
      debounce_seconds <= 0 ||
      debounce_seconds > MAX_DEBOUNCE_SECONDS
    ) {
      problems.push({
        path: "debounce_seconds",
        message: `must be a number of seconds above 0 and at most ${MAX_DEBOUNCE_SECONDS}`,
      });
    } else if (on_active === "reject" || on_active === "skip") {
      problems.push({
        path: "on_active",
        message: `a debounced start answers before its window passes, so it cannot ${on_active}: use queue or cancel_active`,
      });
    }
  }
  if (problems.length > 0) throw new ValidationError("Run key options are not valid", problems);
  if (key === undefined) return null;
  return {
    on_active: on_active ?? "queue",
    debounce_ms: debounce_seconds === undefined ? null : Math.round(debounce_seconds * 1000),
  };
}

/** The most urgent priority (claimed first) and the least (claimed last). */
export const PRIORITIES = { first: 0, last: 9 } as const;

/**
 * startRun's priority, checked (DEFAULT_PRIORITY when none): a whole number from 0, claimed
 * first, to 9, claimed last.
 * @throws ValidationError at `priority` for anything else
 */
export function priorityOf(priority: unknown): number {
  if (priority === undefined) return DEFAULT_PRIORITY;
  if (
    typeof priority === "number" &&
    Number.isInteger(priority) &&
    priority >= PRIORITIES.first &&
    priority <= PRIORITIES.last
  ) {
    return priority;
  }
  const got = typeof priority === "number" ? String(priority) : (JSON.stringify(priority) ?? typeof priority);
  throw new ValidationError("Run priority is not valid", [
    {
      path: "priority",
      message: `must be a whole number from ${PRIORITIES.first} (claimed first) to ${PRIORITIES.last} (claimed last), default ${DEFAULT_PRIORITY}; got ${got}`,
    },
  ]);
}

/** The most tags a run carries. */
export const MAX_TAGS = 16;
/** A tag's name: what a filter, a URL's `tag=name:value` and a CLI's `--tag name=value` can carry. */
export const TAG_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;
/** The longest tag value, in characters. */
export const MAX_TAG_VALUE = 256;

/**
 * startRun's tags, checked and copied ({} when none).
 * @throws ValidationError naming each tag that is not valid
 */
export function tagsOf(tags: unknown): RunTags {
  if (tags === undefined) return {};
  const problems = tagsProblems(tags, "tags");
  if (problems.length > 0) throw new ValidationError("Run tags are not valid", problems);
  return { ...(tags as RunTags) };
}

/** What is wrong with `tags` (as startRun's tags or a listRuns filter), each with its path. */
export function tagsProblems(tags: unknown, path: string): { path: string; message: string }[] {
  if (tags === null || typeof tags !== "object" || Array.isArray(tags)) {
    return [{ path, message: 'must be an object of string values, e.g. { "customer": "acme" }' }];
  }
  const entries = Object.entries(tags);
  const problems: { path: string; message: string }[] = [];
  if (entries.length > MAX_TAGS) problems.push({ path, message: `has ${entries.length} tags, more than ${MAX_TAGS}` });
  for (const [name, value] of entries) {
    if (!TAG_NAME.test(name)) {
      problems.push({
        path: `${path}.${name}`,
        message: "a tag's name is 1 to 64 characters of A-Z, a-z, 0-9, _ . : and -",
      });
    } else if (typeof value !== "string" || value.length > MAX_TAG_VALUE) {
      problems.push({ path: `${path}.${name}`, message: `must be a string of at most ${MAX_TAG_VALUE} characters` });
    }
  }
  return problems;
}

/**
 * The row of a new run of `workflow` with an input already checked, as its canonical JSON text: a client's start
 * (`newRun`) or a `workflow` node's child run. Its times are replaced by the transaction's when
 * the run is written (the database's on PostgreSQL): this process's clock never sets a due time.
 */
export function runRow(
  workflow: LoadedWorkflow,
  text: string,
  o: Pick<Run, "run_id" | "traceparent" | "idempotency_key" | "parent"> & {
    /** Its key (startRun's); child runs and items have none. */
    key?: string | null;
    now: number;
    schedule_id?: string | null;
    /** The run's own budget (a map's item runs have none: the map's run holds the item workflow's). */
    budget: Budget | null;
    /** What it may start (DESIGN §13.1): its root starter's scope, which a child run inherits; null: everything. */
    scope: string[] | null;
    /** Its tags: startRun's, or those of the run that started it. */
    tags: RunTags;
    /** Its priority (DESIGN §17): startRun's, or that of the run that started it. */
    priority: number;
    /** The run and node it was forked from (forkRun); null otherwise. */
    forked_from?: RunFork | null;
    /** The published event whose trigger started it (engine/triggers.ts); null otherwise. */
    triggered_by?: RunTrigger | null;
  },
): Run {
  return {
    run_id: o.run_id,
    workflow_id: workflow.id,
    workflow_version: workflow.version,
    status: "RUNNING",
    input: JSON.parse(text) as Json,
    output: null,
    error: null,
    end_cause: null,
    trace_id: o.traceparent.slice(3, 35),
    traceparent: o.traceparent,
    idempotency_key: o.idempotency_key,
    input_hash: sha256(`${workflow.id}\n${text}`),
    needs_attention: false,
    created_at: o.now,
    updated_at: o.now,
    deadline_at: o.now + workflow.definition.timeout * 1000,
    ended_at: null,
    parent: o.parent,
    schedule_id: o.schedule_id ?? null,
    usage: { ...NO_USAGE },
    budget: o.budget,
    scope: o.scope,
    reserved: null,
    tags: o.tags,
    paused: null,
    forked_from: o.forked_from ?? null,
    key: o.key ?? null,
    queued: null,
    triggered_by: o.triggered_by ?? null,
    priority: o.priority,
  };
}
