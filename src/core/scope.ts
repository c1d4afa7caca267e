/**
 * Workflow scopes (DESIGN §13.1): the `workflows` patterns of a scoped token, which a run
 * records for its whole tree. `*` is the only wildcard. Pure: the engine checks what a run may
 * start with them, a `wait_event` which events by key it may take, the HTTP API what a token sees.
 */
import { ITEM_SEPARATOR } from "../definition/kinds/map.js";

/** A pattern: workflow id characters and `*` (a workflow id is 1-64 of a-z, 0-9, '_', '-'). */
export const WORKFLOW_PATTERN = /^[a-z0-9_*-]{1,64}$/;

/** The regular expression that matches exactly the workflow ids the patterns cover. */
export function scopeRegex(patterns: readonly string[]): RegExp {
  // Only [a-z0-9_*-] reach here (validated), so nothing but `*` needs escaping.
  return new RegExp(`^(?:${patterns.map((p) => p.replaceAll("*", ".*")).join("|")})$`);
}

/**
 * True when the patterns cover the workflow (always when there are none: null). A map's item
 * workflow (`<workflow_id>/<node_id>`) is in the scope of its workflow, and only of it: a
 * pattern never matches across the `/`.
 */
export function scopeAllows(patterns: readonly string[] | null, workflowId: string): boolean {
  if (patterns === null) return true;
  return scopeRegex(patterns).test(workflowId.split(ITEM_SEPARATOR, 1)[0] ?? "");
}
