/**
 * `defineAgent`: an in-process agent typed in its payload and output, optionally checked at run
 * time by schemas (any Standard Schema: zod, valibot, arktype, ...).
 */
import type { Json } from "../core/types.js";
import { NonRetryableError } from "../errors.js";
import type { StandardSchemaV1 } from "./standard-schema.js";
import { type AgentHandler, isRouted, type Routed, route, type Task } from "./task.js";

/** A handler typed in its payload `P`, output `O` and run input `I`. */
export type TypedAgentHandler<P = Json, O = unknown, I = Json> = (task: Task<P, I>) => O | Routed | Promise<O | Routed>;

/** The schemas of `defineAgent`'s checked form; each one given is applied to every attempt. */
export interface AgentSchemas<
  PS extends StandardSchemaV1 | undefined = undefined,
  OS extends StandardSchemaV1 | undefined = undefined,
  IS extends StandardSchemaV1 | undefined = undefined,
> {
  /** The resolved payload; the handler sees the schema's output (its defaults and transforms applied). */
  payload?: PS;
  /** What the handler returns (or routes with); the node's output is the schema's output. */
  output?: OS;
  /** The run's input. */
  input?: IS;
  /**
   * The secrets this agent may receive (DESIGN §12): its nodes' payloads may read
   * `{{ secrets.NAME }}` for these names; another name fails the attempt, not retried.
   */
  secrets?: readonly string[];
}

/** The secrets each agent made by defineAgent declared. */
const DECLARED = new WeakMap<AgentHandler, readonly string[]>();

/** @internal The secret names an agent declared with `defineAgent({ secrets })` (none for other handlers). */
export function declaredSecrets(handler: AgentHandler): readonly string[] {
  return DECLARED.get(handler) ?? [];
}

/** @internal `wrapper` (a handler that calls `handler`) declares what `handler` declared. */
export function declaringAs(wrapper: AgentHandler, handler: AgentHandler): AgentHandler {
  const declared = DECLARED.get(handler);
  if (declared) DECLARED.set(wrapper, declared);
  return wrapper;
}

/**
 * Types an in-process agent for createEngine's `agents`: `task.payload` is `P`, the return value
 * is checked against `O` (or `task.route(next, output)`). The types are not checked at run time
 * in this form; give schemas (the second form) for that.
 * @example
 * const collector = defineAgent<{ platform: string }, { items: string[] }>(async (task) => {
 *   return { items: [`news from ${task.payload.platform}`] };
 * });
 */
export function defineAgent<P = Json, O = unknown, I = Json>(handler: TypedAgentHandler<P, O, I>): AgentHandler;
/**
 * Types an in-process agent by schemas and checks every attempt against them: a payload or run
 * input the schema refuses fails the attempt with a NonRetryableError naming the path; so does
 * an output it refuses (the attempt fails, not retried).
 * @example
 * const collector = defineAgent(
 *   { payload: z.object({ platform: z.string() }), output: z.object({ items: z.array(z.string()) }) },
 *   async (task) => ({ items: [`news from ${task.payload.platform}`] }),
 * );
 */
export function defineAgent<
  PS extends StandardSchemaV1 | undefined = undefined,
  OS extends StandardSchemaV1 | undefined = undefined,
  IS extends StandardSchemaV1 | undefined = undefined,
>(
  schemas: AgentSchemas<PS, OS, IS>,
  handler: TypedAgentHandler<
    PS extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<PS> : Json,
    OS extends StandardSchemaV1 ? StandardSchemaV1.InferInput<OS> : unknown,
    IS extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<IS> : Json
  >,
): AgentHandler;
export function defineAgent(
  first: TypedAgentHandler | AgentSchemas<StandardSchemaV1, StandardSchemaV1, StandardSchemaV1>,
  second?: TypedAgentHandler,
): AgentHandler {
  // The engine passes a Task<Json, Json>; the handler's P and I are its own claim (or checked below).
  if (typeof first === "function") return first as AgentHandler;
  if (typeof second !== "function") {
    throw new TypeError("defineAgent(schemas, handler): the second argument must be the handler function");
  }
  const schemas = first;
  const handler = second;
  const agent = async (task: Task) => {
    const payload = schemas.payload ? await checked(schemas.payload, task.payload, "payload") : task.payload;
    const input = schemas.input ? await checked(schemas.input, task.input, "input") : task.input;
    const value = await handler(withData(task, payload, input));
    if (!schemas.output) return value;
    if (isRouted(value)) return route(value.next, await checked(schemas.output, value.output, "output"));
    // The engine stores a handler's `undefined` as null: check what it would store.
    return checked(schemas.output, value === undefined ? null : value, "output");
  };
  if (schemas.secrets !== undefined) DECLARED.set(agent, [...schemas.secrets]);
  return agent;
}

/** The task with the checked payload and input; its other fields as they are (`signal` stays lazy). */
function withData(task: Task, payload: unknown, input: unknown): Task {
  const data = (value: unknown) => ({ value, enumerable: true, writable: true, configurable: true });
  return Object.create(Object.getPrototypeOf(task), {
    ...Object.getOwnPropertyDescriptors(task),
    payload: data(payload),
    input: data(input),
  });
}

/** The schema's output for `value`, or a NonRetryableError naming each refused path under `what`. */
async function checked(schema: StandardSchemaV1, value: unknown, what: string): Promise<unknown> {
  const result = await schema["~standard"].validate(value);
  if (!result.issues) return result.value;
  const problems = result.issues.map((issue) => `${pathOf(what, issue.path)}: ${issue.message}`);
  throw new NonRetryableError(`${what} does not match the agent's schema: ${problems.join("; ")}`);
}

function pathOf(base: string, path: StandardSchemaV1.Issue["path"]): string {
  let text = base;
  for (const segment of path ?? []) {
    const key = typeof segment === "object" ? segment.key : segment;
    text += typeof key === "number" ? `[${key}]` : `.${String(key)}`;
  }
  return text;
}
