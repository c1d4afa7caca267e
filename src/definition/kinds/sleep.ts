/**
 * `sleep` (DESIGN §11.4): WAITING until `payload.seconds` from when it became ready, or until
 * `payload.until` (ISO 8601 with a time zone, or epoch ms). The due time is the visit's
 * `lease_expires_at`, computed from the transaction's time, so it survives restarts and costs
 * the engine nothing while it waits; the sweep or the wake-up timer finishes it
 * (core/kinds/sleep.ts). Its rules: the payload, and when it wakes.
 */
import type { Problem } from "../../errors.js";
import type { Json } from "../../json-text.js";
import { type KindRules, plainEdgesOnly } from "./kind.js";

/** The latest time a JavaScript Date can hold, in ms. */
const MAX_TIME = 8.64e15;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;
const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/;

export const sleep: KindRules = {
  name: "sleep",
  start: "engine",
  notClaimable: "wait for a time the engine keeps",
  retries: false,
  validate(node, checks) {
    const problems: Problem[] = [];
    const payload = node.payload;
    const hasTemplate = (v: unknown) => typeof v === "string" && v.includes("{{");
    if (!hasTemplate(payload.seconds) && !hasTemplate(payload.until)) {
      const problem = payloadProblem(payload as Json);
      if (problem) problems.push({ path: `${checks.at}.payload`, message: problem });
    }
    problems.push(
      ...plainEdgesOnly(
        node,
        checks,
        "sleep",
        "always { slept_until }",
        ": its output is always { slept_until }; list plain targets",
      ),
    );
    return problems;
  },
  checkResolved: (payload) => {
    const problem = payloadProblem(payload);
    return problem === null ? null : `payload ${problem}`;
  },
};

/** Why a sleep's payload is not one of `{ seconds }` or `{ until }`, or null. */
function payloadProblem(payload: Json): string | null {
  const due = dueTime(payload, 0);
  return typeof due === "string" ? due : null;
}

/** When a sleep with this payload, ready at `now`, wakes (ms); or what is wrong with the payload. */
export function dueTime(payload: Json, now: number): number | string {
  const p = payload !== null && typeof payload === "object" && !Array.isArray(payload) ? payload : {};
  const hasSeconds = "seconds" in p;
  const hasUntil = "until" in p;
  if (hasSeconds === hasUntil) {
    return hasSeconds
      ? "has both seconds and until: give one of them"
      : 'needs seconds (how long to wait) or until (an ISO 8601 time or epoch ms), e.g. { "seconds": 3600 }';
  }
  if (hasSeconds) {
    const s = p.seconds;
    if (typeof s !== "number" || !Number.isFinite(s) || s < 0 || now + s * 1000 > MAX_TIME) {
      return `seconds must be a number of seconds, 0 or more, got ${JSON.stringify(s)}`;
    }
    return now + Math.ceil(s * 1000);
  }
  const u = p.until;
  if (typeof u === "number") {
    if (!Number.isInteger(u) || u < 0 || u > MAX_TIME)
      return `until must be epoch milliseconds (an integer, 0 or more), got ${u}`;
    return u;
  }
  if (typeof u === "string" && (ISO_TIME.test(u) || ISO_DATE.test(u))) {
    if (!isCalendarDate(u.slice(0, 10))) return `until names a day that does not exist: ${JSON.stringify(u)}`;
    const t = Date.parse(u);
    if (Number.isFinite(t)) return t;
  }
  return `until must be an ISO 8601 time with a time zone (e.g. "2030-01-31T09:00:00Z") or epoch milliseconds, got ${JSON.stringify(u)}`;
}

/** Whether `YYYY-MM-DD` names a day that exists: Date.parse rolls 2030-02-31 over to 2030-03-03. */
function isCalendarDate(ymd: string): boolean {
  const [y, m, d] = ymd.split("-").map(Number) as [number, number, number];
  const day = new Date(0);
  day.setUTCFullYear(y, m - 1, d); // not Date.UTC, which reads years 0–99 as 1900–1999
  return day.getUTCFullYear() === y && day.getUTCMonth() === m - 1 && day.getUTCDate() === d;
}
