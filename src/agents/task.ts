/**
 * The agent contract of DESIGN §5: what an in-process handler receives and may return.
 */
import type { Json, TriggerRef, Usage } from "../core/types.js";

export interface DepResult {
  status: string;
  output: Json | null;
  error: Json | null;
}

/**
 * What an in-process handler receives. `P` is the payload's type and `I` the run input's: both
 * are the handler's claim about the workflow (use `defineAgent` with schemas to have them checked
 * at run time); they default to `Json`.
 */
export interface Task<P = Json, I = Json> {
  run_id: string;
  node_id: string;
  agent_type: string;
  visit: number;
  attempt: number;
  /** Stable across the attempts of this visit: the idempotency key for the agent's side effects. */
  execution_id: string;
  /** Templates resolved once per visit: every attempt sees the same payload. */
  payload: P;
  /** The run's input. */
  input: I;
  /** `{ <node_id>: { status, output, error } }` of the node's dependencies. */
  deps: Record<string, DepResult>;
  /** The edge that activated this visit, if any (a failure handler reads the error here). */
  trigger: (TriggerRef & DepResult) | null;
  /**
   * Set when this task undoes a visit (a compensation, DESIGN §6): the visit's execution_id,
   * output and error; `node_id` and `visit` name that visit, and `execution_id` is
   * `<its execution_id>:compensate`. Payload templates see the same as `self`.
   */
  compensates?: { execution_id: string; output: Json | null; error: Json | null };
  /**
   * Set when this task runs an item of a `map` (`each: { agent_type }`, DESIGN §11.1): its index in
   * the list. `input` is the item, `payload` is `each.payload` resolved for it, and `execution_id`
   * is `<the map visit's execution_id>~<index>`, stable across the item's attempts.
   */
  item?: { index: number };
  trace_id: string;
  traceparent: string;
  /** Aborted at the attempt's deadline, on lease loss, or when the run is cancelled. */
  signal: AbortSignal;
  /** Renews the lease of a long attempt (never past its timeout). Resolves false when the attempt is no longer held. */
  heartbeat(): Promise<boolean>;
  /**
   * Partial output while the attempt works (DESIGN §11.6, §15): kept as the run's
   * `node.progress` events and streamed, at most one every `progressIntervalMs` (default 50) per
   * attempt: text deltas (`{ delta }`) sent within it are joined, other values replace each other;
   * dropped once the attempt no longer holds its visit.
   * `data` must be JSON; non-JSON is dropped with a logged warning, never throws.
   * @example task.progress({ delta: newText }); task.progress(`page ${i} of ${n}`);
   */
  progress(data: unknown): void;
  /**
   * Adds usage to the run (DESIGN §12): `{ tokens_in, tokens_out, cost }`, each optional, non-negative
   * and finite. The run sums it over calls, attempts and child runs, and its `budget` is checked
   * against the sum before each attempt starts. Never throws: an invalid value is logged and
   * ignored; a report from an attempt that no longer holds its visit is dropped.
   * @example task.reportUsage({ tokens_in: 812, tokens_out: 96, cost: 0.0021 })
   */
  reportUsage(usage: Usage): void;
  /**
   * A durable step (DESIGN §14.1): runs `fn` once per visit and records its JSON result (committed)
   * before returning it. A later attempt of the same visit (a retry, a recovery after a crash)
   * that calls `step` with a recorded name gets the recorded result without calling `fn`. A step
   * that throws records nothing. Names are unique within a visit (`"search:" + i` in a loop); use
   * `idempotency_key` (`<execution_id>:<name>`) for the side effects `fn` makes: a crash after
   * `fn` acted and before the record committed calls it once more, with the same key.
   * @throws ConflictError when the attempt no longer holds its visit (its signal is aborted)
   * @throws NonRetryableError for a name used twice in one attempt, or a result that is not JSON or too large
   * @example const plan = await task.step("plan", () => llm.plan(task.payload.goal));
   */
  step<T = Json>(name: string, fn: (step: StepContext) => T | Promise<T>): Promise<T>;
  /**
   * Chooses the branch: `return task.route(["publish"], output)`. `next` must be among the node's
   * declared success targets, or `"$end"` to finish the run.
   */
  route(next: string | string[], output?: unknown): Routed;
}

/** What a step's function receives. */
export interface StepContext {
  /** `<execution_id>:<name>`: the same on every attempt of the visit; give it to the side effect. */
  idempotency_key: string;
  /** The attempt's signal: aborted at its deadline, on lease loss, or when the run is cancelled. */
  signal: AbortSignal;
}

const ROUTE = Symbol("skein.route");

/** The value of `task.route(...)`: recognised by the engine, never mistaken for output. */
export interface Routed {
  readonly [ROUTE]: true;
  readonly next: string[];
  readonly output: unknown;
}

export function route(next: string | string[], output: unknown = null): Routed {
  return { [ROUTE]: true, next: typeof next === "string" ? [next] : [...next], output };
}

export function isRouted(value: unknown): value is Routed {
  return typeof value === "object" && value !== null && (value as Partial<Routed>)[ROUTE] === true;
}

/**
 * An in-process agent: returns the node's output (any JSON value), or throws to fail the attempt
 * (`NonRetryableError` fails the node without retries).
 * @example const agents = { summarize: async (task) => ({ summary: await llm(task.payload.text) }) };
 */
export type AgentHandler = (task: Task) => unknown;

/** A `decide` hook: chooses the next nodes from a succeeded node's output. */
export type DecideHook = (
  output: Json,
  ctx: { input: Json; run_id: string; node_id: string; nodes: Record<string, unknown> },
) => string | string[] | Promise<string | string[]>;
