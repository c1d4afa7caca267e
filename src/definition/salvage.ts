/**
 * @internal What validation can still check in a document the schema refused, so that every
 * problem is reported at once (DESIGN §2): a cycle or an unknown node is not held back until
 * the schema's problems are fixed.
 */
import type { z } from "zod";
import { NodeSchema, type WorkflowDefinition, WorkflowSchema } from "./schema.js";

/**
 * The parts of a document the schema refused that are well-formed enough for the other checks:
 * `nodes` a list of objects that each have a string `node_id`; of every other field, the value
 * when it passes its own schema, else its default (its problem is already reported). Null when
 * the nodes themselves are unusable: the graph checks would only guess.
 */
export function salvage(json: unknown): WorkflowDefinition | null {
  const isObject = (v: unknown): v is Record<string, unknown> =>
    v !== null && typeof v === "object" && !Array.isArray(v);
  if (!isObject(json) || !Array.isArray(json.nodes) || json.nodes.length === 0) return null;
  if (!json.nodes.every((n) => isObject(n) && typeof n.node_id === "string")) return null;
  const fields = (raw: Record<string, unknown>, shape: Record<string, z.ZodType>): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const [key, schema] of Object.entries(shape)) {
      const parsed = schema.safeParse(raw[key]);
      const value = parsed.success ? parsed.data : schema.safeParse(undefined).data;
      if (value !== undefined) out[key] = value;
    }
    return out;
  };
  const nodes = (json.nodes as Record<string, unknown>[]).map((raw) => {
    const node = fields(raw, NodeSchema.shape);
    node.node_id = raw.node_id;
    if (typeof node.agent_type !== "string") node.agent_type = typeof raw.agent_type === "string" ? raw.agent_type : "";
    // The ids of a depends_on that holds something else too.
    if (Array.isArray(raw.depends_on)) node.depends_on = raw.depends_on.filter((d) => typeof d === "string");
    return node;
  });
  const { nodes: _nodes, ...workflowShape } = WorkflowSchema.shape;
  return { ...fields(json, workflowShape), nodes } as WorkflowDefinition;
}
