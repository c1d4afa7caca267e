/**
 * `aggregator`: `{ <source>: output }` of its SUCCEEDED sources. Inline (in the transaction)
 * when its edges need no expression; otherwise the engine's built-in handler runs it.
 */
import type { CompiledNode } from "../../definition/graph.js";
import type { NodeDefinition } from "../../definition/schema.js";
import { NonRetryableError, type Problem } from "../../errors.js";
import { claim, currentVisit, ENGINE_HOLDER, failAttempt, type RunState, succeed } from "../scheduler.js";
import type { Json } from "../types.js";
import type { NodeKind } from "./kind.js";

export const aggregator: NodeKind = {
  name: "aggregator",
  start: "agent",
  retries: true,
  validate(node, checks) {
    if (!("sources" in node.payload)) return [];
    const sources = node.payload.sources;
    const path = `${checks.at}.payload.sources`;
    if (!Array.isArray(sources) || !sources.every((s) => typeof s === "string")) {
      return [{ path, message: "must be a list of node ids" }];
    }
    const problems: Problem[] = [];
    sources.forEach((id: string, k) => {
      const unknown = checks.unknownNode(`${path}[${k}]`, id);
      if (unknown) problems.push(unknown);
      else if (!node.depends_on.includes(id)) {
        problems.push({
          path: `${path}[${k}]`,
          message: `source "${id}" is not in depends_on: an aggregator collects only nodes it waits for; add it to depends_on`,
        });
      }
    });
    return problems;
  },
  sources: aggregatorSources,
  // For nodes that branch on its output (others run inline), with the inline one's limit and message.
  handler:
    ({ maxOutputBytes }) =>
    (task) => {
      const payload = task.payload as { sources?: string[] } | null;
      const sources = payload?.sources ?? Object.keys(task.deps);
      const out: Record<string, Json> = {};
      for (const s of sources) {
        const dep = task.deps[s];
        if (dep?.status === "SUCCEEDED") out[s] = dep.output;
      }
      const tooLarge = oversizedAggregate(out, maxOutputBytes);
      if (tooLarge) throw new NonRetryableError(tooLarge);
      return out;
    },
  inline(rs, node, v, now) {
    if (node.def.decide !== undefined || !(node.successCases ?? []).every((c) => c.when === null)) return false;
    claim(rs, v, ENGINE_HOLDER, now);
    const output = aggregate(rs, node);
    const tooLarge = oversizedAggregate(output, rs.graph.maxOutputBytes);
    if (tooLarge) failAttempt(rs, v, { message: tooLarge, reason: "invalid_output" }, false, now);
    else succeed(rs, v, output, { kind: "targets", targets: [...node.successTargets] }, now);
    return true;
  },
};

/** `payload.sources` when it is a list of ids (validation checks it), else depends_on. */
function aggregatorSources(node: NodeDefinition): string[] {
  const sources = node.payload.sources;
  if (Array.isArray(sources) && sources.every((s) => typeof s === "string")) {
    return [...new Set(sources as string[])];
  }
  return [...new Set(node.depends_on)];
}

/** The built-in aggregator's output: `{ <source>: output }` of its SUCCEEDED sources. */
export function aggregate(rs: RunState, node: CompiledNode): Json {
  const out: Record<string, Json> = {};
  for (const source of node.sources) {
    const s = currentVisit(rs, source);
    if (s.state === "SUCCEEDED") out[source] = s.output;
  }
  return out;
}

/**
 * Why an aggregator's output is refused, or null: it obeys the limit of every agent's output
 * (each source kept it, but together they may not: 50 sources of 1 MB make 50 MB).
 */
export function oversizedAggregate(output: Json, maxBytes: number): string | null {
  const bytes = Buffer.byteLength(JSON.stringify(output));
  if (bytes <= maxBytes) return null;
  return `the aggregator's output is ${bytes} bytes, over the limit of ${maxBytes} (maxPayloadBytes): list fewer sources in payload.sources, or have the sources return references to their large data`;
}
