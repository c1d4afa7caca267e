/**
 * The oracle of a schedule's slots (case k; DESIGN §11.5): every slot of a window started
 * exactly one run, under the idempotency key `skein:schedule:<schedule_id>:<slot as ISO 8601 UTC>`,
 * carrying `schedule_id`, and no run started before its slot by the database's clock. Read from
 * the runs table by a separate connection, as committed.
 */
import { withDatabase } from "./read-db.js";

export interface ScheduledRunRow {
  run_id: string;
  status: string;
  idempotency_key: string | null;
  schedule_id: string | null;
  created_at: number;
}

/** The runs a schedule started, or that carry its key prefix (a run missing its schedule_id shows too). */
export async function readScheduledRuns(database: string, scheduleId: string): Promise<ScheduledRunRow[]> {
  const rows = await withDatabase(database, (query) =>
    query(
      `SELECT run_id, status, idempotency_key, schedule_id, created_at FROM runs
        WHERE schedule_id = $1 OR starts_with(idempotency_key, $2)`,
      [scheduleId, `skein:schedule:${scheduleId}:`],
    ),
  );
  return rows.map((r) => ({ ...(r as unknown as ScheduledRunRow), created_at: Number(r.created_at) }));
}

export interface SlotFigures {
  slots: number;
  /** Slots of the window that started no run. */
  lost: number;
  /** Runs beyond the first of a slot of the window. */
  doubled: number;
  /** Runs created before their slot (database time): a clock ahead fired them. */
  early: number;
  /** Slots whose run started more than `lateMs` after the slot (fired by catchup after an outage). */
  late: number;
  /** How long after its slot the latest of the window's runs started, ms. */
  latestMs: number;
  /** The window's runs, one per slot that fired (the first). */
  windowRuns: ScheduledRunRow[];
  problems: string[];
}

/** The slot of a run: its key's time, if the key is exactly `skein:schedule:<id>:<Date#toISOString()>`. */
function slotOf(run: ScheduledRunRow, prefix: string): number | null {
  const key = run.idempotency_key ?? "";
  if (!key.startsWith(prefix)) return null;
  const iso = key.slice(prefix.length);
  const at = Date.parse(iso);
  return Number.isFinite(at) && new Date(at).toISOString() === iso ? at : null;
}

/** Accounts for every slot of `window` (epoch ms, from the cron) in `runs`. */
export function slotFigures(
  runs: readonly ScheduledRunRow[],
  scheduleId: string,
  window: readonly number[],
  lateMs: number,
): SlotFigures {
  const prefix = `skein:schedule:${scheduleId}:`;
  const problems: string[] = [];
  const bySlot = new Map<number, ScheduledRunRow[]>();
  const slotsOfCron = new Set(window);
  const [first, last] = [window[0] as number, window.at(-1) as number];
  for (const run of runs) {
    const slot = slotOf(run, prefix);
    if (slot === null) {
      problems.push(`run ${run.run_id}: idempotency key ${JSON.stringify(run.idempotency_key)} names no slot`);
      continue;
    }
    if (run.schedule_id !== scheduleId) {
      problems.push(`run ${run.run_id} (slot ${new Date(slot).toISOString()}): schedule_id ${run.schedule_id}`);
    }
    if (slot >= first && slot <= last && !slotsOfCron.has(slot)) {
      problems.push(`run ${run.run_id}: slot ${new Date(slot).toISOString()} is not a slot of the cron`);
    }
    bySlot.set(slot, [...(bySlot.get(slot) ?? []), run]);
  }
  let lost = 0;
  let doubled = 0;
  let early = 0;
  let late = 0;
  let latestMs = 0;
  const windowRuns: ScheduledRunRow[] = [];
  for (const slot of window) {
    const list = bySlot.get(slot) ?? [];
    const iso = new Date(slot).toISOString();
    if (list.length === 0) {
      lost += 1;
      problems.push(`lost: slot ${iso} started no run`);
      continue;
    }
    if (list.length > 1) {
      doubled += list.length - 1;
      problems.push(`doubled: slot ${iso} started ${list.length} runs (${list.map((r) => r.run_id).join(", ")})`);
    }
    for (const run of list) {
      if (run.created_at < slot) {
        early += 1;
        problems.push(`early: run ${run.run_id} of slot ${iso} created ${slot - run.created_at} ms before it`);
      }
    }
    const run = list[0] as ScheduledRunRow;
    if (run.created_at > slot + lateMs) late += 1;
    latestMs = Math.max(latestMs, run.created_at - slot);
    windowRuns.push(run);
  }
  return { slots: window.length, lost, doubled, early, late, latestMs, windowRuns, problems };
}
