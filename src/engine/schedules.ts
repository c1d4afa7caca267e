/**
 * Schedules (DESIGN §11.5), the library side: putSchedule checks a schedule completely (its
 * cron and time zone, its workflow and input) and stores it with its next slot; pause, resume
 * and delete change the row under its lock. Each write is one transaction whose time is the
 * store's (the database's on PostgreSQL), the clock every slot is judged by. Firing is the
 * sweep's (engine/writer/schedules.ts).
 */
import type { Cron } from "croner";
import type { Clock } from "../clock.js";
import { compileCron, nextSlot, nextSlots } from "../core/schedule-slots.js";
import { scopeAllows } from "../core/scope.js";
import type { Json, Schedule, ScheduleInput } from "../core/types.js";
import { issuesToProblems } from "../definition/zod-issues.js";
import { NotFoundError, type Problem, ValidationError } from "../errors.js";
import type { ScheduleFilter, Store, StoreTx } from "../store/store.js";
import type { PutScheduleOptions } from "./engine-options.js";
import { refuseNul } from "./identifiers.js";
import { canonicalJson, jsonProblem } from "./json.js";
import { ITEM_SEPARATOR, type WorkflowRegistry } from "./registry.js";
import { DEFAULT_CATCHUP_LIMIT, scheduleInputSchema } from "./schedule-input.js";
import { scopeProblem } from "./scope.js";

/** How many slots getSchedule lists. */
export const NEXT_FIRE_TIMES = 5;

export interface ScheduleDeps {
  store: Store;
  registry: WorkflowRegistry;
  clock: Clock;
  maxPayloadBytes: number;
  /** A schedule's next slot may have moved earlier: the engine looks again (its wake-up timer). */
  moved(): void;
}

/** A schedule with its next slots, as getSchedule answers. */
export type ScheduleWithTimes = Schedule & { next_fire_times: number[] };

/**
 * Creates or replaces a schedule. A replaced schedule keeps its created_at, last_slot_at and
 * last_run_id; its next_fire_at moves to the next slot after now, unless its cron and time zone
 * are the same and it was and stays unpaused (putting the same schedule again, as a deploy
 * does, must not lose a slot that is due).
 * @throws ValidationError listing every problem of the input
 */
export async function putSchedule(
  d: ScheduleDeps,
  input: ScheduleInput,
  options: PutScheduleOptions = {},
): Promise<{ schedule: Schedule; created: boolean }> {
  const { schedule_id, workflow_id, timezone } = (input ?? {}) as Partial<ScheduleInput>;
  refuseNul({ schedule_id, workflow_id, timezone });
  const checked = await checkSchedule(d, input);
  if (options.scope !== undefined) {
    const bad = scopeProblem(options.scope);
    if (bad) throw new ValidationError(`Invalid schedule "${checked.schedule_id}"`, [{ path: "scope", message: bad }]);
    if (!scopeAllows(options.scope, checked.fields.workflow_id)) {
      throw new ValidationError(`Invalid schedule "${checked.schedule_id}"`, [
        { path: "scope", message: `does not cover "${checked.fields.workflow_id}", the workflow the schedule starts` },
      ]);
    }
  }
  const answer = await d.store.transaction(async (tx) => {
    const now = await txNow(tx, d.clock);
    const old = await tx.lockSchedule(checked.schedule_id);
    const same =
      old !== null && !old.paused && old.cron === checked.fields.cron && old.timezone === checked.fields.timezone;
    const schedule: Schedule = {
      ...checked.fields,
      next_fire_at: checked.fields.paused
        ? null
        : same && old.next_fire_at !== null
          ? old.next_fire_at
          : nextSlot(checked.cron, now),
      last_slot_at: old?.last_slot_at ?? null,
      last_run_id: old?.last_run_id ?? null,
      scope: options.scope ? [...options.scope] : null,
      created_at: old?.created_at ?? now,
      updated_at: now,
    };
    const created = await tx.writeSchedule(schedule);
    return { schedule, created };
  });
  d.moved();
  return answer;
}

/** Schedules by schedule_id, of one workflow (or of a token's workflows) if asked. */
export function listSchedules(d: ScheduleDeps, filter: ScheduleFilter = {}): Promise<Schedule[]> {
  refuseNul({ workflow_id: filter.workflow_id, workflow_ids: filter.workflow_ids });
  return d.store.listSchedules(filter);
}

/** The schedule with its next NEXT_FIRE_TIMES slots (none while paused). @throws NotFoundError */
export async function getSchedule(d: ScheduleDeps, scheduleId: string): Promise<ScheduleWithTimes> {
  refuseNul({ schedule_id: scheduleId });
  const schedule = await d.store.getSchedule(scheduleId);
  if (!schedule) throw unknownSchedule(scheduleId);
  return { ...schedule, next_fire_times: fireTimes(schedule) };
}

/** Stops firing; nothing that passes while paused is caught up. @throws NotFoundError */
export function pauseSchedule(d: ScheduleDeps, scheduleId: string): Promise<Schedule> {
  return change(d, scheduleId, (s) => (s.paused ? null : { ...s, paused: true, next_fire_at: null }));
}

