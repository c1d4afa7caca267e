/**
 * The node-kind table: one module per built-in kind (DESIGN §11). Everything that depends on a
 * node's kind asks here (or `CompiledNode.kind`); see kind.ts for the interface and how to add one.
 */

import type { CompiledNode } from "../../definition/graph.js";
import type { Json } from "../types.js";
import { aggregator } from "./aggregator.js";
import { http } from "./http.js";
import { humanReview } from "./human-review.js";
import type { NodeKind } from "./kind.js";
import { llm } from "./llm.js";
import { MAP_HOLDER, map, undoesItems } from "./map.js";
import { sleep } from "./sleep.js";
import { task } from "./task.js";
import { waitEvent } from "./wait-event.js";
import { workflow } from "./workflow.js";

export type { KindChecks, NodeKind } from "./kind.js";

const BUILTIN: ReadonlyMap<string, NodeKind> = new Map(
  [aggregator, http, humanReview, llm, map, sleep, waitEvent, workflow].map((k) => [k.name, k]),
);

/** The built-in agent types (reserved names). */
export const BUILTIN_KINDS: readonly string[] = [...BUILTIN.keys()];

/** The kind of a node by its agent_type: a built-in one, else `task`. */
export function kindOf(agentType: string): NodeKind {
  return BUILTIN.get(agentType) ?? task;
}

/** Built-in agent types the engine starts itself (no agent, no concurrency limit). */
export const ENGINE_STARTED: readonly string[] = [...BUILTIN.values()]
  .filter((k) => k.start === "engine")
  .map((k) => k.name);

/** Built-in kinds with an in-process agent of their own (createEngine registers it unless given one). */
export const BUILTIN_HANDLERS = [...BUILTIN.values()].filter(
  (k): k is NodeKind & Required<Pick<NodeKind, "handler">> => k.handler !== undefined,
);

/**
 * Why a node of this kind may not read `secrets.NAME` in its payload, or null when it may
 * (DESIGN §12): agents' kinds (http, llm, an agent's `task`) get their payload at dispatch;
 * the engine's kinds and the aggregator store theirs or pass it on, so a secret would only be
 * its placeholder there.
 */
export function secretsRefusal(kind: NodeKind): string | null {
  if (kind.start === "agent" && kind !== aggregator) return null;
  return `a ${kind.name} node's payload cannot hold secrets: they go only to agents (http, llm, or an agent that declares them)`;
}

/** Whether a node of this kind gets secrets only when its agent declares them (`defineAgent({ secrets })`). */
export function needsDeclaredSecrets(kind: NodeKind): boolean {
  return kind === task;
}

/**
 * Who undoes a visit of this node when its run fails (DESIGN §6): its `compensation`'s agent
 * type, `map` for a map whose items declare one (the engine undoes the items, newest first),
 * or null when nothing does.
 */
export function undoAgent(node: Pick<CompiledNode, "def" | "kind">): string | null {
  if (node.def.compensation) return node.def.compensation.agent_type;
  return node.kind === map && undoesItems(node.def.payload as Json) ? MAP_HOLDER : null;
}
