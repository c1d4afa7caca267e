/**
 * Child runs (DESIGN §11.1), in the flush's transaction. `Children` is the `workflow` kind's
 * step: the children that ready visits asked for are started (`start`), a child that ended gives
 * its result to the parent attempt it is (`childEnded`). It also keeps the child runs of every
 * kind (`ChildRuns`): a run that ended gives its end to its parent's kind step (`settle`), and a
 * child whose parent attempt ended (cancel, TTL, a failure elsewhere, `$end`, a loop reset, its
 * timeout) is cancelled (`round`). Both sides are written in the same transaction; a parent
 * another engine holds right now is found again by the sweep (`tx.childrenToSettle`,
 * `tx.orphanedChildren`).
 */

import { attemptOf, holds, visitAttempt } from "../../../core/attempt.js";
import { budgetOf, parentLink } from "../../../core/budget.js";
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
import type { Budget } from "../budget.js";
import type { FlushContext } from "../context.js";
import { childKey, KEY_TAKEN, ownRunProblem } from "../engine-keys.js";
import type { ChildRuns, KindStep } from "./step.js";

const FINAL = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);

/** The `workflow` kind's step, and the child runs of every kind. */
export class Children implements KindStep, ChildRuns {
  /** Children of visits cancelled in this round (`cancelled`): cancelled first. */
  private readonly ofCancelled: { run_id: string; compensate: boolean }[] = [];
  /** Child runs to cancel whose parent attempt ended otherwise (its timeout, a map's items): by `cancel`. */
  private readonly orphaned: { run_id: string; compensate: boolean }[] = [];
  /** Child runs this flush cancelled, and those whose end it gave to their parent. */
  private readonly cancelledRuns = new Set<string>();
  private readonly settledRuns = new Set<string>();

  constructor(
    private readonly f: FlushContext,
    private readonly budget: Budget,
    /** The kind steps by kind name: a child's end goes to its parent node's. */
    private readonly steps: ReadonlyMap<string, KindStep>,
    /** No room left to start runs: ready visits that start runs wait for the next flush. */
    private readonly defer: () => void,
  ) {}

