/**
 * The node-kind table of the format: each built-in kind's rules by agent_type (DESIGN §11).
 * Everything that depends on a node's kind asks here (or `CompiledNode.kind`); see kind.ts for
 * the interface and how to add one. What a visit of a kind does is core/kinds/index.ts.
 */

import { withArticle } from "../../errors.js";
import type { Json } from "../../json-text.js";
import type { NodeDefinition } from "../schema.js";
import { agent } from "./agent.js";
import { aggregator } from "./aggregator.js";
import { http } from "./http.js";
import { humanReview } from "./human-review.js";
import type { KindRules } from "./kind.js";
import { llm } from "./llm.js";
import { map } from "./map.js";
import { sleep } from "./sleep.js";
import { task } from "./task.js";
import { waitEvent } from "./wait-event.js";
import { workflow } from "./workflow.js";

export type { KindChecks, KindRules } from "./kind.js";
export { agent, aggregator, http, humanReview, llm, map, sleep, task, waitEvent, workflow };

const KINDS = new Map<string, KindRules>();

/** The agent types a kind reserves (built-in names): a node of one is that kind, never a `task`. */
export const BUILTIN_KINDS: readonly string[] = [];

/** Agent types of kinds the engine starts itself (no agent, no concurrency limit). */
export const ENGINE_STARTED: readonly string[] = [];

/**
 * Adds a kind's rules to the table: the line each kind has below. A kind the engine starts also
 * adds its states (core/kinds/index.ts) and, when it starts work in the flush, its step
 * (engine/writer/kinds/index.ts); test/fixtures/noop-wait/ adds one from outside src.
 */
export function addKindRules(kind: KindRules): void {
  if (KINDS.has(kind.name) || kind.name === task.name) throw new Error(`a kind named ${kind.name} exists already`);
  KINDS.set(kind.name, kind);
  (BUILTIN_KINDS as string[]).push(kind.name);
  if (kind.start === "engine") (ENGINE_STARTED as string[]).push(kind.name);
}

for (const kind of [agent, aggregator, http, humanReview, llm, map, sleep, waitEvent, workflow]) addKindRules(kind);

/** The kind of a node by its agent_type: a built-in one, else `task`. */
export function kindOf(agentType: string): KindRules {
  return KINDS.get(agentType) ?? task;
}

/**
 * Why a node of this kind may not read `secrets.NAME` in its payload, or null when it may
 * (DESIGN §12): agents' kinds (http, llm, an agent's `task`) get their payload at dispatch;
 * the engine's kinds and the aggregator store theirs or pass it on, so a secret would only be
 * its placeholder there.
 */
export function secretsRefusal(kind: KindRules): string | null {
  if (kind.start === "agent" && kind !== aggregator) return null;
  return `${withArticle(kind.name)} node's payload cannot hold secrets: they go only to agents (http, llm, or an agent that declares them)`;
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
  return node.kind.undoes?.(node.def.payload as Json) ? node.kind.name : null;
}
