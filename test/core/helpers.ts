/** Shared set-up of the core tests: compiled graphs, hand-made runs and visits. No database. */
import type { VisitState } from "../../src/core/states.js";
import type { Run, Visit } from "../../src/core/types.js";
import { type CompiledNode, parseWorkflowOrThrow, type WorkflowGraph } from "../../src/definition/index.js";

/** A node as written in a definition; agent_type defaults to "worker". */
export type NodeInput = { node_id: string; agent_type?: string } & Record<string, unknown>;

/** Validates and compiles a workflow made of `nodes` (throws when the definition is invalid). */
export function graphOf(nodes: NodeInput[], extra: Record<string, unknown> = {}): WorkflowGraph {
  return parseWorkflowOrThrow({
    id: "core-test",
    ...extra,
    nodes: nodes.map((n) => ({ agent_type: "worker", ...n })),
  }).graph;
}

export function nodeOf(graph: WorkflowGraph, id: string): CompiledNode {
  const n = graph.nodes.get(id);
  if (!n) throw new Error(`no node ${id}`);
  return n;
}

export const RUN_ID = "run1";

/** A hand-made visit of node `node_id` in run1, visit 1 unless `extra` says otherwise. */
export function visit(node_id: string, state: VisitState = "PENDING", extra: Partial<Visit> = {}): Visit {
  const visitNo = extra.visit ?? 1;
  const runId = extra.run_id ?? RUN_ID;
  return {
    run_id: runId,
    node_id,
    visit: visitNo,
    execution_id: `${runId}:${node_id}:${visitNo}`,
    agent_type: "worker",
    state,
    is_current: true,
    loop_activated: false,
    trigger: null,
    payload: null,
    output: null,
    error: null,
    reason: null,
    handled: false,
    fired: null,
    failures: 0,
    attempt: 0,
    interruptions: 0,
    prior_starts: 0,
    ready_at: null,
    deadline_at: null,
    lease_expires_at: null,
    holder: null,
    created_at: 0,
    started_at: null,
    ended_at: null,
    items: null,
    concurrency_key: null,
    priority: 5,
    ...extra,
  };
}

/** A fresh RUNNING run, as the engine creates it before `startRunState`. */
export function makeRun(extra: Partial<Run> = {}): Run {
  return {
    run_id: RUN_ID,
    workflow_id: "core-test",
    workflow_version: 1,
    status: "RUNNING",
    input: {},
    output: null,
    error: null,
    end_cause: null,
    trace_id: "trace1",
    traceparent: "00-trace1-span1-01",
    idempotency_key: null,
    input_hash: "hash",
    needs_attention: false,
    created_at: 0,
    updated_at: 0,
    deadline_at: 86_400_000,
    ended_at: null,
    parent: null,
    schedule_id: null,
    usage: { tokens_in: 0, tokens_out: 0, cost: 0 },
    budget: null,
    scope: null,
    reserved: null,
    tags: {},
    paused: null,
    forked_from: null,
    key: null,
    queued: null,
    triggered_by: null,
    priority: 5,
    ...extra,
  };
}

/** A lookup of current visits by node id, as `readiness` and `joinVerdict` take it. */
export function lookup(...visits: Visit[]): (nodeId: string) => Visit {
  const byId = new Map(visits.map((v) => [v.node_id, v]));
  return (id) => {
    const v = byId.get(id);
    if (!v) throw new Error(`test set-up: no visit of ${id}`);
    return v;
  };
}