  /** Starts the child run a ready `workflow` visit asked for (or fails its visit). */
  async start(rs: RunState, v: Visit): Promise<boolean> {
    const f = this.f;
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
    if (await this.budget.stops(rs, v)) return false;
    if (f.work.startsLeft <= 0) {
      this.defer(); // this flush started enough: it stays ready for the next (bounded-work.ts)
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
    const tooMany = await treeRefusal(f.tx, f.o.maxRunsPerTree, rs.run, 1);
    if (tooMany) {
      a.failForGood("tree_limit", tooMany, f.now, f.o.random);
      return false;
    }
    f.work.startsLeft -= 1;
    const run = runRow(workflow, canonicalJson(input), {
      run_id,
      traceparent: f.o.spans.startChildRun(rs.run, v, run_id), // its spans nest under its skein.child_run span
      idempotency_key: key,
      parent,
      budget: budgetOf(workflow.definition.budget),
      scope: rs.run.scope, // the root's, inherited
      now: f.now,
    });
    f.addRun(startRunState(run, workflow.graph, f.now));
    // In the parent's history (DESIGN §9); a child found under its key above was started, with its event, before.
    event(rs, "child.started", v, f.now, { run_id, attempt: v.attempt });
    return true;
  }

  /** A cancelled `workflow` visit: its child run is cancelled, compensating when the run's ending compensates. */
  async cancelled(rs: RunState, v: Visit): Promise<void> {
    const child = childOf(v.holder);
    if (child) this.ofCancelled.push({ run_id: child, compensate: rs.changes.undo });
  }

  cancel(runId: string, compensate: boolean): void {
    this.orphaned.push({ run_id: runId, compensate });
  }

  settled(runId: string): boolean {
    return this.settledRuns.has(runId);
  }

  /**
   * Children whose parent attempt ended are cancelled (compensating when the parent's ending
   * compensates); children that ended give their result to their parent. True when it changed
   * anything (the flush plans compensations and claims again).
   */
  async round(): Promise<boolean> {
    const f = this.f;
    let changed = false;
    // Each kind stops the work of its cancelled visits (a child run here, a map's items).
    for (const rs of [...f.states.values()]) {
      for (const v of rs.changes.cancelled) {
        const step = this.steps.get(v.agent_type);
        if (step) await step.cancelled(rs, v);
      }
    }
    const orphans = this.ofCancelled.splice(0);
    orphans.push(...this.orphaned.splice(0));
    for (const { run_id, compensate } of orphans) {
      if (this.cancelledRuns.has(run_id)) continue;
      const child = await f.load(run_id);
      if (!child || child.run.ended_at !== null) continue;
      this.cancelledRuns.add(run_id);
      const error = { message: "the parent attempt this child run is ended", reason: "cancelled" };
      endRun(child, "cancelled", error, f.now, { compensate });
      changed = true;
    }
    for (const rs of [...f.states.values()]) {
      const parent = rs.run.parent;
      if (!parent || !rs.changes.ended || !FINAL.has(rs.run.status) || this.settledRuns.has(rs.run.run_id)) continue;
      if (await this.settle(rs)) changed = true;
    }
    return changed;
  }

  /** Gives an ended child's end to its parent node's kind step; false when the parent is busy elsewhere. */
  async settle(child: RunState): Promise<boolean> {
    const parent = child.run.parent;
    if (!parent) return false;
    const prs = await this.f.load(parent.run_id);
    if (!prs) return false;
    this.settledRuns.add(child.run.run_id);
    const kind = prs.graph.nodes.get(parent.node_id)?.kind.name;
    const step = kind === undefined ? undefined : this.steps.get(kind);
    if (step) await step.childEnded(prs, child);
    return true;
  }

  /** Gives an ended child's result to the `workflow` attempt it is (`prs`: the attempt's run). */
  async childEnded(prs: RunState, child: RunState): Promise<void> {
    const f = this.f;
    const run = child.run;
    const parent = run.parent;
    if (!parent) return;
    // The parent's history says how its child ended, whether or not the attempt still waits for it (a cancelled parent).
    event(prs, "child.ended", parent, f.now, {
      run_id: run.run_id,
      attempt: parent.attempt,
      status: run.status,
      error: run.error ? errorJson(run.error) : null,
    });
    const a = attemptOf(prs, executionId(parent.run_id, parent.node_id, parent.visit));
    if (a?.kind !== "visit") return;
    if (!holds(a, parent.attempt) || childOf(a.row.holder) !== run.run_id) {
      // The attempt ended before its child (cancelled, timed out): the child no longer holds it.
      if (a.current) a.returned(parent.attempt, f.now); // compensation, which waits for it, may start
      return;
    }
    if (run.status === "SUCCEEDED") {
      const node = nodeOf(prs, parent.node_id);
      a.succeed(run.output, { kind: "targets", targets: [...node.successTargets] }, f.now);
      return;
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
  }

  /**
   * What the flush that ended a child or its parent could not do because the other run was busy
   * in another engine's transaction (or a crash came between): found by the sweep.
   */
  async sweep(limit: number): Promise<void> {
    const f = this.f;
    for (const runId of await f.tx.childrenToSettle(limit)) {
      const child = await f.load(runId);
      if (child && !this.settledRuns.has(runId)) await this.settle(child);
    }
    for (const runId of await f.tx.orphanedChildren(limit)) {
      const child = await f.load(runId);
      const parent = child?.run.parent ? await f.load(child.run.parent.run_id) : undefined;
      if (!child || !parent) continue;
      const cause = parent.run.end_cause;
      this.cancel(runId, cause === "failed" || cause === "ttl");
    }
  }
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
