/**
 * Workflow scopes at run time (DESIGN §13.1): a run records the `workflows` patterns of the
 * principal that started its root (a scoped token's; null for an unscoped caller or the
 * library: every workflow), its child runs and map items inherit them, and a `workflow` node or
 * a map item may start only workflows they cover (core/scope.ts matches them).
 */
import { WORKFLOW_PATTERN } from "../core/scope.js";

/** A visit's reason when the workflow it would start is outside its run's scope (not retried). */
export const OUT_OF_SCOPE = "out_of_scope";

/** The refusal of a start outside the run's scope, as a visit's error says it. */
export function outOfScopeMessage(workflowId: string, patterns: readonly string[]): string {
  return `workflow "${workflowId}" is outside this run's scope (${patterns.join(", ")}, the workflows of the token that started its root): start it with a token whose scope covers it, or name a workflow in scope`;
}

/** @returns a problem with the scope patterns a caller passed, or null */
export function scopeProblem(patterns: unknown): string | null {
  if (!Array.isArray(patterns) || patterns.length === 0) {
    return "must be a non-empty list of workflow ids or patterns with * (leave scope out for all workflows)";
  }
  const bad = patterns.find((p) => typeof p !== "string" || !WORKFLOW_PATTERN.test(p));
  return bad === undefined
    ? null
    : `${JSON.stringify(bad)} is not a workflow id or a pattern of one with * (1 to 64 of a-z, 0-9, '_', '-', '*')`;
}
