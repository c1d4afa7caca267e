/**
 * Who called: the principal a bearer token stands for (auth.ts finds it), with the workflows it
 * may see when it is scoped (scope.ts keeps routes to them). Its own file, so that the tokens and
 * the scope checks both use it without importing each other.
 */

import { scopeRegex } from "../core/scope.js";
import { ITEM_SEPARATOR } from "../definition/kinds/map.js";

export const ROLES = ["admin", "agent", "reviewer", "metrics"] as const;
export type Role = (typeof ROLES)[number];

/** Who called: the role and name of the token presented. */
export interface Principal {
  role: Role;
  name: string;
  /** The agent types an agent token may claim (null for other roles). */
  agent_types: string[] | null;
  /** The workflows whose runs the token may see and act on (null: all of them). */
  workflows: WorkflowScope | null;
}

/** A token's `workflows` patterns, matched against workflow ids. */
export class WorkflowScope {
  private readonly regex: RegExp;

  constructor(readonly patterns: readonly string[]) {
    this.regex = scopeRegex(patterns);
  }

  allows(workflowId: string): boolean {
    // A map's item workflow (`<workflow_id>/<node_id>`) is in the scope of its workflow, and only
    // of it: a pattern never matches across the `/`.
    return this.regex.test(workflowId.split(ITEM_SEPARATOR, 1)[0] ?? "");
  }
}
