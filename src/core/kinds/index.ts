/**
 * The node-kind table of the core: each built-in kind's states by agent_type (DESIGN §11), for
 * the kinds whose visits do more than wait for an agent. Its rules are definition/kinds/; see
 * kind.ts for the interface.
 */

import * as rules from "../../definition/kinds/index.js";
import { agent } from "./agent.js";
import { aggregator } from "./aggregator.js";
import { humanReview } from "./human-review.js";
import type { KindStates } from "./kind.js";
import { map } from "./map.js";
import { sleep } from "./sleep.js";
import { waitEvent } from "./wait-event.js";
import { workflow } from "./workflow.js";

export type { InboxReader, KindStates, Moves } from "./kind.js";

const STATES = new Map<rules.KindRules, KindStates>([
  [rules.agent, agent],
  [rules.aggregator, aggregator],
  [rules.humanReview, humanReview],
  [rules.map, map],
  [rules.sleep, sleep],
  [rules.waitEvent, waitEvent],
  [rules.workflow, workflow],
]);

/** Adds the states of a kind added to the rules' table (definition/kinds/index.ts `addKindRules`). */
export function addKindStates(kind: rules.KindRules, states: KindStates): void {
  if (STATES.has(kind)) throw new Error(`the ${kind.name} kind has states already`);
  STATES.set(kind, states);
}

/** A kind that only waits for its agent (task, http, llm): no states of its own. */
const AGENT_RUN: KindStates = {};

/** The states of a kind (its rules, `CompiledNode.kind`). */
export function statesOf(kind: rules.KindRules): KindStates {
  return STATES.get(kind) ?? AGENT_RUN;
}
