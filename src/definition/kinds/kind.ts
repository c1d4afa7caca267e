/**
 * A node kind's RULES: what the format says about a node of one built-in agent_type (DESIGN
 * §11): how its visits start, its payload's checks, the fields it resolves later, the nodes it
 * reads. One interface, one file per kind (as Kysely's `Dialect`): validation, the graph and the
 * engine ask the kind of a node (`kindOf`, `CompiledNode.kind`) and never compare agent_type
 * strings. Pure: nothing here reads a run.
 *
 * A kind is a file per layer it needs, a line in each layer's index: its rules here, its states
 * (what a visit does in the scheduler: `inline`, `begin`, `due`) in core/kinds/, its
 * in-transaction step in engine/writer/kinds/, its I/O in calls/, plus its store pieces when its
 * visits wait on something the database must find. Built: task, aggregator, http, llm,
 * human_review, sleep, wait_event (§11.2), workflow and map (§11.1), agent (§14.2).
 */

import { type Problem, withArticle } from "../../errors.js";
import type { Json } from "../../json-text.js";
import type { NodeDefinition } from "../schema.js";

/** What a kind's validation may ask of the workflow. */
export interface KindChecks {
  /** `nodes[i]`: prefix of every path a problem names. */
  readonly at: string;
  /** The problem for a reference to a node that does not exist (with a "did you mean"). */
  unknownNode(path: string, id: string): Problem | null;
  /** The document was accepted when it was stored: rules added since do not refuse it. */
  readonly stored: boolean;
}

export interface KindRules {
  /** The agent_type that selects this kind; `task` is every agent_type no kind reserves. */
  readonly name: string;
  /**
   * How a ready visit starts. `agent`: an attempt claimed by an in-process agent or an external
   * worker, within the concurrency limits. `engine`: the engine starts it in the claiming flush
   * (its states' `begin`), with no agent and no concurrency limit; workers may not claim it.
   */
  readonly start: "agent" | "engine";
  /**
   * What a worker that asks for one is told (`<name> nodes ...`): set for every `start: "engine"`
   * kind, and for built-in agents only the engine runs (`http`).
   */
  readonly notClaimable?: string;
  /** False: the node's retry settings and `defaults` do not apply; its timeout defaults to the workflow's. */
  readonly retries: boolean;
  /**
   * Payload fields whose templates do not resolve as the visit becomes ready: kept as written
   * (a map's `each`, which every item resolves in its own run).
   */
  readonly deferred?: readonly string[];
  /** Errors in a node of this kind beyond the schema's (its payload, its edges). */
  validate?(node: NodeDefinition, checks: KindChecks): Problem[];
  /** The nodes whose outputs it reads (an aggregator's sources); none by default. */
  sources?(node: NodeDefinition): string[];
  /** Why a payload resolved from templates is refused (becomes `template_error`), or null. */
  checkResolved?(payload: Json): string | null;
  /**
   * The `concurrency` a node of this kind has when it gives none (an agent's `thread`: one visit
   * of a thread at a time), or null.
   */
  impliedConcurrency?(node: NodeDefinition): { key: string; limit: number } | null;
  /**
   * Whether the kind itself undoes a visit whose node gives no `compensation` (a map whose items
   * declare one, an agent whose tools do): the compensation then runs as the kind's own agent.
   */
  undoes?(payload: Json): boolean;
  /** Agent types the payload names (an agent's tools), each with its path under the payload: warned of when unknown. */
  agentTypesIn?(payload: Json): { path: string; agent_type: string }[];
}

/**
 * The edges of a kind whose output is fixed (a sleep's, an event's, a child run's): no `decide`
 * hook and no `when` on its success edges. `output` says what the output is; `branch` ends the
 * message about `when` (what to do instead).
 */
export function plainEdgesOnly(
  node: NodeDefinition,
  checks: KindChecks,
  kind: string,
  output: string,
  branch: string,
): Problem[] {
  const problems: Problem[] = [];
  if (node.decide !== undefined) {
    problems.push({
      path: `${checks.at}.decide`,
      message: `${withArticle(kind)} node has no decide hook: its output is ${output}; decide on the node after it`,
    });
  }
  const next = node.next_on_success;
  if (Array.isArray(next) && next.some((c) => typeof c === "object" && c.when !== undefined)) {
    problems.push({
      path: `${checks.at}.next_on_success`,
      message: `${withArticle(kind)} node cannot branch with "when"${branch}`,
    });
  }
  return problems;
}
