/**
 * Child runs of `workflow` nodes (DESIGN §11.1), in the flush's transaction: the children that
 * ready visits asked for are started (`startChildren`), a child that ended gives its result to
 * the parent attempt it is, and a child whose parent attempt ended (cancel, TTL, a failure
 * elsewhere, `$end`, a loop reset, its timeout) is cancelled (`settleChildren`). Both sides are
 * written in the same transaction; a parent another engine holds right now is found again by
 * the sweep (`tx.settledChildren`, `tx.orphanedChildren`).
 */

import { attemptOf, holds, visitAttempt } from "../../../core/attempt.js";
import { budgetOf, parentLink } from "../../../core/budget.js";
import { MAP_HOLDER } from "../../../core/kinds/map.js";
import { CHILD_HOLDER, childOf } from "../../../core/kinds/workflow.js";
import {
  endRun,
  errorJson,
  event,
  executionId,
  failVisit,
  nodeOf,
  type RunState,
  startRunState,
} from "../../../core/scheduler.js";
import { scopeAllows } from "../../../core/scope.js";
import type { Json, Visit, VisitError } from "../../../core/types.js";
import { MAX_CHILD_DEPTH } from "../../../definition/kinds/workflow.js";
import { NotFoundError } from "../../../errors.js";
import { uuidv7 } from "../../../ids.js";
import { canonicalJson } from "../../json.js";
import { runRow } from "../../run-start.js";
import { OUT_OF_SCOPE, outOfScopeMessage } from "../../scope.js";
import { treeRefusal } from "../bounded-work.js";
import { budgetStops } from "../budget.js";
import { childKey, KEY_TAKEN, ownRunProblem } from "../engine-keys.js";
import type { Flush } from "../flush.js";
import { advanceMaps, cancelItems, defer, settleItem } from "./maps.js";

const FINAL = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);

/** Starts the child runs ready `workflow` visits asked for (or fails their visits); true when there were any. */
export function startChildren(f: Flush): Promise<boolean> {
  return f.eachAsked(
    (rs) => rs.changes.children,
    (rs, v) => startChild(f, rs, v),
  );
}

async function startChild(f: Flush, rs: RunState, v: Visit): Promise<boolean> {
  const p = (v.payload ?? {}) as { workflow_id: string; version?: number | null; input?: Json };
  const depth = (rs.run.parent?.depth ?? 0) + 1;
  if (depth > MAX_CHILD_DEPTH) {
    const message = `a child run may not start another past depth ${MAX_CHILD_DEPTH}: run ${rs.run.run_id} is at depth ${depth - 1}; is the workflow calling itself without end?`;
    failVisit(rs, v, "child_depth_exceeded", { message, reason: "child_depth_exceeded" }, f.now);
    return false;
  }
  // A child outside the run's scope is never started (DESIGN §13.1): not retried, as a retry would start the same.
  if (!scopeAllows(rs.run.scope, p.workflow_id)) {
    const message = outOfScopeMessage(p.workflow_id, rs.run.scope ?? []);
    failVisit(rs, v, OUT_OF_SCOPE, { message, reason: OUT_OF_SCOPE }, f.now);
    return false;
  }
  // A run (or a run above it) at its budget starts no child: the child's work would count toward it.
  if (await budgetStops(f, rs, v)) return false;
  if (f.startsLeft <= 0) {
    defer(f); // this flush started enough: it stays ready for the next (bounded-work.ts)
    return false;
  }
  let workflow: Awaited<ReturnType<typeof f.o.registry.get>>;
  try {
    workflow = await f.o.registry.get(p.workflow_id, p.version ?? undefined);
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
    failVisit(rs, v, "unknown_workflow", { message: e.message, reason: "unknown_workflow" }, f.now);
    return false;
  }
  const input = (p.input ?? {}) as Json;
  const problems = workflow.checkInput(input);
  if (problems.length > 0) {
    const detail = problems.map((x) => `${x.path}: ${x.message}`).join("; ");
    const message = `payload.input does not match the input_schema of ${workflow.id}: ${detail}`;
    failVisit(rs, v, "template_error", { message, reason: "template_error" }, f.now);
    return false;
  }
  // The attempt, then the child that is it: the same transaction writes both.
  const run_id = uuidv7(f.now);
  const a = visitAttempt(rs, v);
  a.claim(`${CHILD_HOLDER}${run_id}`, f.now);
  v.lease_expires_at = v.deadline_at; // no heartbeats: the node's timeout caps the child's whole run
  const key = childKey(v);
  const parent = parentLink(rs.run, v);
  const existing = f.newRuns.find((r) => r.idempotency_key === key) ?? (await f.tx.runByIdempotencyKey(key));
  // A run under the engine's key that is not this attempt's child is never bound to it: the visit fails, saying whose it is.
  const foreign = existing ? ownRunProblem(existing, key, { parent }) : null;
  if (foreign) {
    failVisit(rs, v, KEY_TAKEN, { message: foreign, reason: KEY_TAKEN }, f.now);
    return false;
  }
  if (existing) {
    v.holder = `${CHILD_HOLDER}${existing.run_id}`;
    return false;
  }
  const tooMany = await treeRefusal(f, rs.run, 1);
  if (tooMany) {
    a.failForGood("tree_limit", tooMany, f.now, f.o.random);
    return false;
  }
  f.startsLeft -= 1;
  const run = runRow(workflow, canonicalJson(input), {
    run_id,
    traceparent: f.o.spans.startChildRun(rs.run, v, run_id), // its spans nest under its skein.child_run span
    idempotency_key: key,
    parent,
    budget: budgetOf(workflow.definition.budget),
    scope: rs.run.scope, // the root's, inherited
    now: f.now,
  });
  const child = startRunState(run, workflow.graph, f.now);
  f.newRuns.push(child.run);
  f.states.set(run_id, child);
  // In the parent's history (DESIGN §9); a child found under its key above was started, with its event, before.
  event(rs, "child.started", v, f.now, { run_id, attempt: v.attempt });
  return true;
}

