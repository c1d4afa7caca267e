/** `defineWorkflow`: a workflow definition written in code, typed by the format. */
import type { CheckedWorkflow, NodeInput, WorkflowInput } from "./workflow-input.js";

/**
 * Returns its argument unchanged: a typed literal, with completion and errors for every field and
 * every built-in kind's payload (the run-time checks of `registerWorkflow` still apply: graph
 * rules, templates, agent types). Pass the result to `registerWorkflow` or `createTestEngine`.
 * @example
 * const workflow = defineWorkflow({
 *   id: "content-publish",
 *   nodes: [
 *     { node_id: "fetch", agent_type: "collector", payload: { platform: "x" } },
 *     { node_id: "review", agent_type: "human_review", depends_on: ["fetch"], payload: { assignees: ["ops"] } },
 *   ],
 * });
 */
export function defineWorkflow<const N extends readonly NodeInput[]>(definition: CheckedWorkflow<N>): WorkflowInput {
  return definition as unknown as WorkflowInput;
}
