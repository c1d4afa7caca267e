/**
 * Schedules firing (DESIGN §11.5), in the sweep's transaction: the due schedules are read and
 * locked (PostgreSQL: SKIP LOCKED, so each is fired by one engine at a time), each due slot per
 * `catchup` starts one run (idempotency key `skein:schedule:<id>:<slot>`, `schedule_id` set) subject
 * to `overlap`, and the schedule's next_fire_at moves past the transaction's time, all in the
 * same transaction: a crash before the commit loses nothing (the slots are still due), one
 * after it doubles nothing (they are not). Time is the transaction's (the database's on
 * PostgreSQL), so engines with skewed clocks agree on which slots are due.
 */
import { budgetOf } from "../../core/budget.js";
import { dueSlots, parseCron, slotKey } from "../../core/schedule-slots.js";
import { endRun, startRunState } from "../../core/scheduler.js";
import { DEFAULT_PRIORITY, type Json, type Schedule } from "../../core/types.js";
import { NotFoundError } from "../../errors.js";
import { uuidv7 } from "../../ids.js";
import { canonicalJson } from "../json.js";
import type { LoadedWorkflow } from "../registry.js";
import { runRow } from "../run-start.js";
import { traceparentOf, tracer } from "../telemetry/tracing.js";
import type { FlushContext } from "./context.js";
import type { SlotOutcome } from "./dispatcher-options.js";
import { ownRunProblem } from "./engine-keys.js";

/** Due schedules one sweep fires at most; more are found by the next (nextDue says they are due). */
export const SCHEDULE_BATCH = 200;

/** Runs of one schedule that overlap cancels at most per slot (there is rarely more than one). */
const OVERLAP_LIMIT = 100;

export type { SlotOutcome } from "./dispatcher-options.js";

/** What became of one slot: the run it started (null: none), or busy (a run to cancel is held elsewhere: try again). */
type Handled = { run_id: string | null } | "busy";

/** Fires the due slots of the due schedules (at most SCHEDULE_BATCH schedules). */
export async function fireSchedules(f: FlushContext): Promise<void> {
  for (const s of await f.tx.dueSchedules(f.now, SCHEDULE_BATCH)) await fireSchedule(f, s);
}

async function fireSchedule(f: FlushContext, s: Schedule): Promise<void> {
  const cron = parseCron(s.cron, s.timezone);
  if ("path" in cron) {
    // Stored by an older Skein, or a zone the runtime no longer knows: stop it, and say so.
    f.o.logger.warn(
      { schedule_id: s.schedule_id, [cron.path]: s[cron.path], problem: cron.message },
      "skein: a schedule's cron no longer parses; it stops firing until it is put again",
    );
    await advance(f, s, { next_fire_at: null, last_slot_at: s.last_slot_at, last_run_id: s.last_run_id });
    return;
  }
  let last_slot_at = s.last_slot_at;
  let last_run_id = s.last_run_id;
  const { slots, next } = dueSlots(cron, s, f.now);
  for (const slot of slots) {
    const handled = await fireSlot(f, s, slot);
    if (handled === "busy") {
      // A run to cancel is held by another engine's transaction right now: this slot is tried again.
      await advance(f, s, { next_fire_at: slot, last_slot_at, last_run_id });
      return;
    }
    last_slot_at = slot;
    if (handled.run_id !== null) last_run_id = handled.run_id;
  }
  await advance(f, s, { next_fire_at: next, last_slot_at, last_run_id });
}

function advance(
  f: FlushContext,
  s: Schedule,
  to: Pick<Schedule, "next_fire_at" | "last_slot_at" | "last_run_id">,
): Promise<void> {
  return f.tx.advanceSchedule(s.schedule_id, { ...to, updated_at: f.now });
}

