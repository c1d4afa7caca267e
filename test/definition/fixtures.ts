/** Definitions shared by the definition tests. */

/** The case study of DESIGN §2, verbatim. */
export function caseStudy() {
  return {
    id: "content-publish",
    description: "collect, review, publish to three platforms, report",
    timeout: 86400,
    defaults: { retry_count: 3, retry_interval: 30, timeout: 300 },
    nodes: [
      { node_id: "fetch_a", agent_type: "collector", payload: { platform: "a", topic: "{{ input.topic }}" } },
      { node_id: "fetch_b", agent_type: "collector", payload: { platform: "b", topic: "{{ input.topic }}" } },
      { node_id: "fetch_c", agent_type: "collector", payload: { platform: "c", topic: "{{ input.topic }}" } },
      {
        node_id: "review",
        agent_type: "content_reviewer",
        depends_on: ["fetch_a", "fetch_b", "fetch_c"],
        next_on_success: [
          { when: "output.ok = true", to: ["publish_a", "publish_b", "publish_c"] },
          { to: "human_check" },
        ],
      },
      {
        node_id: "human_check",
        agent_type: "human_review",
        timeout: 43200,
        payload: { title: "Flagged content: rework or continue?", assignees: ["editor"] },
        next_on_success: "review",
      },
      ...["a", "b", "c"].map((p) => ({
        node_id: `publish_${p}`,
        agent_type: "publisher",
        payload: { platform: p },
        retry_backoff: "exponential",
        compensation: { agent_type: "unpublisher", payload: { platform: p } },
      })),
      { node_id: "summary", agent_type: "aggregator", depends_on: ["publish_a", "publish_b", "publish_c"] },
    ],
  };
}

/** Builds a workflow from terse nodes; each node gets agent_type "worker" unless given. */
export function wf(nodes: Record<string, unknown>[], extra: Record<string, unknown> = {}) {
  return {
    id: "test",
    ...extra,
    nodes: nodes.map((n) => ({ agent_type: "worker", ...n })),
  };
}
