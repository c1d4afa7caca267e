/** Schedules (DESIGN §11.5). */
import type { Schedule } from "../core/types.js";

/** Which schedules `listSchedules` gives. */
export interface ScheduleFilter {
  workflow_id?: string;
  /** Only schedules of these workflows (none when empty): a token's workflow scope. */
  workflow_ids?: readonly string[];
}

/** Schedules, inside a write transaction; DatabaseError on a failure of the database. */
export interface ScheduleTx {
  /** The schedule with its row locked until the transaction ends (PostgreSQL waits for its holder, a sweep firing it), or null. */
  lockSchedule(scheduleId: string): Promise<Schedule | null>;
  /** Inserts the schedule or replaces every column (created_at too: the caller keeps it); true when new. Idempotent. */
  writeSchedule(schedule: Schedule): Promise<boolean>;
  /** Deletes the schedule (its runs keep their schedule_id); false when there was none. Idempotent. */
  deleteSchedule(scheduleId: string): Promise<boolean>;
  /** Unpaused schedules due by `now`, earliest first, at most `limit`, locked (PostgreSQL: SKIP LOCKED), by the `schedules_due` index. */
  dueSchedules(now: number, limit: number): Promise<Schedule[]>;
  /** The schedule's runs not ended (ended_at NULL), oldest first, at most `limit`. No lock. */
  unfinishedScheduleRuns(scheduleId: string, limit: number): Promise<string[]>;
  /** Records a sweep's work on a due schedule: its next slot, the latest slot handled and run started. Idempotent. */
  advanceSchedule(
    scheduleId: string,
    to: Pick<Schedule, "next_fire_at" | "last_slot_at" | "last_run_id" | "updated_at">,
  ): Promise<void>;
}
