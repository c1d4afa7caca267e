/**
 * `workflow` (DESIGN §11.1): the visit's attempt is a child run of `payload.workflow_id`
 * (`payload.version`, else the latest at start) with `payload.input`. `begin` only asks for
 * the child: the flush (engine/writer/kinds/children.ts) resolves the workflow, claims the visit for
 * `run:<child run id>` and inserts the child in the same transaction (idempotency key
 * `<execution_id>:<attempt>`), so a crash never starts it twice. The child's end is the result
 * of that attempt; the node's retry settings and timeout apply as to an agent's attempt.
 */
import type { Problem } from "../../errors.js";
import type { Json } from "../types.js";
import type { NodeKind } from "./kind.js";

/** How deep children may nest: a child at this depth may not start another. */
export const MAX_CHILD_DEPTH = 10;

/** The holder of an attempt held by a child run. */
export const CHILD_HOLDER = "run:";

/** The child run that holds an attempt, or null. */
export function childOf(holder: string | null): string | null {
  return holder?.startsWith(CHILD_HOLDER) ? holder.slice(CHILD_HOLDER.length) : null;
}

export const workflow: NodeKind = {
  name: "workflow",
  start: "engine",
  notClaimable: "run as child runs the engine starts",
  retries: true,
  validate(node, checks) {
    const problems: Problem[] = [];
    const payload = node.payload as Json;
    const problem = payloadProblem(payload, true);
    if (problem) problems.push({ path: `${checks.at}.payload`, message: problem });
    if (node.decide !== undefined) {
      problems.push({
        path: `${checks.at}.decide`,
        message: "a workflow node has no decide hook: its output is the child run's; decide on the node after it",
      });
    }
    const next = node.next_on_success;
    if (Array.isArray(next) && next.some((c) => typeof c === "object" && c.when !== undefined)) {
      problems.push({
        path: `${checks.at}.next_on_success`,
        message: 'a workflow node cannot branch with "when" yet: list plain targets and branch on the node after it',
      });
    }
    return problems;
  },
  checkResolved: (payload) => {
    const problem = payloadProblem(payload, false);
    return problem === null ? null : `payload ${problem}`;
  },
  begin(rs, v) {
    rs.changes.starts.add(v);
  },
};

/** What is wrong with a workflow node's payload, or null; `templates`: unresolved templates pass. */
function payloadProblem(payload: Json, templates: boolean): string | null {
  const p = payload !== null && typeof payload === "object" && !Array.isArray(payload) ? payload : {};
  const isTemplate = (x: unknown) => templates && typeof x === "string" && x.includes("{{");
  const id = p.workflow_id;
  if (typeof id !== "string" || id === "") {
    return `needs workflow_id (the id of the workflow to run as a child run), got ${JSON.stringify(id ?? null)}, e.g. { "workflow_id": "summarise", "input": { "text": "{{ input.text }}" } }`;
  }
  const version = p.version;
  if (version !== undefined && version !== null && !isTemplate(version)) {
    if (typeof version !== "number" || !Number.isInteger(version) || version < 1) {
      return `version must be a version number (an integer, 1 or more) or left out for the latest, got ${JSON.stringify(version)}`;
    }
  }
  return null;
}
