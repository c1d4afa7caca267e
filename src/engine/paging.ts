/** The paging options of a node's list reads (a map's items, an agent's messages): one check for both. */
import { ValidationError } from "../errors.js";

/**
 * Refuses a `visit` below 1, an `after` below -1, or a `limit` outside 1..`maxLimit`, each with
 * its path. `after` says what `after` counts ("an item index"), `things` what a page holds.
 * @throws ValidationError titled `Invalid <method> options`
 */
export function checkPaging(
  method: string,
  o: { visit: number | undefined; after: number; limit: number },
  words: { after: string; things: string; maxLimit: number },
): void {
  const problems = [];
  if (o.visit !== undefined && !(Number.isInteger(o.visit) && o.visit >= 1)) {
    problems.push({ path: "visit", message: `must be an integer of at least 1, got ${String(o.visit)}` });
  }
  if (!(Number.isInteger(o.after) && o.after >= -1)) {
    problems.push({
      path: "after",
      message: `must be ${words.after} (an integer of at least -1), got ${String(o.after)}`,
    });
  }
  if (!(Number.isInteger(o.limit) && o.limit >= 1 && o.limit <= words.maxLimit)) {
    problems.push({
      path: "limit",
      message: `must be an integer from 1 to ${words.maxLimit} (the most ${words.things} one page may have), got ${String(o.limit)}`,
    });
  }
  if (problems.length > 0) throw new ValidationError(`Invalid ${method} options`, problems);
}
