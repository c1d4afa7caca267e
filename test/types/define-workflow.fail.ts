/**
 * defineWorkflow mistakes that must not compile: each is preceded by `// @ts-expect-error`, and
 * an unused one is itself an error, so a mistake that starts to compile fails types.test.ts.
 * One mistake per definition, so each directive covers exactly one; where the formatter wraps a
 * definition, the directive stands before the line the error is reported on.
 */
import { defineWorkflow } from "../../src/index.js";

const ok = { node_id: "ok", agent_type: "worker" } as const;

// A misspelled node field.
// @ts-expect-error retry_backof is not a field (retry_backoff is)
defineWorkflow({ id: "a", nodes: [{ node_id: "n", agent_type: "worker", retry_backof: "fixed" }] });

// A misspelled top-level field.
// @ts-expect-error node is not a field (nodes is)
defineWorkflow({ id: "a", node: [ok] });

// No nodes.
// @ts-expect-error nodes is required
defineWorkflow({ id: "a" });

// No id.
// @ts-expect-error id is required
defineWorkflow({ nodes: [ok] });

// A retry_backoff that does not exist.
// @ts-expect-error retry_backoff is "fixed" or "exponential"
defineWorkflow({ id: "a", nodes: [{ node_id: "n", agent_type: "worker", retry_backoff: "linear" }] });

// A wrong defaults field type.
// @ts-expect-error retry_count is a number
defineWorkflow({ id: "a", defaults: { retry_count: "3" }, nodes: [ok] });

// A misspelled defaults field.
// @ts-expect-error retries is not a defaults field
defineWorkflow({ id: "a", defaults: { retries: 3 }, nodes: [ok] });

// A number where a node id goes.
// @ts-expect-error node_id is a string
defineWorkflow({ id: "a", nodes: [{ node_id: 3, agent_type: "worker" }] });

// A number in depends_on.
// @ts-expect-error depends_on lists node ids
defineWorkflow({ id: "a", nodes: [ok, { node_id: "n", agent_type: "worker", depends_on: [1] }] });

// No agent_type.
// @ts-expect-error agent_type is required
defineWorkflow({ id: "a", nodes: [{ node_id: "n" }] });

// A join rule that does not exist.
// @ts-expect-error join is all, any or all_done
defineWorkflow({ id: "a", nodes: [{ node_id: "n", agent_type: "worker", join: "some" }] });

// A case without its target.
// @ts-expect-error a case needs `to`
defineWorkflow({ id: "a", nodes: [{ node_id: "n", agent_type: "worker", next_on_success: [{ when: "true" }] }] });

// Cases on a failure edge (next_on_failure takes node ids only).
// @ts-expect-error next_on_failure is a node id or a list of ids
defineWorkflow({ id: "a", nodes: [{ node_id: "n", agent_type: "worker", next_on_failure: [{ to: "x" }] }] });

// A payload that is not an object.
// @ts-expect-error payload is an object
defineWorkflow({ id: "a", nodes: [{ node_id: "n", agent_type: "worker", payload: "text" }] });

// A compensation without its agent.
// @ts-expect-error compensation needs agent_type
defineWorkflow({ id: "a", nodes: [{ node_id: "n", agent_type: "worker", compensation: { payload: {} } }] });

// A concurrency without its limit.
// @ts-expect-error concurrency needs limit
defineWorkflow({ id: "a", nodes: [{ node_id: "n", agent_type: "worker", concurrency: { key: "k" } }] });

// A map without items.
// @ts-expect-error a map needs items
defineWorkflow({ id: "a", nodes: [{ node_id: "m", agent_type: "map", payload: { each: { agent_type: "w" } } }] });

// A map with a misspelled field.
defineWorkflow({
  id: "a",
  // @ts-expect-error itemz is not a field of map's payload
  nodes: [{ node_id: "m", agent_type: "map", payload: { itemz: [1], each: { agent_type: "w" } } }],
});

// A map without each.
// @ts-expect-error a map needs each
defineWorkflow({ id: "a", nodes: [{ node_id: "m", agent_type: "map", payload: { items: [1] } }] });

// A map without a payload at all.
// @ts-expect-error a map needs its payload
defineWorkflow({ id: "a", nodes: [{ node_id: "m", agent_type: "map" }] });

// A map whose each names neither an agent nor a workflow.
defineWorkflow({
  id: "a",
  // @ts-expect-error each needs agent_type or workflow_id
  nodes: [{ node_id: "m", agent_type: "map", payload: { items: [1], each: { payload: {} } } }],
});

