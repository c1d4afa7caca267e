/** What a handler's throw becomes: the visit error recorded, and whether it is retried. */
import type { VisitError } from "../../core/types.js";
import { NonRetryableError, RetryableError } from "../../errors.js";
import { RATE_LIMITED } from "../writer/rates.js";

export function isNonRetryable(e: unknown): boolean {
  return e instanceof NonRetryableError || (e instanceof Error && e.name === "NonRetryableError");
}

/** A built-in agent's NonRetryableError may name its reason (`invalid_output` for an http body over the limit). */
function nonRetryableReason(e: Error): string {
  const reason = (e as { reason?: unknown }).reason;
  return e instanceof NonRetryableError && typeof reason === "string" ? reason : "non_retryable";
}

export function errorOf(e: unknown): VisitError {
  if (e instanceof Error) {
    const error: VisitError = {
      message: e.message || e.name,
      reason: isNonRetryable(e) ? nonRetryableReason(e) : "error",
      name: e.name,
    };
    if (e instanceof RetryableError && e.retryAfterMs !== undefined) error.retry_after_ms = e.retryAfterMs;
    // A service's 429: the flush that applies it may hold the agent type (writer/rates.ts).
    if (e instanceof RetryableError && e.rateLimited) error.reason = RATE_LIMITED;
    return error;
  }
  return { message: typeof e === "string" ? e : `handler threw a non-Error value: ${safeString(e)}`, reason: "error" };
}

function safeString(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
