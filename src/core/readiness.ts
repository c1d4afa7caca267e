/**
 * Readiness of one PENDING visit (DESIGN §4), as a pure function of the current visits of the
 * nodes it depends on and of the nodes whose forward edges lead to it.
 */
import type { CompiledNode } from "../definition/graph.js";
import { isTerminal } from "./states.js";
import type { Visit } from "./types.js";

export type Readiness =
  | { kind: "ready"; trigger: Visit | null }
  | { kind: "wait"; trigger: Visit | null }
  | { kind: "skip"; reason: "branch_not_taken" | "dependency_unmet" };

/** `current(id)` returns the current visit of a node; every node of a run has one. */
export function readiness(node: CompiledNode, visit: Visit, current: (nodeId: string) => Visit): Readiness {
  // Activation: free nodes always are; gated ones by a fired forward edge or the loop-back that made them.
  let trigger: Visit | null = null;
  let undecided = false;
  if (node.gated) {
    for (const source of node.incomingForward) {
      const s = current(source);
      if (s.fired?.includes(node.id)) {
        trigger = s;
        break;
      }
      if (!isTerminal(s.state)) undecided = true;
    }
  }
  const activated = !node.gated || visit.loop_activated || trigger !== null;

  const deps = joinVerdict(node, current);
  if (deps === "never") return { kind: "skip", reason: "dependency_unmet" };
  if (!activated) return undecided ? { kind: "wait", trigger } : { kind: "skip", reason: "branch_not_taken" };
  return deps === "met" ? { kind: "ready", trigger } : { kind: "wait", trigger };
}

/** Whether the node's `depends_on` meet its `join` rule now, may later, or never can. */
export function joinVerdict(node: CompiledNode, current: (nodeId: string) => Visit): "met" | "wait" | "never" {
  let allTerminal = true;
  let anySucceeded = false;
  let anyUnsuccessful = false;
  for (const dep of node.depends_on) {
    const state = current(dep).state;
    if (!isTerminal(state)) allTerminal = false;
    else if (state === "SUCCEEDED") anySucceeded = true;
    else anyUnsuccessful = true;
  }
  switch (node.join) {
    case "all":
      if (anyUnsuccessful) return "never";
      return allTerminal ? "met" : "wait";
    case "any":
      if (!allTerminal) return "wait";
      return anySucceeded || node.depends_on.length === 0 ? "met" : "never";
    case "all_done":
      return allTerminal ? "met" : "wait";
  }
}
