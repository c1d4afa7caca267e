/** The schedules table on SQLite (migration 010, DESIGN §11.5): rows, reads, and the transaction's statements. */
import type Database from "better-sqlite3";
import type { Catchup, Json, Overlap, Schedule } from "../../core/types.js";
import type { ScheduleFilter, ScheduleTx } from "../schedules.js";

export interface DbSchedule {
  schedule_id: string;
  workflow_id: string;
  version: number | null;
  cron: string;
  timezone: string;
  input: string;
  overlap: string;
  catchup: string;
  catchup_limit: number;
  paused: number;
  next_fire_at: number | null;
  last_slot_at: number | null;
  last_run_id: string | null;
  scope: string | null;
  created_at: number;
  updated_at: number;
}

export function scheduleFromDb(r: DbSchedule): Schedule {
  return {
    ...r,
    input: JSON.parse(r.input) as Json,
    overlap: r.overlap as Overlap,
    catchup: r.catchup as Catchup,
    paused: r.paused === 1,
    scope: r.scope === null ? null : (JSON.parse(r.scope) as string[]),
  };
}

function scheduleToDb(s: Schedule): DbSchedule {
  return {
    ...s,
    input: JSON.stringify(s.input),
    paused: s.paused ? 1 : 0,
    scope: s.scope === null ? null : JSON.stringify(s.scope),
  };
}

const COLUMNS: (keyof DbSchedule)[] = [
  "schedule_id",
  "workflow_id",
  "version",
  "cron",
  "timezone",
  "input",
  "overlap",
  "catchup",
  "catchup_limit",
  "paused",
  "next_fire_at",
  "last_slot_at",
  "last_run_id",
  "scope",
  "created_at",
  "updated_at",
];

export const SCHEDULE_BY_ID = "SELECT * FROM schedules WHERE schedule_id = ?";

/** listSchedules' statement and parameters for a filter. */
export function listSchedulesSql(filter: ScheduleFilter): { sql: string; params: unknown[] } {
  const where: string[] = [];
  const params: unknown[] = [];
  if (filter.workflow_id !== undefined) {
    where.push("workflow_id = ?");
    params.push(filter.workflow_id);
  }
  if (filter.workflow_ids) {
    where.push(
      filter.workflow_ids.length === 0 ? "0" : `workflow_id IN (${filter.workflow_ids.map(() => "?").join(", ")})`,
    );
    params.push(...filter.workflow_ids);
  }
  const sql = `SELECT * FROM schedules ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY schedule_id`;
  return { sql, params };
}

/** The schedule statements of the write connection's transactions. */
export function sqliteSchedules(db: Database.Database): ScheduleTx {
  const s = {
    get: db.prepare(SCHEDULE_BY_ID),
    exists: db.prepare("SELECT 1 FROM schedules WHERE schedule_id = ?").pluck(),
    upsert: db.prepare(
      `INSERT INTO schedules (${COLUMNS.join(", ")}) VALUES (${COLUMNS.map((c) => `@${c}`).join(", ")})
         ON CONFLICT (schedule_id) DO UPDATE SET ${COLUMNS.filter((c) => c !== "schedule_id")
           .map((c) => `${c} = excluded.${c}`)
           .join(", ")}`,
    ),
    delete: db.prepare("DELETE FROM schedules WHERE schedule_id = ?"),
    due: db.prepare(
      `SELECT * FROM schedules INDEXED BY schedules_due
         WHERE paused = 0 AND next_fire_at IS NOT NULL AND next_fire_at <= ? ORDER BY next_fire_at LIMIT ?`,
    ),
    unfinished: db
      .prepare(
        `SELECT run_id FROM runs INDEXED BY runs_active_by_schedule
           WHERE schedule_id = ? AND ended_at IS NULL ORDER BY created_at, run_id LIMIT ?`,
      )
      .pluck(),
    advance: db.prepare(
      `UPDATE schedules SET next_fire_at = @next_fire_at, last_slot_at = @last_slot_at, last_run_id = @last_run_id,
         updated_at = @updated_at WHERE schedule_id = @schedule_id`,
    ),
  };
  // One writer: a row read in its transaction cannot change under it, there is no lock to take.
  return {
    lockSchedule: async (id) => {
      const row = s.get.get(id) as DbSchedule | undefined;
      return row ? scheduleFromDb(row) : null;
    },
    writeSchedule: async (schedule) => {
      const existed = s.exists.get(schedule.schedule_id) !== undefined;
      s.upsert.run(scheduleToDb(schedule));
      return !existed;
    },
    deleteSchedule: async (id) => s.delete.run(id).changes > 0,
    dueSchedules: async (now, limit) => (s.due.all(now, limit) as DbSchedule[]).map(scheduleFromDb),
    unfinishedScheduleRuns: async (id, limit) => s.unfinished.all(id, limit) as string[],
    advanceSchedule: async (schedule_id, to) => {
      const { next_fire_at, last_slot_at, last_run_id, updated_at } = to;
      s.advance.run({ schedule_id, next_fire_at, last_slot_at, last_run_id, updated_at });
    },
  };
}
