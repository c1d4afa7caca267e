/**
 * `aggregator`: `{ <source>: output }` of its SUCCEEDED sources. Inline (in the transaction,
 * core/kinds/aggregator.ts) when its edges need no expression; otherwise the engine's built-in
 * handler (calls/aggregator.ts) runs it. Its rules: which sources, and how large the output may be.
 */
import type { Problem } from "../../errors.js";
import type { Json } from "../../json-text.js";
import type { NodeDefinition } from "../schema.js";
import type { KindRules } from "./kind.js";

export const aggregator: KindRules = {
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
};

/** `payload.sources` when it is a list of ids (validation checks it), else depends_on. */
function aggregatorSources(node: NodeDefinition): string[] {
  const sources = node.payload.sources;
  if (Array.isArray(sources) && sources.every((s) => typeof s === "string")) {
    return [...new Set(sources as string[])];
  }
  return [...new Set(node.depends_on)];
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
