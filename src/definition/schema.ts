/**
 * The workflow format (DESIGN §2) as one zod schema. The same schema validates definitions in
 * code and generates the published JSON Schema (`schema/workflow.schema.json`), so the two
 * cannot drift apart.
 *
 * Node-level retry, timeout and max_visits fields have no default here on purpose: a missing
 * value means "take it from `defaults`, else the built-in default", which only the graph
 * (`compileGraph`) can resolve. `BUILTIN_DEFAULTS` holds the built-in values.
 */
import { z } from "zod";

export const NODE_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const AGENT_TYPE_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;
export const WORKFLOW_ID_PATTERN = /^[a-z0-9_-]{1,64}$/;

/** Values used when neither the node nor the workflow's `defaults` set a field. */
export const BUILTIN_DEFAULTS = {
  retry_count: 3,
  retry_interval: 30,
  retry_backoff: "fixed",
  retry_max_interval: 3600,
  retry_jitter: "none",
  on_exhausted: "fail",
  timeout: 300,
  heartbeat_timeout: null,
  max_visits: 10,
  workflow_timeout: 86400,
} as const;

/**
 * Names that are JavaScript's object internals, never data: refused as node ids (a node named
 * `__proto__` would lose its output in every object keyed by node id) and as template path steps.
 */
export const RESERVED_NAMES: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"]);
const NOT_RESERVED = /^(?!(?:__proto__|constructor|prototype)$)/;

const nodeId = z
  .string()
  .regex(NODE_ID_PATTERN, { error: "must be 1 to 64 letters, digits, '_' or '-'" })
  .regex(NOT_RESERVED, { error: "__proto__, constructor and prototype are reserved; choose another id" })
  .describe("Unique id of the node in the workflow: [A-Za-z0-9_-]{1,64}, not __proto__, constructor or prototype.");

/**
 * The agent types the engine runs itself (definition/kinds; a test keeps the two lists equal). Listed
 * as the schema's `examples`, which editors offer as completions.
 */
export const BUILT_IN_AGENT_TYPES = [
  "agent",
  "aggregator",
  "http",
  "human_review",
  "llm",
  "map",
  "sleep",
  "wait_event",
  "workflow",
] as const;

const agentType = z
  .string()
  .regex(AGENT_TYPE_PATTERN, {
    error: "must be 1 to 128 letters, digits, '_', '.', ':' or '-'",
  })
  .describe(`Which agent runs the node: [A-Za-z0-9_.:-]{1,128}. Built-ins: ${BUILT_IN_AGENT_TYPES.join(", ")}.`)
  .meta({ examples: [...BUILT_IN_AGENT_TYPES] });

// References are plain strings: a malformed or missing id is reported as an unknown node by
// the graph checks, with one message instead of a format error and a reference error.
const nodeRef = z.string().describe("A node_id of this workflow.");
const nodeRefs = z.union([nodeRef, z.array(nodeRef)], {
  error: "expected a node id or a list of node ids",
});

const payload = z
  .record(z.string(), z.unknown())
  .describe(
    'Parameters for the agent. Strings may hold JSONata templates: "{{ expr }}" is replaced by the value of expr (any JSON type); "text {{ expr }} text" interpolates. Expressions see input, nodes.<id>.output/.status/.error and run.',
  );

const seconds = (sentence: string) => z.number().gt(0).describe(`${sentence} In seconds (> 0, fractions allowed).`);

const retryCount = z.number().int().min(0).max(100).describe("Retries after the first attempt (0..100). Default 3.");
const retryInterval = z.number().min(0).describe("Seconds before a retry (>= 0). Default 30.");
const retryBackoff = z
  .enum(["fixed", "exponential"])
  .describe("fixed, or exponential: interval x 2^(failures-1). Default fixed.");
const retryMaxInterval = z.number().min(0).describe("Cap on one backoff delay, in seconds. Default 3600.");
const retryJitter = z
  .enum(["none", "full"])
  .describe("none, or full: a uniform random delay in [0, computed delay]. Default none.");
const onExhausted = z
  .enum(["fail", "pause"])
  .describe(
    "What happens when the node's retries run out: fail (the visit fails, its failure edges fire), or pause (the run pauses with the visit waiting for an operator: resumeRun gives it one more attempt, failVisit takes the failure path). Default fail.",
  );
const heartbeatTimeout = seconds(
  "An attempt whose agent has not heartbeated for this long fails early (lease_expired). Default: none.",
);
const maxVisits = z
  .number()
  .int()
  .min(1)
  .describe("How many visits of this node may start running in one run (loops). Default 10.");

const caseSchema = z
  .strictObject({
    when: z
      .string()
      .describe(
        "JSONata condition; sees input, nodes, run and output (this visit's output). Omit for the default case, which must come last.",
      )
      .optional(),
    to: nodeRefs.describe("Node id or list of node ids fired when this case is chosen."),
  })
  .describe("One branch: the first case whose when holds is fired.");

const nextOnSuccess = z
  .union([nodeRef, z.array(nodeRef), z.array(caseSchema)], {
    error: "expected a node id, a list of node ids, or a list of cases {when, to}",
  })
  .describe(
    "Edges fired when the node succeeds: a node id, a list of ids, or a list of cases {when, to} (first match wins; one case without when, the default, may come last). An edge to a node listed earlier (or itself) is a loop-back.",
  );

const compensation = z
  .strictObject({
    agent_type: agentType,
    payload: payload.default({}).describe("Parameters for the compensating agent; templates also see self."),
  })
  .describe("Agent run to undo this node's effect when the run fails.");

