/**
 * A schedule's slots (DESIGN §11.5): the instants its cron expression names in its time zone,
 * and which of them a sweep fires. Pure: croner reads the expression and knows the zones' DST
 * rules (a fixed-time job such as `30 2 * * *` runs once at the first valid time after a
 * spring-forward gap and once on a fall-back day; an interval job such as `*\/30 * * * *` skips
 * the gap and runs on both occurrences of a repeated hour). Slots are whole seconds, epoch ms.
 */
import { Cron } from "croner";
import { ENGINE_KEY_PREFIX, type Schedule } from "./types.js";

/** catchup "none": a slot later than this is not fired (the engines were down, or busy, too long). */
export const ON_TIME_MS = 60_000;

/** What is wrong with a schedule's cron or time zone, with the field's path. */
export interface CronProblem {
  path: "cron" | "timezone";
  message: string;
}

/**
 * The cron expression compiled in the time zone, or what is wrong with either: not 5 or 6
 * fields, a value out of range, an unknown zone, an expression that never matches a date
 * after `now` (it would never fire).
 */
export function compileCron(cron: string, timezone: string, now: number): Cron | CronProblem {
  const compiled = parseCron(cron, timezone);
  if ("path" in compiled) return compiled;
  if (nextSlot(compiled, now) === null) {
    return { path: "cron", message: `${JSON.stringify(cron)} matches no date after now: it would never fire` };
  }
  return compiled;
}

/** Compiled expressions by zone and text (a sweep fires the same schedules again and again); at most CACHED. */
const compiled = new Map<string, Cron>();
const CACHED = 10_000;

/** Zones that are UTC: croner computes them by offset, without the Intl conversions a named zone costs. */
const UTC_ZONES: ReadonlySet<string> = new Set([
  "UTC",
  "Etc/UTC",
  "Etc/UCT",
  "UCT",
  "GMT",
  "Etc/GMT",
  "Etc/Universal",
  "Universal",
  "Etc/Zulu",
  "Zulu",
]);

/** The cron expression compiled in the time zone, or what is wrong with the expression or the zone. */
export function parseCron(cron: string, timezone: string): Cron | CronProblem {
  const key = `${timezone}\n${cron}`;
  const hit = compiled.get(key);
  if (hit) return hit;
  const zoneProblem = timezoneProblem(timezone);
  if (zoneProblem) return { path: "timezone", message: zoneProblem };
  let parsed: Cron;
  try {
    const zone = UTC_ZONES.has(timezone) ? { utcOffset: 0 } : { timezone };
    parsed = new Cron(cron, { ...zone, mode: "5-or-6-parts" });
  } catch (e) {
    const reason = (e instanceof Error ? e.message : String(e)).replace(/^CronPattern: /, "");
    return {
      path: "cron",
      message: `${JSON.stringify(cron)} is not a cron expression: ${reason} (5 fields "minute hour day month weekday", or 6 with seconds first)`,
    };
  }
  if (compiled.size >= CACHED) compiled.clear();
  compiled.set(key, parsed);
  return parsed;
}

/** Why a time zone name is not one the runtime knows (IANA names such as "Europe/Berlin", or "UTC"), or null. */
export function timezoneProblem(timezone: string): string | null {
  if (timezone === "") return 'an empty time zone; use an IANA name such as "Europe/Berlin", or "UTC"';
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
    return null;
  } catch {
    return `${JSON.stringify(timezone)} is not an IANA time zone name (such as "Europe/Berlin", "America/New_York" or "UTC")`;
  }
}

/** The first slot strictly after `after`, or null when there is none. */
export function nextSlot(cron: Cron, after: number): number | null {
  return cron.nextRun(new Date(after))?.getTime() ?? null;
}

/** The next `n` slots strictly after `after`. */
export function nextSlots(cron: Cron, after: number, n: number): number[] {
  return cron.nextRuns(n, new Date(after)).map((d) => d.getTime());
}

/**
 * The slots a sweep at `now` handles for a due schedule, oldest first, and the schedule's next
 * slot after `now`: of the slots from its next_fire_at to `now` (both included), `latest` the
 * most recent, `all` the most recent `catchup_limit`, `none` the most recent if it is at most
 * ON_TIME_MS late (else none).
 */
export function dueSlots(
  cron: Cron,
  s: Pick<Schedule, "next_fire_at" | "catchup" | "catchup_limit">,
  now: number,
): { slots: number[]; next: number | null } {
  const from = s.next_fire_at;
  if (from === null || from > now) return { slots: [], next: from };
  const after = nextSlot(cron, from);
  // On time (the common case): next_fire_at is the only slot due, and the one after it is next.
  if (after === null || after > now) return { slots: onTime(s, [from], now), next: after };
  // previousRuns is exclusive of its reference: now + 1 ms includes a slot at now.
  const count = s.catchup === "all" ? s.catchup_limit : 1;
  const slots = cron
    .previousRuns(count, new Date(now + 1))
    .map((d) => d.getTime())
    .filter((t) => t >= from)
    .reverse();
  return { slots: onTime(s, slots, now), next: nextSlot(cron, now) };
}

function onTime(s: Pick<Schedule, "catchup">, slots: number[], now: number): number[] {
  return s.catchup === "none" ? slots.filter((t) => now - t <= ON_TIME_MS) : slots;
}

/**
 * A slot as its runs' idempotency keys name it: ISO 8601 in UTC, under the engine's reserved
 * prefix `skein:` (engine/writer/engine-keys.ts).
 */
export function slotKey(scheduleId: string, slot: number): string {
  return `${ENGINE_KEY_PREFIX}schedule:${scheduleId}:${new Date(slot).toISOString()}`;
}
