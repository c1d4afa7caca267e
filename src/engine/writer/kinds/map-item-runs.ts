/**
 * The run a `map` item starts (DESIGN §11.1), made in the flush that starts it:
 *
 * - `each: { agent_type, payload }`: a run of the map's item workflow (`<workflow_id>/<node_id>`,
 *   one node: the agent, with the map node's retry settings and timeout), its input the item.
 * - `each: { workflow_id, input }`: a run of that workflow itself, the map run's child (one
 *   level: `parent.item` is the index), its input `each.input` resolved for the item (templates
 *   see `item` and `index`; default the item) and checked against the workflow's input_schema.
 *   The map node's `timeout` caps the child's whole run, as a `workflow` node's does; the child's
 *   own nodes have their own retries (the map starts one run per item and attempt of the map).
 *
 * An item whose run cannot be made (its input, an unknown workflow or version) fails without a
 * run, with the reason and message a `workflow` node would have failed with.
 */
import { budgetOf, parentLink } from "../../../core/budget.js";
import { nodeOf, type RunState } from "../../../core/scheduler.js";
import type { Json, Run, Visit, VisitError } from "../../../core/types.js";
import type { CompiledPayload, ExpressionContext } from "../../../definition/expressions.js";
import { mapPayload } from "../../../definition/kinds/map.js";
import { workflow as workflowKind } from "../../../definition/kinds/workflow.js";
import { NotFoundError } from "../../../errors.js";
import { canonicalJson, jsonProblem } from "../../json.js";
import { itemWorkflowId, type LoadedWorkflow } from "../../registry.js";
import { runRow } from "../../run-start.js";
import type { FlushContext } from "../context.js";
import { itemKey } from "../engine-keys.js";

/**
 * The run an item starts with the workflow it runs and the latest it may end (`deadline_at`: the
 * map run's TTL, and a child workflow's cap), or why it starts none (the item fails).
 */
export type ItemRun = { run: Run; workflow: LoadedWorkflow; deadline_at: number } | { error: VisitError };

/**
 * Makes the runs of a map visit's items (`run_id`: the new run's id); nothing is written here.
 * Synchronous for agent items: a window of them is made without yielding, as before workflow items had their own path.
 */
export type ItemRunMaker = (row: { index: number; item: Json }, run_id: string) => ItemRun | Promise<ItemRun>;

/** The maker of the item runs of map visit `v` (once per window of items started). */
export async function itemRunMaker(f: FlushContext, rs: RunState, v: Visit): Promise<ItemRunMaker> {
  const itemWorkflow = await f.o.registry.get(itemWorkflowId(rs.run.workflow_id, v.node_id), rs.run.workflow_version);
  const fields = (index: number, run_id: string) => ({
    run_id,
    traceparent: rs.run.traceparent,
    idempotency_key: itemKey(v, index),
    parent: parentLink(rs.run, v, index),
    scope: rs.run.scope, // the root's, inherited
    tags: rs.run.tags,
    priority: rs.run.priority, // inherited, as its tags
    now: f.now,
  });
  if (!("workflow_id" in mapPayload(v.payload).each)) {
    return (row, run_id) => ({
      run: runRow(itemWorkflow, canonicalJson(row.item), { ...fields(row.index, run_id), budget: null }),
      workflow: itemWorkflow,
      deadline_at: rs.run.deadline_at,
    });
  }
  // The item workflow's one node is the `workflow` node `each` makes: its payload template is `each` compiled.
  const template = itemWorkflow.graph.nodes.get(v.node_id)?.payload ?? null;
  const written = (itemWorkflow.graph.nodes.get(v.node_id)?.def.payload ?? {}) as Json;
  const deadline_at = Math.min(rs.run.deadline_at, f.now + nodeOf(rs, v.node_id).timeout * 1000);
  const workflows = new Map<string, Promise<LoadedWorkflow>>(); // by version asked, for this window
  return async (row, run_id) => {
    const resolved = await resolveEach(f, rs, template, written, row);
    if ("error" in resolved) return resolved;
    const { workflow_id, version, input } = resolved.payload;
    const asked = `${version ?? "latest"}`;
    let loading = workflows.get(asked);
    if (!loading) {
      loading = f.o.registry.get(workflow_id, version ?? undefined);
      workflows.set(asked, loading);
    }
    let workflow: LoadedWorkflow;
    try {
      workflow = await loading;
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
      return { error: { message: e.message, reason: "unknown_workflow" } };
    }
    const problems = workflow.checkInput(input);
    if (problems.length > 0) {
      const detail = problems.map((x) => `${x.path}: ${x.message}`).join("; ");
      const message = `each.input of item ${row.index} does not match the input_schema of ${workflow.id}: ${detail}`;
      return { error: { message, reason: "template_error" } };
    }
    const run = runRow(workflow, canonicalJson(input), {
      ...fields(row.index, run_id),
      budget: budgetOf(workflow.definition.budget),
    });
    return { run, workflow, deadline_at };
  };
}

/** `each` of a map of workflows resolved for one item: its templates see `item` and `index` (and `input`, the item). */
async function resolveEach(
  f: FlushContext,
  rs: RunState,
  template: CompiledPayload | null,
  written: Json,
  row: { index: number; item: Json },
): Promise<{ payload: { workflow_id: string; version: number | null; input: Json } } | { error: VisitError }> {
  const failed = (message: string) => ({
    error: { message: `each of item ${row.index}: ${message}`, reason: "template_error" },
  });
  let value: unknown = written;
  if (template) {
    // A child run's input is stored as it is: a secret read into it would be written in clear.
    if (template.secretNames.length > 0) {
      return failed(
        `reads secrets (${template.secretNames.join(", ")}), which a child run's input cannot hold: read them in the child workflow's own nodes`,
      );
    }
    const ctx: ExpressionContext = {
      input: row.item,
      nodes: {},
      run: { run_id: rs.run.run_id, trace_id: rs.run.trace_id },
      item: row.item,
      index: row.index,
    };
    try {
      value = await template.resolve(ctx);
    } catch (e) {
      return failed(e instanceof Error ? e.message : String(e));
    }
  }
  const problem = jsonProblem(value, "payload");
  if (problem) return failed(`${problem}; use plain objects, arrays, strings, numbers, booleans or null`);
  const text = JSON.stringify(value);
  if (Buffer.byteLength(text) > f.o.maxOutputBytes) {
    return failed(
      `the resolved input is ${Buffer.byteLength(text)} bytes, over the limit of ${f.o.maxOutputBytes}; pass a reference to large data instead`,
    );
  }
  const payload = JSON.parse(text) as { workflow_id: string; version?: number | null; input?: Json };
  const refused = workflowKind.checkResolved?.(payload) ?? null;
  if (refused) return failed(refused);
  return {
    payload: { workflow_id: payload.workflow_id, version: payload.version ?? null, input: payload.input ?? {} },
  };
}
