/**
 * Secrets' owners and destinations at registration (DESIGN §13.1): a node may read a secret only
 * in workflows its `workflows` cover, and an `http` node's static URL (an `llm` node's provider
 * base_url) must be one of its `hosts`. Templated URLs are checked at dispatch, every redirect
 * hop included (calls/http.ts), and so are workflow ids (engine/attempts/runner.ts, the worker).
 */
import type { LlmOptions } from "../../calls/llm/providers.js";
import type { WorkflowGraph } from "../../definition/graph.js";
import type { WorkflowDefinition } from "../../definition/schema.js";
import type { Problem } from "../../errors.js";
import { hostMatches as hostAllowed, type Secrets } from "./secrets.js";

export function secretOwnerProblems(
  secrets: Secrets,
  llm: LlmOptions | undefined,
  workflow: WorkflowDefinition,
  graph: WorkflowGraph,
): Problem[] {
  const problems: Problem[] = [];
  for (const [i, def] of workflow.nodes.entries()) {
    const node = graph.nodes.get(def.node_id);
    if (!node || node.secretNames.length === 0) continue;
    for (const name of node.secretNames) {
      const refused = secrets.workflowRefusal(name, workflow.id);
      if (refused !== null) problems.push({ path: `nodes[${i}].payload`, message: refused });
    }
    const destination = staticDestination(node.agent_type, def.payload, llm);
    if (!destination) continue;
    for (const name of node.secretNames) {
      const hosts = secrets.hostsOf(name);
      if (hosts === null || hostAllowed(destination.host, hosts)) continue;
      problems.push({
        path: `nodes[${i}].payload.${destination.field}`,
        message: `secret ${name} may be sent only to ${hosts.join(", ")} (its hosts), not to ${destination.host}; add the host to the secret's hosts (the secrets option or SKEIN_SECRET_${name}_HOSTS)`,
      });
    }
  }
  return problems;
}

/** Where an http or llm node's request goes, when the payload says it without a template. */
function staticDestination(
  agentType: string,
  payload: unknown,
  llm: LlmOptions | undefined,
): { host: string; field: string } | null {
  const p = (payload ?? {}) as { url?: unknown; provider?: unknown };
  let url: unknown;
  let field: string;
  if (agentType === "http") {
    url = p.url;
    field = "url";
  } else if (agentType === "llm") {
    const provider = p.provider === undefined ? "default" : p.provider;
    if (typeof provider !== "string" || provider.includes("{{")) return null;
    url = llm?.providers?.[provider]?.base_url;
    field = p.provider === undefined ? "provider (default)" : "provider";
  } else return null;
  if (typeof url !== "string" || url.includes("{{")) return null;
  try {
    return { host: new URL(url).hostname.replace(/^\[|\]$/g, ""), field };
  } catch {
    return null;
  }
}
