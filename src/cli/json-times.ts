/**
 * The CLI's JSON output gives every time twice: beside each epoch-ms field `x_at` (and an
 * event's `at`), `x_at_iso` in ISO 8601 UTC, for people and for tools that do not do epoch
 * arithmetic. Only at the output edge: the library's types keep epoch ms. What users wrote
 * (inputs, outputs, payloads, definitions, error details) is printed as it is.
 */

/** Fields that hold a user's own JSON, whose keys are not the engine's. */
const USER_DATA: ReadonlySet<string> = new Set(["input", "output", "payload", "definition", "details", "comment"]);

const isTimeKey = (key: string) => key === "at" || key.endsWith("_at");

/** A copy of `value` with `<key>_iso` after each time field (null for a null time). */
export function withIsoTimes(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withIsoTimes);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) {
    out[key] = USER_DATA.has(key) ? field : withIsoTimes(field);
    if (!isTimeKey(key) || `${key}_iso` in value) continue;
    if (field === null) out[`${key}_iso`] = null;
    else if (typeof field === "number" && Number.isFinite(field)) out[`${key}_iso`] = isoTime(field);
  }
  return out;
}

/** ISO 8601 UTC; a number outside Date's range (not a time) is left out as null. */
function isoTime(ms: number): string | null {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}