/** One slot: its run started unless it exists already, overlap skips it, or its workflow or input is refused. */
async function fireSlot(f: FlushContext, s: Schedule, slot: number): Promise<Handled> {
  const key = slotKey(s.schedule_id, slot);
  const existing = f.newRuns.find((r) => r.idempotency_key === key) ?? (await f.tx.runByIdempotencyKey(key));
  const handled = (outcome: SlotOutcome["outcome"]) => f.out.slots.push({ schedule_id: s.schedule_id, outcome });
  if (existing) {
    const foreign = ownRunProblem(existing, key, { schedule_id: s.schedule_id });
    if (foreign) {
      // Not this schedule's run: the slot is handled without it, and last_run_id never points at it.
      f.o.logger.warn(
        { schedule_id: s.schedule_id, slot: new Date(slot).toISOString(), problem: foreign },
        "skein: a schedule's slot was not fired: another run holds its idempotency key",
      );
      handled("not_started");
      return { run_id: null };
    }
    handled("started");
    return { run_id: existing.run_id };
  }
  if (s.overlap !== "allow") {
    const active = await unfinishedRuns(f, s.schedule_id);
    if (active.length > 0 && s.overlap === "skip") {
      handled("skipped");
      return { run_id: null };
    }
    for (const runId of active) {
      const rs = await f.load(runId);
      if (!rs) return "busy";
      const error = {
        message: `cancelled by schedule ${s.schedule_id}: its slot ${new Date(slot).toISOString()} starts a new run (overlap cancel_previous)`,
        reason: "schedule_overlap",
      };
      endRun(rs, "cancelled", error, f.now);
    }
  }
  const workflow = await workflowOf(f, s, slot);
  if (!workflow) {
    handled("not_started");
    return { run_id: null };
  }
  const run_id = uuidv7(f.now);
  const run = runRow(workflow, canonicalJson(s.input), {
    run_id,
    traceparent: startSpan(s, workflow, run_id),
    idempotency_key: key,
    parent: null,
    budget: budgetOf(workflow.definition.budget),
    scope: s.scope, // the scope of the token that put the schedule (DESIGN §13.1)
    tags: {},
    priority: DEFAULT_PRIORITY, // a schedule takes none: its runs are claimed as any run started without one
    now: f.now,
    schedule_id: s.schedule_id,
  });
  const rs = startRunState(run, workflow.graph, f.now);
  // The run's first event says which schedule and slot started it.
  const started = rs.changes.events.find((e) => e.type === "run.started");
  if (started) Object.assign(started.data, { schedule_id: s.schedule_id, slot: new Date(slot).toISOString() });
  f.addRun(rs, 0);
  handled("started");
  return { run_id };
}

/**
 * Runs of the schedule that have not ended: those the database has (as this transaction sees
 * them: a run this flush ended is ended) and those this flush started.
 */
async function unfinishedRuns(f: FlushContext, scheduleId: string): Promise<string[]> {
  const ids = new Set(await f.tx.unfinishedScheduleRuns(scheduleId, OVERLAP_LIMIT));
  for (const r of f.newRuns) if (r.schedule_id === scheduleId) ids.add(r.run_id);
  return [...ids].filter((id) => (f.states.get(id)?.run.ended_at ?? null) === null);
}

/**
 * The workflow a slot runs, or null when it cannot start: the workflow (or its pinned version)
 * was deleted, or the schedule's input no longer matches its input_schema (a new version). The
 * slot is handled, not fired, and logged: a schedule never fails a sweep.
 */
async function workflowOf(f: FlushContext, s: Schedule, slot: number): Promise<LoadedWorkflow | null> {
  const at = new Date(slot).toISOString();
  let workflow: LoadedWorkflow;
  try {
    workflow = await f.o.registry.get(s.workflow_id, s.version ?? undefined);
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
    f.o.logger.warn(
      { schedule_id: s.schedule_id, workflow_id: s.workflow_id, version: s.version, slot: at, err: e },
      "skein: a schedule's slot was not fired: its workflow is not registered",
    );
    return null;
  }
  const problems = workflow.checkInput(s.input as Json);
  if (problems.length > 0) {
    f.o.logger.warn(
      { schedule_id: s.schedule_id, workflow_id: workflow.id, version: workflow.version, slot: at, problems },
      "skein: a schedule's slot was not fired: its input does not match the workflow's input_schema; put the schedule again with a matching input",
    );
    return null;
  }
  return workflow;
}

/** The run's `skein.run.start` span (a root: no caller), ended at once; its context is the run's traceparent. */
function startSpan(s: Schedule, workflow: LoadedWorkflow, runId: string): string {
  const span = tracer().startSpan("skein.run.start", {
    root: true,
    attributes: {
      "skein.workflow_id": workflow.id,
      "skein.workflow_version": workflow.version,
      "skein.run_id": runId,
      "skein.schedule_id": s.schedule_id,
    },
  });
  span.end();
  return traceparentOf(span);
}
