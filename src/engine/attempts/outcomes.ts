/**
 * An agent's value judged, in process or reported by a worker: checked (JSON, within the size
 * limit) and its next edges decided (DESIGN §4), giving the attempt's result. Expressions
 * (JSONata) and decide hooks are asynchronous, so this runs outside any transaction; the writer
 * re-checks the fence when it applies the result.
 */
import type { DecideHook } from "../../agents/task.js";
import { isRouted } from "../../agents/task.js";
import { checkRoute } from "../../core/branching.js";
import type { Decision } from "../../core/scheduler.js";
import type { Json } from "../../core/types.js";
import type { CompiledNode, WorkflowGraph } from "../../definition/graph.js";
import { agent as agentRules } from "../../definition/kinds/agent.js";
import { NotFoundError, ValidationError } from "../../errors.js";
import type { Store } from "../../store/store.js";
import { jsonProblem } from "../json.js";
import type { WorkflowRegistry } from "../registry.js";
import type { AttemptRef, AttemptResult, ClaimedTask } from "../writer/inputs.js";
import { expressionContext } from "./expression-context.js";
import { errorOf } from "./handler-errors.js";

/** What judging an attempt's result needs to know of its task. */
export type ResultOf = Pick<
  ClaimedTask,
  "execution_id" | "attempt" | "run_id" | "node_id" | "trace_id" | "input" | "workflow_id" | "workflow_version"
>;

export interface OutcomesOptions {
  decideHooks: Readonly<Record<string, DecideHook>>;
  registry: WorkflowRegistry;
  store: Store;
  /** Largest accepted output or resolved payload, in bytes of JSON. */
  maxOutputBytes: number;
}

export class Outcomes {
  constructor(private readonly o: OutcomesOptions) {}

  /** A compensation's result: its output, checked like a visit's; it fires no edges. */
  compensationOutcome(at: AttemptRef, value: unknown): AttemptResult {
    const checked = this.checkOutput(at, value);
    if (!checked.ok) return checked.failure;
    return { kind: "success", ...at, output: checked.output, decision: { kind: "targets", targets: [] } };
  }

  /** An agent's output checked (JSON, within the size limit), or the failure it earns: not retried. */
  private checkOutput(
    at: AttemptRef,
    value: unknown,
  ): { ok: true; output: Json } | { ok: false; failure: AttemptResult } {
    const checked = checkJson(value === undefined ? null : value, "output", this.o.maxOutputBytes);
    if (checked.ok) return { ok: true, output: checked.value };
    const error = { message: checked.problem, reason: "invalid_output" };
    return { ok: false, failure: { kind: "failure", ...at, error, retryable: false } };
  }

  /** Checks an agent's value (in process or external) and works out the edge decision. */
  async outcome(t: ResultOf, value: unknown): Promise<AttemptResult> {
    const at = { execution_id: t.execution_id, attempt: t.attempt };
    const routed = isRouted(value) ? value : null;
    const checked = this.checkOutput(at, routed ? routed.output : value);
    if (!checked.ok) return checked.failure;
    const output = checked.output;
    const { graph } = await this.o.registry.get(t.workflow_id, t.workflow_version);
    const node = graph.nodes.get(t.node_id) as CompiledNode;
    const decided = await this.decide(t, graph, node, output, routed?.next ?? null);
    if ("decision" in decided) return { kind: "success", ...at, output, decision: decided.decision };
    return {
      kind: "fail_visit",
      ...at,
      reason: decided.reason,
      error: { message: decided.message, reason: decided.reason },
    };
  }

  /** The edges an approved review's output fires: the decide hook, `when` cases or the plain list. */
  async decideOutput(
    run: { run_id: string; trace_id: string; input: Json; workflow_id: string; workflow_version: number },
    nodeId: string,
    output: Json,
  ): Promise<{ decision: Decision } | { reason: string; message: string }> {
    const { graph } = await this.o.registry.get(run.workflow_id, run.workflow_version);
    const node = graph.nodes.get(nodeId);
    if (!node) throw new NotFoundError(`run ${run.run_id} has no node "${nodeId}"`);
    // An agent node's review is one tool call's approval: the visit goes on, no edge fires (core/kinds/agent.ts).
    if (node.kind === agentRules) return { decision: { kind: "none" } };
    return this.decide({ ...run, node_id: nodeId }, graph, node, output, null);
  }

