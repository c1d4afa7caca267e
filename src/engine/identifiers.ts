/**
 * Ids, names and keys a caller sends are refused when they hold a NUL character (\u0000):
 * PostgreSQL cannot store one in text, SQLite can, so without this check the same call failed on
 * one store and succeeded (or found nothing) on the other. Checked at the Engine's public methods,
 * before the store or the dispatcher sees the value, so both stores answer the same (and the HTTP
 * API, which calls them, answers 400). Data (inputs, payloads, outputs) is JSON text when stored,
 * where a NUL is escaped: it is not checked here.
 */
import { type Problem, ValidationError } from "../errors.js";

/**
 * @param fields the caller's ids by the name the API gives them (`run_id`, `idempotency_key`, ...):
 *   strings or lists of them; anything else is left to the method's own checks
 * @throws ValidationError naming every field that holds a NUL character
 */
export function refuseNul(fields: Record<string, unknown>): void {
  const problems: Problem[] = [];
  const check = (path: string, value: unknown) => {
    if (typeof value === "string" && value.includes("\u0000")) {
      problems.push({ path, message: "holds a NUL character (\\u0000), which the database cannot store: remove it" });
    }
  };
  for (const [path, value] of Object.entries(fields)) {
    if (!Array.isArray(value)) check(path, value);
    else for (const [i, v] of value.entries()) check(`${path}[${i}]`, v);
  }
  if (problems.length > 0) throw new ValidationError("An id, name or key is not valid", problems);
}
