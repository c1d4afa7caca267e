/**
 * defineWorkflow literals that must compile under --strict (types.test.ts type-checks this file
 * and validates every export at run time, so the types accept nothing the engine refuses).
 */
import type { z } from "zod";
import type { WorkflowSchema } from "../../src/definition/schema.js";
import { defineWorkflow, type WorkflowInput } from "../../src/index.js";

/** WorkflowInput fits the zod schema's input type: the hand-written payload types only narrow it. */
type FitsTheSchema<T extends z.input<typeof WorkflowSchema>> = T;
export type WorkflowInputFitsTheSchema = FitsTheSchema<WorkflowInput>;

/** The smallest workflow: defaults, payload, depends_on and join all optional. */
export const minimal = defineWorkflow({ id: "minimal", nodes: [{ node_id: "only", agent_type: "worker" }] });

/** Every top-level field, and every defaults field. */
export const everyField = defineWorkflow({
  $schema: "https://skein.dev/workflow.schema.json",
  id: "every-field",
  version: 2,
  description: "every top-level field",
  timeout: 3600,
  defaults: {
    retry_count: 5,
    retry_interval: 0.5,
    retry_backoff: "exponential",
    retry_max_interval: 60,
    retry_jitter: "full",
    timeout: 30,
    heartbeat_timeout: 10,
    max_visits: 3,
  },
  input_schema: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
  nodes: [
    {
      node_id: "fetch",
      agent_type: "collector",
      payload: { platform: "x", topic: "{{ input.topic }}", limit: 3, nested: { deep: [1, "two"] } },
      retry_count: 0,
      retry_interval: 0,
      retry_backoff: "fixed",
      retry_max_interval: 5,
      retry_jitter: "none",
      timeout: 12,
      heartbeat_timeout: 4,
      max_visits: 1,
      concurrency: { key: "{{ input.topic }}", limit: 2 },
    },
    { node_id: "tail", agent_type: "worker", depends_on: ["fetch"], join: "all_done" },
  ],
});

/** Branches: cases with a default, a failure handler, a decide hook, join any. */
export const branches = defineWorkflow({
  id: "branches",
  nodes: [
    {
      node_id: "check",
      agent_type: "checker",
      next_on_success: [{ when: "output.ok = true", to: "publish" }, { to: ["rework"] }],
      next_on_failure: "alert",
    },
    { node_id: "publish", agent_type: "worker", decide: "choose", next_on_success: ["done_a", "done_b"] },
    { node_id: "rework", agent_type: "worker" },
    { node_id: "alert", agent_type: "pager" },
    { node_id: "done_a", agent_type: "worker" },
    { node_id: "done_b", agent_type: "worker" },
    { node_id: "report", agent_type: "aggregator", depends_on: ["done_a", "done_b", "rework"], join: "any" },
  ],
});

/** A loop: review sends the draft back to rework, which returns to review (max_visits bounds it). */
export const loop = defineWorkflow({
  id: "loop",
  nodes: [
    { node_id: "draft", agent_type: "writer" },
    {
      node_id: "review",
      agent_type: "critic",
      depends_on: ["draft"],
      max_visits: 3,
      next_on_success: ["ship", "rework"],
    },
    { node_id: "rework", agent_type: "writer", next_on_success: "review" },
    { node_id: "ship", agent_type: "publisher" },
  ],
});

/** Compensation: the saga's undo step, with and without a payload. */
export const compensation = defineWorkflow({
  id: "compensation",
  nodes: [
    {
      node_id: "charge",
      agent_type: "payments",
      payload: { amount: "{{ input.amount }}" },
      compensation: { agent_type: "refund", payload: { charge: "{{ self.output.charge_id }}" } },
    },
    { node_id: "ship", agent_type: "warehouse", depends_on: ["charge"], compensation: { agent_type: "unship" } },
  ],
});