// A map whose items is a plain string, not a template.
defineWorkflow({
  id: "a",
  // @ts-expect-error items is a list or a "{{ expr }}" template
  nodes: [{ node_id: "m", agent_type: "map", payload: { items: "a,b", each: { agent_type: "w" } } }],
});

// A map's max_concurrency as text.
defineWorkflow({
  id: "a",
  nodes: [
    // @ts-expect-error max_concurrency is a number
    { node_id: "m", agent_type: "map", payload: { items: [1], each: { agent_type: "w" }, max_concurrency: "4" } },
  ],
});

// Review assignees as one name (a list is required; one template is allowed).
// @ts-expect-error assignees is a list of names
defineWorkflow({ id: "a", nodes: [{ node_id: "r", agent_type: "human_review", payload: { assignees: "ops" } }] });

// Review assignees as numbers.
// @ts-expect-error assignees are names
defineWorkflow({ id: "a", nodes: [{ node_id: "r", agent_type: "human_review", payload: { assignees: [1] } }] });

// A sleep with neither seconds nor until.
// @ts-expect-error a sleep needs seconds or until
defineWorkflow({ id: "a", nodes: [{ node_id: "s", agent_type: "sleep", payload: {} }] });

// A sleep with both.
// @ts-expect-error a sleep takes seconds or until, not both
defineWorkflow({ id: "a", nodes: [{ node_id: "s", agent_type: "sleep", payload: { seconds: 1, until: 2 } }] });

// A sleep with a misspelled field.
// @ts-expect-error secs is not a field of sleep's payload
defineWorkflow({ id: "a", nodes: [{ node_id: "s", agent_type: "sleep", payload: { secs: 1 } }] });

// A sleep without a payload.
// @ts-expect-error a sleep needs its payload
defineWorkflow({ id: "a", nodes: [{ node_id: "s", agent_type: "sleep" }] });

// A wait_event without its event.
// @ts-expect-error a wait_event needs event
defineWorkflow({ id: "a", nodes: [{ node_id: "w", agent_type: "wait_event", payload: { key: "k" } }] });

// A wait_event's key as a number.
// @ts-expect-error key is a string
defineWorkflow({ id: "a", nodes: [{ node_id: "w", agent_type: "wait_event", payload: { event: "e", key: 7 } }] });

// A workflow node without the workflow's id.
// @ts-expect-error a workflow node needs workflow_id
defineWorkflow({ id: "a", nodes: [{ node_id: "c", agent_type: "workflow", payload: { input: {} } }] });

// A workflow node's version as text.
defineWorkflow({
  id: "a",
  // @ts-expect-error version is a number
  nodes: [{ node_id: "c", agent_type: "workflow", payload: { workflow_id: "w", version: "1" } }],
});

// An aggregator's sources as one id.
defineWorkflow({
  id: "a",
  // @ts-expect-error sources is a list of node ids
  nodes: [ok, { node_id: "g", agent_type: "aggregator", depends_on: ["ok"], payload: { sources: "ok" } }],
});

// An aggregator with a misspelled field.
defineWorkflow({
  id: "a",
  // @ts-expect-error source is not a field of aggregator's payload (sources is)
  nodes: [ok, { node_id: "g", agent_type: "aggregator", depends_on: ["ok"], payload: { source: ["ok"] } }],
});

// An llm node without its model.
// @ts-expect-error model is required
defineWorkflow({ id: "a", nodes: [{ node_id: "n", agent_type: "llm", payload: { prompt: "hi" } }] });

// A misspelt field of an llm payload.
defineWorkflow({
  id: "a",
  // @ts-expect-error temprature is not a field of llm's payload
  nodes: [{ node_id: "n", agent_type: "llm", payload: { model: "m", prompt: "hi", temprature: 0 } }],
});

// An http node without a url.
// @ts-expect-error an http payload needs url
defineWorkflow({ id: "a", nodes: [{ node_id: "h", agent_type: "http", payload: { method: "GET" } }] });

// An http node with a method that does not exist.
defineWorkflow({
  id: "a",
  // @ts-expect-error FETCH is not an HTTP method the http node sends
  nodes: [{ node_id: "h", agent_type: "http", payload: { url: "https://x", method: "FETCH" } }],
});

// A misspelt http field whose value is a string (the error names the field, not \`never\`).
defineWorkflow({
  id: "a",
  // @ts-expect-error methd is not a field of http's payload
  nodes: [{ node_id: "h", agent_type: "http", payload: { url: "https://x", methd: "POST" } }],
});

// A misspelt wait_event field left null.
// @ts-expect-error keyy is not a field of wait_event's payload
defineWorkflow({ id: "a", nodes: [{ node_id: "w", agent_type: "wait_event", payload: { event: "e", keyy: null } }] });