/**
 * Children whose parent attempt ended are cancelled (compensating when the parent's ending
 * compensates); children that ended give their result to the parent attempt. True when it
 * changed anything (the caller plans compensations and claims again).
 */
export async function settleChildren(f: Flush): Promise<boolean> {
  let changed = false;
  const orphans: { run_id: string; compensate: boolean }[] = [];
  for (const rs of [...f.states.values()]) {
    for (const v of rs.changes.cancelled) {
      const child = childOf(v.holder);
      if (child) orphans.push({ run_id: child, compensate: rs.changes.undo });
      else if (v.holder === MAP_HOLDER) await cancelItems(f, rs, v);
    }
  }
  orphans.push(...f.orphanedChildren.splice(0));
  for (const { run_id, compensate } of orphans) {
    if (f.cancelledChildren.has(run_id)) continue;
    const child = await f.load(run_id);
    if (!child || child.run.ended_at !== null) continue;
    f.cancelledChildren.add(run_id);
    const error = { message: "the parent attempt this child run is ended", reason: "cancelled" };
    endRun(child, "cancelled", error, f.now, { compensate });
    changed = true;
  }
  for (const rs of [...f.states.values()]) {
    const parent = rs.run.parent;
    if (!parent || !rs.changes.ended || !FINAL.has(rs.run.status) || f.settledChildren.has(rs.run.run_id)) continue;
    if (await settle(f, rs)) changed = true;
  }
  if (await advanceMaps(f)) changed = true;
  return changed;
}

/** Gives an ended child's result to its parent attempt; false when the parent is busy elsewhere. */
export async function settle(f: Flush, child: RunState): Promise<boolean> {
  const parent = child.run.parent;
  if (!parent) return false;
  if (parent.item !== undefined) return settleItem(f, child);
  const prs = await f.load(parent.run_id);
  if (!prs) return false;
  f.settledChildren.add(child.run.run_id);
  const run = child.run;
  // The parent's history says how its child ended, whether or not the attempt still waits for it (a cancelled parent).
  event(prs, "child.ended", parent, f.now, {
    run_id: run.run_id,
    attempt: parent.attempt,
    status: run.status,
    error: run.error ? errorJson(run.error) : null,
  });
  const a = attemptOf(prs, executionId(parent.run_id, parent.node_id, parent.visit));
  if (a?.kind !== "visit") return true;
  if (!holds(a, parent.attempt) || childOf(a.row.holder) !== child.run.run_id) {
    // The attempt ended before its child (cancelled, timed out): the child no longer holds it.
    if (a.current) a.returned(parent.attempt, f.now); // compensation, which waits for it, may start
    return true;
  }
  if (run.status === "SUCCEEDED") {
    const node = nodeOf(prs, parent.node_id);
    a.succeed(run.output, { kind: "targets", targets: [...node.successTargets] }, f.now);
    return true;
  }
  const why = run.error ? `: ${run.error.message}` : "";
  a.fail(
    {
      message: `child run ${run.run_id} of ${run.workflow_id} ${run.status === "FAILED" ? "failed" : "was cancelled"}${why}`,
      reason: "child_failed",
      details: { run_id: run.run_id, status: run.status, error: (run.error ?? null) as Json },
    },
    // Retrying cannot help a child that went past the depth or tree limit: every retry would again.
    !causedBy(run.error, "child_depth_exceeded") && !causedBy(run.error, "tree_limit"),
    f.now,
    f.o.random,
  );
  return true;
}

/** The error, or a child's error it carries (`details.error`, nested), has this reason. */
function causedBy(error: VisitError | null, reason: string): boolean {
  for (let e: unknown = error, depth = 0; e && typeof e === "object" && depth <= MAX_CHILD_DEPTH + 1; depth++) {
    const x = e as { reason?: unknown; details?: { error?: unknown } };
    if (x.reason === reason) return true;
    e = x.details?.error;
  }
  return false;
}

/**
 * What the flush that ended a child or its parent could not do because the other run was busy
 * in another engine's transaction (or a crash came between): found by the sweep.
 */
export async function sweepChildren(f: Flush, limit: number): Promise<void> {
  for (const runId of await f.tx.childrenToSettle(limit)) {
    const child = await f.load(runId);
    if (child && !f.settledChildren.has(runId)) await settle(f, child);
  }
  for (const runId of await f.tx.mapItemsToSettle(limit)) {
    const child = await f.load(runId);
    if (child && !f.settledChildren.has(runId)) await settle(f, child);
  }
  await advanceMaps(f);
  for (const runId of await f.tx.orphanedChildren(limit)) {
    const child = await f.load(runId);
    const parent = child?.run.parent ? await f.load(child.run.parent.run_id) : undefined;
    if (!child || !parent) continue;
    const cause = parent.run.end_cause;
    f.orphanedChildren.push({ run_id: runId, compensate: cause === "failed" || cause === "ttl" });
  }
}