/** Every built-in kind with its payload. */
export const builtins = defineWorkflow({
  id: "builtins",
  nodes: [
    { node_id: "plan", agent_type: "planner" },
    {
      node_id: "review",
      agent_type: "human_review",
      depends_on: ["plan"],
      timeout: 43_200,
      payload: { assignees: ["ops", "alice"], title: "Approve the plan", instructions: "Check the sources", data: 1 },
    },
    { node_id: "anyone", agent_type: "human_review", depends_on: ["review"] },
    {
      node_id: "templated",
      agent_type: "human_review",
      depends_on: ["anyone"],
      payload: { assignees: "{{ input.reviewers }}" },
    },
    {
      node_id: "notify",
      agent_type: "http",
      depends_on: ["templated"],
      payload: {
        method: "POST",
        url: "https://hooks.example.com/plan",
        headers: { Authorization: "Bearer {{ secrets.HOOK_TOKEN }}" },
        query: { source: "skein", tag: ["a", "b"], page: 1 },
        body: { plan: "{{ nodes.plan.output }}" },
        timeout_ms: 5000,
        ok_status: [200, "2xx", "300-302"],
        max_redirects: 0,
      },
    },
    { node_id: "nap", agent_type: "sleep", depends_on: ["notify"], payload: { seconds: 30 } },
    { node_id: "until", agent_type: "sleep", depends_on: ["nap"], payload: { until: "2030-01-31T09:00:00Z" } },
    { node_id: "until_ms", agent_type: "sleep", depends_on: ["until"], payload: { until: 1_900_000_000_000 } },
    { node_id: "later", agent_type: "sleep", depends_on: ["until_ms"], payload: { seconds: "{{ input.delay }}" } },
    {
      node_id: "paid",
      agent_type: "wait_event",
      depends_on: ["later"],
      timeout: 3600,
      payload: { event: "payment.received" },
    },
    {
      node_id: "shipped",
      agent_type: "wait_event",
      depends_on: ["paid"],
      payload: { event: "order.shipped", key: "{{ input.order_id }}", buffer_seconds: 600 },
    },
    {
      node_id: "child",
      agent_type: "workflow",
      depends_on: ["shipped"],
      payload: { workflow_id: "minimal", version: 1, input: { from: "{{ run.id }}" } },
    },
    { node_id: "latest_child", agent_type: "workflow", depends_on: ["child"], payload: { workflow_id: "minimal" } },
    {
      node_id: "answers",
      agent_type: "map",
      depends_on: ["latest_child"],
      payload: {
        items: "{{ nodes.plan.output.questions }}",
        each: {
          agent_type: "researcher",
          payload: { question: "{{ item }}", index: "{{ index }}" },
          compensation: { agent_type: "forget", payload: { question: "{{ item }}" } },
        },
        max_concurrency: 4,
        max_items: 100,
        tolerated_failures: 1,
      },
    },
    {
      node_id: "children",
      agent_type: "map",
      depends_on: ["answers"],
      payload: {
        items: [1, 2, 3],
        each: { workflow_id: "minimal", version: null, input: { n: "{{ item }}" } },
        tolerated_failure_percent: 50,
      },
    },
    {
      node_id: "all",
      agent_type: "aggregator",
      depends_on: ["answers", "children"],
      payload: { sources: ["answers"] },
    },
  ],
});

/** The result is a WorkflowInput: it can be spread, extended and passed on. */
export const extended: WorkflowInput = {
  ...minimal,
  id: "extended",
  nodes: [...minimal.nodes, { node_id: "more", agent_type: "worker", depends_on: ["only"] }],
};

/** A WorkflowInput built in steps (not a literal) is accepted too. */
const nodes: WorkflowInput["nodes"] = [{ node_id: "a", agent_type: "worker" }];
nodes.push({ node_id: "b", agent_type: "sleep", depends_on: ["a"], payload: { seconds: 1 } });
export const built = defineWorkflow({ id: "built", nodes });

/** The llm node: prompt or messages, a JSON schema for its answer, tools, a provider. */
export const llmNodes = defineWorkflow({
  id: "llm-nodes",
  nodes: [
    {
      node_id: "classify",
      agent_type: "llm",
      payload: {
        model: "gpt-4o-mini",
        temperature: 0,
        max_tokens: 200,
        messages: [
          { role: "system", content: "Classify the ticket." },
          { role: "user", content: "{{ input.text }}" },
        ],
        response_format: {
          type: "json_schema",
          json_schema: { name: "triage", strict: true, schema: { type: "object", properties: {} } },
        },
      },
      next_on_success: [{ when: "output.parsed.kind = 'bug'", to: "tools" }],
    },
    {
      node_id: "tools",
      agent_type: "llm",
      payload: {
        model: "{{ input.model }}",
        prompt: "Refund order {{ input.order }}",
        tools: [{ type: "function", function: { name: "refund", parameters: { type: "object" } } }],
        tool_choice: "auto",
        provider: "local",
      },
    },
  ],
});