/** Fires again from the next slot after now. @throws NotFoundError */
export async function resumeSchedule(d: ScheduleDeps, scheduleId: string): Promise<Schedule> {
  const schedule = await change(d, scheduleId, (s, now) => {
    if (!s.paused) return null;
    const cron = compileCron(s.cron, s.timezone, now);
    return { ...s, paused: false, next_fire_at: "path" in cron ? null : nextSlot(cron, now) };
  });
  d.moved();
  return schedule;
}

/** Deletes the schedule; runs it started keep their schedule_id. @throws NotFoundError */
export async function deleteSchedule(d: ScheduleDeps, scheduleId: string): Promise<void> {
  const deleted = await d.store.transaction((tx) => tx.deleteSchedule(scheduleId));
  if (!deleted) throw unknownSchedule(scheduleId);
}

/** Changes a schedule under its lock; `edit` answers null for no change. */
function change(
  d: ScheduleDeps,
  scheduleId: string,
  edit: (s: Schedule, now: number) => Schedule | null,
): Promise<Schedule> {
  return d.store.transaction(async (tx) => {
    const now = await txNow(tx, d.clock);
    const old = await tx.lockSchedule(scheduleId);
    if (!old) throw unknownSchedule(scheduleId);
    const edited = edit(old, now);
    if (!edited) return old;
    const schedule = { ...edited, updated_at: now };
    await tx.writeSchedule(schedule);
    return schedule;
  });
}

function fireTimes(s: Schedule): number[] {
  if (s.paused || s.next_fire_at === null) return [];
  const cron = compileCron(s.cron, s.timezone, s.next_fire_at - 1);
  if ("path" in cron) return [s.next_fire_at];
  return [s.next_fire_at, ...nextSlots(cron, s.next_fire_at, NEXT_FIRE_TIMES - 1)];
}

async function txNow(tx: StoreTx, clock: Clock): Promise<number> {
  return (await tx.now()) ?? clock.now();
}

export function unknownSchedule(scheduleId: string): NotFoundError {
  return new NotFoundError(`schedule "${scheduleId}" does not exist; create it with putSchedule (skein schedules put)`);
}

/** A schedule input checked whole: its stored fields (defaults filled in) and its compiled cron. */
interface CheckedSchedule {
  schedule_id: string;
  cron: Cron;
  fields: Omit<Schedule, "next_fire_at" | "last_slot_at" | "last_run_id" | "scope" | "created_at" | "updated_at">;
}

/** Every problem of a schedule input, with its path, or the schedule with its defaults. */
async function checkSchedule(d: ScheduleDeps, input: unknown): Promise<CheckedSchedule> {
  const parsed = scheduleInputSchema.safeParse(input, { reportInput: true });
  if (!parsed.success) {
    throw new ValidationError("Invalid schedule", issuesToProblems(parsed.error.issues, "", scheduleInputSchema));
  }
  const s = parsed.data;
  const problems: Problem[] = [];
  const timezone = s.timezone ?? "UTC";
  const cron = compileCron(s.cron, timezone, d.clock.now());
  if ("path" in cron) problems.push(cron);
  const value = (s.input ?? {}) as Json;
  const notJson = jsonProblem(value, "input");
  if (notJson) problems.push({ path: "input", message: notJson });
  else {
    const bytes = Buffer.byteLength(canonicalJson(value));
    if (bytes > d.maxPayloadBytes) {
      problems.push({
        path: "input",
        message: `is ${bytes} bytes, over the limit of ${d.maxPayloadBytes} (maxPayloadBytes); pass a reference to large data instead`,
      });
    }
  }
  if (s.workflow_id.includes(ITEM_SEPARATOR)) {
    problems.push({
      path: "workflow_id",
      message: `"${s.workflow_id}" is the item workflow of a map node, whose runs the map starts; schedule "${s.workflow_id.split(ITEM_SEPARATOR)[0]}" instead`,
    });
  } else {
    try {
      const workflow = await d.registry.get(s.workflow_id, s.version);
      if (!notJson) problems.push(...workflow.checkInput(value));
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
      const known = await d.store.getWorkflow(s.workflow_id);
      problems.push(
        known && s.version !== undefined
          ? {
              path: "version",
              message: `workflow "${s.workflow_id}" has no version ${s.version} (its latest is ${known.version})`,
            }
          : { path: "workflow_id", message: `workflow "${s.workflow_id}" is not registered; register it first` },
      );
    }
  }
  if ("path" in cron || problems.length > 0) throw new ValidationError(`Invalid schedule "${s.schedule_id}"`, problems);
  return {
    schedule_id: s.schedule_id,
    cron,
    fields: {
      schedule_id: s.schedule_id,
      workflow_id: s.workflow_id,
      version: s.version ?? null,
      cron: s.cron,
      timezone,
      input: value,
      overlap: s.overlap ?? "skip",
      catchup: s.catchup ?? "latest",
      catchup_limit: s.catchup_limit ?? DEFAULT_CATCHUP_LIMIT,
      paused: s.paused ?? false,
    },
  };
}
