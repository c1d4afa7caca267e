/**
 * Who may decide a review (DESIGN §13): `payload.assignees` is a non-empty list of names. It
 * fails closed: any other value (a string, an object, an empty list, a template that resolves
 * to one of these) is refused, at validation or when the review's payload is resolved, since
 * "anything but a list" used to mean "anyone may decide". An absent `assignees` lets any
 * reviewer decide, as before: that is written, not an accident.
 */

/** Why `value` is not a list of assignees, or null when it is one. */
export function assigneesProblem(value: unknown): string | null {
  if (!Array.isArray(value)) return `must be a list of names, got ${describe(value)}`;
  if (value.length === 0) {
    return "must name at least one assignee (an empty list would let nobody decide); omit assignees to let any reviewer decide";
  }
  const bad = value.findIndex((name) => typeof name !== "string" || name.trim() === "");
  if (bad >= 0) return `must be a list of non-empty names, but item ${bad} is ${describe(value[bad])}`;
  return null;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (typeof value === "object") return "an object";
  return String(value);
}
