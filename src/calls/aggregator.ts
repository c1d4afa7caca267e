/**
 * The aggregator's built-in in-process agent (DESIGN §11): `{ <source>: output }` of its
 * SUCCEEDED sources, for aggregator nodes whose edges branch on its output (the others run
 * inline in the scheduler, core/kinds/aggregator.ts), with the inline one's limit and message.
 */
import type { AgentHandler } from "../agents/task.js";
import { oversizedAggregate } from "../definition/kinds/aggregator.js";
import { NonRetryableError } from "../errors.js";
import type { Json } from "../json-text.js";

/** The handler createEngine registers for `aggregator` unless it is given one. */
export function aggregatorHandler({ maxOutputBytes }: { maxOutputBytes: number }): AgentHandler {
  return (task) => {
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
  };
}
