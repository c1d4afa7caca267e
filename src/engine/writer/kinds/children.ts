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
import type { Json, RunParent, Visit, VisitError } from "../../../core/types.js";
import { MAX_CHILD_DEPTH } from "../../../definition/kinds/workflow.js";
import { ConflictError, NonRetryableError, NotFoundError } from "../../../errors.js";
import { uuidv7 } from "../../../ids.js";
import { canonicalJson } from "../../json.js";
import { runRow } from "../../run-start.js";
import { OUT_OF_SCOPE, outOfScopeMessage } from "../../scope.js";
import { treeRefusal } from "../bounded-work.js";
import type { Budget } from "../budget.js";
import type { FlushContext } from "../context.js";
import { childKey, KEY_TAKEN, ownRunProblem, toolCallKey } from "../engine-keys.js";
import type { Input } from "../inputs.js";
import type { ChildRuns, KindStep } from "./step.js";

const FINAL = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);

/** What a child run is asked for with: a `workflow` visit's payload, an agent's tool call. */
interface ChildRequest {
  workflow_id: string;
  version?: number | null;
  input?: Json;
}
type Refusal = { reason: string; message: string };
type Workflow = Awaited<ReturnType<FlushContext["o"]["registry"]["get"]>>;

/**
 * Why a child of `workflowId` may not start from `rs` where it stands: past the depth limit, or
 * outside the run's scope (DESIGN §13.1). Neither needs a read, and a retry would start the same.
 */
function placeRefusal(rs: RunState, workflowId: string): Refusal | null {
  const depth = (rs.run.parent?.depth ?? 0) + 1;
  if (depth > MAX_CHILD_DEPTH) {
    const message = `a child run may not start another past depth ${MAX_CHILD_DEPTH}: run ${rs.run.run_id} is at depth ${depth - 1}; is the workflow calling itself without end?`;
    return { reason: "child_depth_exceeded", message };
  }
  if (!scopeAllows(rs.run.scope, workflowId)) {
    return { reason: OUT_OF_SCOPE, message: outOfScopeMessage(workflowId, rs.run.scope ?? []) };
  }
  return null;
}

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
    const p = (v.payload ?? {}) as unknown as ChildRequest;
    // Its depth and scope are checked before its budget: neither is retried, as a retry would start the same.
    const refused = placeRefusal(rs, p.workflow_id);
    if (refused) {
      failVisit(rs, v, refused.reason, { message: refused.message, reason: refused.reason }, f.now);
      return false;
    }
    // A run (or a run above it) at its budget starts no child: the child's work would count toward it.
    if (await this.budget.stops(rs, v)) return false;
    if (f.work.startsLeft <= 0) {
      this.defer(); // this flush started enough: it stays ready for the next (bounded-work.ts)
      return false;
    }
    const workflow = await this.workflowOf(p);
    if ("reason" in workflow) {
      failVisit(rs, v, workflow.reason, { message: workflow.message, reason: workflow.reason }, f.now);
      return false;
    }
    const input = (p.input ?? {}) as Json;
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
    this.add(rs, v, workflow, input, { run_id, key, parent });
    return true;
  }

  /**
   * The child run that is tool call `call` of an `agent` visit (DESIGN §14.2), asked for by the
   * attempt holding the visit: started, or found under its key (an earlier attempt started it).
   * The loop waits for its end itself: its end settles nothing here, and it lives while the
   * visit goes on (the sweep cancels it once the visit has ended). Answers its run id; a child
   * that may not start is the call's failure, told to the model.
   */
  async startToolRun(input: Extract<Input, { kind: "tool_run" }>): Promise<void> {
    const f = this.f;
    const { done } = input;
    const rs = await f.loadExecution(input.execution_id);
    const a = rs ? attemptOf(rs, input.execution_id) : undefined;
    if (!rs || !a || a.kind !== "visit" || !holds(a, input.attempt)) {
      const why = `attempt ${input.attempt} of ${input.execution_id} no longer holds its visit`;
      return done.reject(new ConflictError(`${why}: tool call ${input.call} was not started`));
    }
    const v = a.row as Visit;
    const key = toolCallKey(v, input.call);
    const parent = parentLink(rs.run, v, undefined, input.call);
    const existing = f.newRuns.find((r) => r.idempotency_key === key) ?? (await f.tx.runByIdempotencyKey(key));
    if (existing) {
      const foreign = ownRunProblem(existing, key, { parent });
      if (foreign) return done.reject(new ConflictError(foreign));
      const found = existing.run_id;
      f.out.callbacks.push(() => done.resolve(found));
      return;
    }
    const workflow = placeRefusal(rs, input.workflow_id) ?? (await this.workflowOf(input));
    if ("reason" in workflow) return done.reject(new NonRetryableError(workflow.message));
    const tooMany = await treeRefusal(f.tx, f.o.maxRunsPerTree, rs.run, 1);
    if (tooMany) return done.reject(new NonRetryableError(tooMany.message));
    const run_id = uuidv7(f.now);
    this.add(rs, v, workflow, (input.input ?? {}) as Json, { run_id, key, parent });
    f.out.callbacks.push(() => done.resolve(run_id));
  }

  /** The workflow a child of `p` runs, its input checked against its schema; or why it may not start. */
  private async workflowOf(p: ChildRequest): Promise<Refusal | Workflow> {
    let workflow: Workflow;
    try {
      workflow = await this.f.o.registry.get(p.workflow_id, p.version ?? undefined);
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
      return { reason: "unknown_workflow", message: e.message };
    }
    const problems = workflow.checkInput((p.input ?? {}) as Json);
    if (problems.length > 0) {
      const detail = problems.map((x) => `${x.path}: ${x.message}`).join("; ");
      return {
        reason: "template_error",
        message: `payload.input does not match the input_schema of ${workflow.id}: ${detail}`,
      };
    }
    return workflow;
  }

  /** Writes the child run and its `child.started` event in the parent's history (DESIGN §9). */
  private add(
    rs: RunState,
    v: Visit,
    workflow: Workflow,
    input: Json,
    child: { run_id: string; key: string; parent: RunParent },
  ): void {
    const f = this.f;
    const run = runRow(workflow, canonicalJson(input), {
      run_id: child.run_id,
      traceparent: f.o.spans.startChildRun(rs.run, v, child.run_id), // its spans nest under its skein.child_run span
      idempotency_key: child.key,
      parent: child.parent,
      budget: budgetOf(workflow.definition.budget),
      scope: rs.run.scope, // the root's, inherited
      tags: rs.run.tags,
      priority: rs.run.priority, // inherited, as its tags
      now: f.now,
    });
    f.addRun(startRunState(run, workflow.graph, f.now));
    // A child found under its key was started, with its event, before.
    const data: Record<string, Json> = { run_id: child.run_id, attempt: v.attempt };
    if (child.parent.call !== undefined) data.call = child.parent.call;
    event(rs, "child.started", v, f.now, data);
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