  /** Branch precedence of DESIGN §4: agent route, then decide hook, then `when` cases, then the plain list. */
  private async decide(
    t: Pick<ClaimedTask, "run_id" | "node_id" | "trace_id" | "input">,
    graph: WorkflowGraph,
    node: CompiledNode,
    output: Json,
    next: string[] | null,
  ): Promise<{ decision: Decision } | { reason: string; message: string }> {
    const checked = (targets: string[], what: string) => {
      const d = checkRoute(graph, node, targets);
      return "invalid" in d ? { reason: "invalid_next", message: `${what}: ${d.invalid}` } : { decision: d };
    };
    if (next) return checked(next, "the agent's route");
    const hookName = node.def.decide;
    if (hookName !== undefined) {
      const hook = this.o.decideHooks[hookName];
      if (!hook)
        return { reason: "invalid_next", message: `decide hook "${hookName}" is not registered with this engine` };
      try {
        const ctx = await expressionContext(this.o.store, t, graph, output);
        const chosen = await hook(output, { input: t.input, run_id: t.run_id, node_id: t.node_id, nodes: ctx.nodes });
        return checked(typeof chosen === "string" ? [chosen] : [...chosen], `decide hook "${hookName}"`);
      } catch (e) {
        return { reason: "invalid_next", message: `decide hook "${hookName}" threw: ${errorOf(e).message}` };
      }
    }
    const cases = node.successCases;
    if (!cases) return { decision: { kind: "targets", targets: [] } };
    if (cases.every((c) => c.when === null))
      return { decision: { kind: "targets", targets: [...node.successTargets] } };
    const ctx = await expressionContext(this.o.store, t, graph, output);
    for (const c of cases) {
      try {
        if (c.when === null || (await c.when.test(ctx))) return checked(c.to, "the matching case");
      } catch (e) {
        return { reason: "when_error", message: errorOf(e).message };
      }
    }
    return { decision: { kind: "none" } };
  }
}

/**
 * Refuses a worker's route its node does not allow, before anything is queued: the worker is
 * there to hear it and report again, so its attempt stays held (an in-process agent's bad route
 * fails the visit `invalid_next` instead: nobody could answer it).
 * @throws ValidationError naming the node's declared targets
 */
export function refuseRoute(graph: WorkflowGraph, node: CompiledNode, next: string | string[]): void {
  const targets = typeof next === "string" ? [next] : next;
  const checked = Array.isArray(targets) ? checkRoute(graph, node, targets.map(String)) : null;
  if (checked !== null && !("invalid" in checked)) return;
  const problem = checked === null ? "must be a node id or a list of node ids" : checked.invalid;
  throw new ValidationError("Report is invalid", [
    { path: "next", message: `${problem}; the attempt is still held: report it again with an allowed route` },
  ]);
}

/** The value as it will be stored (an output or a resolved payload), or why it cannot be stored. */
export function checkJson(
  value: unknown,
  what: string,
  maxBytes: number,
): { ok: true; value: Json } | { ok: false; problem: string } {
  const problem = jsonProblem(value, what);
  if (problem) {
    return {
      ok: false,
      problem: `the ${what} is not JSON: ${problem}; use plain objects, arrays, strings, numbers, booleans or null`,
    };
  }
  const text = JSON.stringify(value);
  if (Buffer.byteLength(text) > maxBytes) {
    return {
      ok: false,
      problem: `the ${what} is ${Buffer.byteLength(text)} bytes, over the limit of ${maxBytes}; store large data elsewhere and pass a reference`,
    };
  }
  return { ok: true, value: JSON.parse(text) as Json };
}
