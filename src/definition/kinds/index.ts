/**
 * The node-kind table of the format: each built-in kind's rules by agent_type (DESIGN §11).
 * Everything that depends on a node's kind asks here (or `CompiledNode.kind`); see kind.ts for
 * the interface and how to add one. What a visit of a kind does is core/kinds/index.ts.
 */

import type { Json } from "../../json-text.js";
import type { NodeDefinition } from "../schema.js";
import { aggregator } from "./aggregator.js";
import { http } from "./http.js";
import { humanReview } from "./human-review.js";
import type { KindRules } from "./kind.js";
import { llm } from "./llm.js";
import { map, undoesItems } from "./map.js";
import { sleep } from "./sleep.js";
import { task } from "./task.js";
import { waitEvent } from "./wait-event.js";
import { workflow } from "./workflow.js";

export type { KindChecks, KindRules } from "./kind.js";
export { aggregator, http, humanReview, llm, map, sleep, task, waitEvent, workflow };

const BUILTIN: ReadonlyMap<string, KindRules> = new Map(
  [aggregator, http, humanReview, llm, map, sleep, waitEvent, workflow].map((k) => [k.name, k]),
);

/** The built-in agent types (reserved names). */
export const BUILTIN_KINDS: readonly string[] = [...BUILTIN.keys()];

/** The kind of a node by its agent_type: a built-in one, else `task`. */
export function kindOf(agentType: string): KindRules {
  return BUILTIN.get(agentType) ?? task;
}

/** Built-in agent types the engine starts itself (no agent, no concurrency limit). */
export const ENGINE_STARTED: readonly string[] = [...BUILTIN.values()]
  .filter((k) => k.start === "engine")
  .map((k) => k.name);

/**
 * Why a node of this kind may not read `secrets.NAME` in its payload, or null when it may
 * (DESIGN §12): agents' kinds (http, llm, an agent's `task`) get their payload at dispatch;
 * the engine's kinds and the aggregator store theirs or pass it on, so a secret would only be
 * its placeholder there.
 */
export function secretsRefusal(kind: KindRules): string | null {
  if (kind.start === "agent" && kind !== aggregator) return null;
  return `a ${kind.name} node's payload cannot hold secrets: they go only to agents (http, llm, or an agent that declares them)`;
}

/** Whether a node of this kind gets secrets only when its agent declares them (`defineAgent({ secrets })`). */
export function needsDeclaredSecrets(kind: KindRules): boolean {
  return kind === task;
}

/**
 * Who undoes a visit of this node when its run fails (DESIGN §6): its `compensation`'s agent
 * type, `map` for a map whose items declare one (the engine undoes the items, newest first, as
 * the map's holder: core/kinds/map.ts `MAP_HOLDER`), or null when nothing does.
 */
export function undoAgent(node: { readonly def: NodeDefinition; readonly kind: KindRules }): string | null {
  if (node.def.compensation) return node.def.compensation.agent_type;
  return node.kind === map && undoesItems(node.def.payload as Json) ? map.name : null;
}
