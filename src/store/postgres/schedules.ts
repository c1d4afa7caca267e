/**
 * The schedules table on PostgreSQL (migration 010, DESIGN §11.5), as SQLite's: reads and the
 * transaction's statements. The sweep's read of due schedules locks them with SKIP LOCKED, so
 * two engines never fire one schedule at once and neither waits for the other.
 */
import type { Catchup, Overlap, Schedule } from "../../core/types.js";
import type { ScheduleFilter, ScheduleTx } from "../schedules.js";
import { type Columns, placeholders, rowValues, selectList } from "./rows.js";

type DbSchedule = Omit<Schedule, "overlap" | "catchup"> & { overlap: string; catchup: string };

export const scheduleFromDb = (r: DbSchedule): Schedule => ({
  ...r,
  overlap: r.overlap as Overlap,
  catchup: r.catchup as Catchup,
});

export const SCHEDULE_COLUMNS: Columns<Schedule> = {
  schedule_id: "text",
  workflow_id: "text",
  version: "integer",
  cron: "text",
  timezone: "text",
  input: "json!",
  overlap: "text",
  catchup: "text",
  catchup_limit: "integer",
  paused: "boolean",
  next_fire_at: "bigint",
  last_slot_at: "bigint",
  last_run_id: "text",
  scope: "json",
  created_at: "bigint",
  updated_at: "bigint",
};

const SCHEDULES = selectList(SCHEDULE_COLUMNS);

export const SCHEDULE_BY_ID = {
  name: "skein_schedule",
  text: `SELECT ${SCHEDULES} FROM schedules WHERE schedule_id = $1`,
};

/** listSchedules' statement and parameters for a filter. */
export function listSchedulesSql(filter: ScheduleFilter): { text: string; values: unknown[] } {
  const where: string[] = [];
  const values: unknown[] = [];
  if (filter.workflow_id !== undefined) {
    values.push(filter.workflow_id);
    where.push(`workflow_id = $${values.length}`);
  }
  if (filter.workflow_ids) {
    values.push(filter.workflow_ids);
    where.push(`workflow_id = ANY($${values.length}::text[])`);
  }
  const text = `SELECT ${SCHEDULES} FROM schedules ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
    ORDER BY schedule_id`;
  return { text, values };
}

const updates = Object.keys(SCHEDULE_COLUMNS)
  .filter((c) => c !== "schedule_id")
  .map((c) => `"${c}" = excluded."${c}"`)
  .join(", ");

const SQL = {
  lock: { name: "skein_lock_schedule", text: `${SCHEDULE_BY_ID.text} FOR UPDATE` },
  // xmax is 0 on a row this statement inserted, the updating transaction's id on one it replaced.
  upsert: {
    name: "skein_upsert_schedule",
    text: `INSERT INTO schedules (${Object.keys(SCHEDULE_COLUMNS)
      .map((c) => `"${c}"`)
      .join(", ")}) VALUES (${placeholders(SCHEDULE_COLUMNS)})
      ON CONFLICT (schedule_id) DO UPDATE SET ${updates} RETURNING (xmax = 0) AS inserted`,
  },
  delete: { name: "skein_delete_schedule", text: "DELETE FROM schedules WHERE schedule_id = $1 RETURNING 1 AS n" },
  due: {
    name: "skein_due_schedules",
    text: `SELECT ${SCHEDULES} FROM schedules WHERE NOT paused AND next_fire_at IS NOT NULL AND next_fire_at <= $1
            ORDER BY next_fire_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
  },
  unfinished: {
    name: "skein_unfinished_schedule_runs",
    text: `SELECT run_id FROM runs WHERE schedule_id = $1 AND ended_at IS NULL ORDER BY created_at, run_id LIMIT $2`,
  },
  advance: {
    name: "skein_advance_schedule",
    text: `UPDATE schedules SET next_fire_at = $2, last_slot_at = $3, last_run_id = $4, updated_at = $5
            WHERE schedule_id = $1`,
  },
} as const;

type Query = <R extends object>(config: { name?: string; text: string }, values: unknown[]) => Promise<R[]>;

/** The schedule statements of one transaction, through its query function. */
export function postgresSchedules(q: Query): ScheduleTx {
  return {
    lockSchedule: async (id) => {
      const [row] = await q<DbSchedule>(SQL.lock, [id]);
      return row ? scheduleFromDb(row) : null;
    },
    writeSchedule: async (schedule) => {
      const [row] = await q<{ inserted: boolean }>(SQL.upsert, rowValues(SCHEDULE_COLUMNS, schedule));
      return row?.inserted === true;
    },
    deleteSchedule: async (id) => (await q(SQL.delete, [id])).length > 0,
    dueSchedules: async (now, limit) => (await q<DbSchedule>(SQL.due, [now, limit])).map(scheduleFromDb),
    unfinishedScheduleRuns: async (id, limit) =>
      (await q<{ run_id: string }>(SQL.unfinished, [id, limit])).map((r) => r.run_id),
    advanceSchedule: async (id, to) => {
      await q(SQL.advance, [id, to.next_fire_at, to.last_slot_at, to.last_run_id, to.updated_at]);
    },
  };
}
