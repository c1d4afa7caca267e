/**
 * `aggregator`'s states: inline (in the transaction) when its edges need no expression, so it
 * costs no attempt; otherwise its built-in handler (calls/aggregator.ts) runs it as an agent.
 */
import type { CompiledNode } from "../../definition/graph.js";
import { oversizedAggregate } from "../../definition/kinds/aggregator.js";
import { claim, currentVisit, ENGINE_HOLDER, type RunState } from "../run-state.js";
import type { Json } from "../types.js";
import type { KindStates } from "./kind.js";

export const aggregator: KindStates = {
  inline(rs, node, v, now, moves) {
    if (node.def.decide !== undefined || !(node.successCases ?? []).every((c) => c.when === null)) return false;
    claim(rs, v, ENGINE_HOLDER, now);
    const output = aggregate(rs, node);
    const tooLarge = oversizedAggregate(output, rs.graph.maxOutputBytes);
    if (tooLarge) moves.failAttempt(rs, v, { message: tooLarge, reason: "invalid_output" }, false, now);
    else moves.succeed(rs, v, output, { kind: "targets", targets: [...node.successTargets] }, now);
    return true;
  },
};

/** The built-in aggregator's output: `{ <source>: output }` of its SUCCEEDED sources. */
export function aggregate(rs: RunState, node: CompiledNode): Json {
  const out: Record<string, Json> = {};
  for (const source of node.sources) {
    const s = currentVisit(rs, source);
    if (s.state === "SUCCEEDED") out[source] = s.output;
  }
  return out;
}