export const NodeSchema = z
  .strictObject({
    node_id: nodeId,
    agent_type: agentType,
    payload: payload.default({}),
    depends_on: z.array(nodeRef).default([]).describe("Nodes that must be done first, as the join rule says."),
    next_on_success: nextOnSuccess.optional(),
    next_on_failure: nodeRefs
      .describe("Edges fired when the node fails for good: a node id or a list of ids. A failure so routed is handled.")
      .optional(),
    retry_count: retryCount.optional(),
    retry_interval: retryInterval.optional(),
    timeout: seconds(
      "Hard cap on one attempt; for human_review, how long the review waits. Default 300 (human_review: the workflow timeout).",
    ).optional(),
    retry_backoff: retryBackoff.optional(),
    retry_max_interval: retryMaxInterval.optional(),
    retry_jitter: retryJitter.optional(),
    on_exhausted: onExhausted.optional(),
    heartbeat_timeout: heartbeatTimeout.optional(),
    join: z
      .enum(["all", "any", "all_done"])
      .default("all")
      .describe(
        "all: every dependency succeeded. any: every dependency terminal and one succeeded. all_done: every dependency terminal.",
      ),
    max_visits: maxVisits.optional(),
    compensation: compensation.optional(),
    decide: z
      .string()
      .min(1)
      .describe("Name of a registered code hook (output, ctx) => node ids choosing the next nodes.")
      .optional(),
    concurrency: z
      .strictObject({
        key: z
          .string()
          .min(1)
          .describe(
            'A template resolved once per visit, e.g. "{{ input.tenant_id }}": visits with the same value share the limit.',
          ),
        limit: z.number().int().min(1).describe("Most attempts of this node running at once for one value of key."),
      })
      .describe(
        "At most limit attempts of this node run at once across all engines and workers for each value of key; the others wait ready.",
      )
      .optional(),
  })
  .describe("One step of the workflow.");

const defaults = z
  .strictObject({
    retry_count: retryCount.optional(),
    retry_interval: retryInterval.optional(),
    retry_backoff: retryBackoff.optional(),
    retry_max_interval: retryMaxInterval.optional(),
    retry_jitter: retryJitter.optional(),
    on_exhausted: onExhausted.optional(),
    timeout: seconds("Hard cap on one attempt (human_review nodes ignore it).").optional(),
    heartbeat_timeout: heartbeatTimeout.optional(),
    max_visits: maxVisits.optional(),
  })
  .describe("Values for nodes that do not set these fields.");

/** The longest event name or key a trigger names: publishEvent's limit. */
export const MAX_EVENT_NAME = 200;

const trigger = z
  .strictObject({
    event: z
      .string()
      .min(1)
      .max(MAX_EVENT_NAME)
      .describe("The name of the events that start a run, as publishEvent (POST /v1/events) gives it."),
    key: z
      .string()
      .min(1)
      .max(MAX_EVENT_NAME)
      .describe("Only events published with this key start a run. Default: any key.")
      .optional(),
    input: z
      .unknown()
      .describe(
        'The run\'s input: JSON whose strings may hold JSONata templates over event (its name, key, payload, idempotency_key and event_id), e.g. { "order_id": "{{ event.key }}", "total": "{{ event.payload.total }}" }, or "{{ event.payload.order }}". Default: the event\'s payload.',
      )
      .optional(),
  })
  .describe("An event that starts a run of the workflow's latest version.");

export const WorkflowSchema = z
  .strictObject({
    // Lets editors find the JSON Schema from the document itself.
    $schema: z.string().describe("URL or path of the JSON Schema for editors.").optional(),
    id: z
      .string()
      .regex(WORKFLOW_ID_PATTERN, {
        error: "must be 1 to 64 lowercase letters, digits, '_' or '-'",
      })
      .describe("Workflow id: [a-z0-9_-]{1,64}."),
    version: z.number().int().min(1).describe("Version number; assigned by the registry when absent.").optional(),
    description: z.string().describe("What the workflow does.").optional(),
    timeout: seconds("The run's total time to live. Default 86400.").default(BUILTIN_DEFAULTS.workflow_timeout),
    defaults: defaults.default({}),
    input_schema: z.record(z.string(), z.unknown()).describe("JSON Schema the run input must meet.").optional(),
    budget: z
      .strictObject({
        max_tokens: z
          .number()
          .min(0)
          .describe("Most tokens (tokens_in + tokens_out) the run and its child runs may report.")
          .optional(),
        max_cost: z.number().min(0).describe("Most cost the run and its child runs may report.").optional(),
      })
      .describe(
        "Usage at which no further attempt of the run (or of its child runs) starts: the visit fails budget_exceeded. startRun's budget replaces it.",
      )
      .optional(),
    triggers: z
      .array(trigger)
      .describe(
        "Events that start a run: publishEvent starts one run of the workflow's latest version per event, at most once per event idempotency key, with the first trigger that matches the event's name and key.",
      )
      .optional(),
    nodes: z.array(NodeSchema).min(1).describe("The steps, in document order."),
  })
  .describe("A Skein workflow definition.");

/** A parsed, defaulted workflow definition. */
export type WorkflowDefinition = z.output<typeof WorkflowSchema>;
/** One parsed node of a workflow definition. */
export type NodeDefinition = WorkflowDefinition["nodes"][number];
// The type of a definition as written is workflow-input.ts's WorkflowInput (z.input with the built-in kinds' payloads).
/** The `defaults` block of a parsed definition. */
export type WorkflowDefaults = WorkflowDefinition["defaults"];
/** One parsed trigger of a workflow definition. */
export type TriggerDefinition = NonNullable<WorkflowDefinition["triggers"]>[number];
/** One `{when, to}` case of `next_on_success`. */
export type SuccessCase = z.output<typeof caseSchema>;
