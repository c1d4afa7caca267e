/** Retry delay of DESIGN §2: `fixed`, or `exponential` (interval × 2^(failures−1)), capped, with optional full jitter. */
export interface BackoffSettings {
  retry_interval: number;
  retry_backoff: "fixed" | "exponential";
  retry_max_interval: number;
  retry_jitter: "none" | "full";
}

/**
 * Milliseconds to wait before retrying after failure number `failures` with `error`: a service
 * that said when to come back (Retry-After) is believed, within retry_max_interval.
 */
export function retryWaitMs(
  s: BackoffSettings,
  failures: number,
  error: { retry_after_ms?: number },
  random: () => number,
): number {
  return error.retry_after_ms === undefined
    ? retryDelayMs(s, failures, random)
    : Math.min(error.retry_after_ms, s.retry_max_interval * 1000);
}

/** Reasons a built-in agent gives its failure that the node's reason keeps (routes may match on them). */
const KEPT_REASONS: ReadonlySet<string> = new Set(["invalid_output", "max_turns_exceeded", "budget_exceeded"]);

/**
 * Why an attempt that is not retried failed for good: its retries spent, or the reason a built-in
 * agent named (its output refused, an agent loop out of turns or of budget), else not retryable.
 */
export function finalFailureReason(retryable: boolean, error: { reason?: string }): string {
  if (retryable) return "retries_exhausted";
  return error.reason !== undefined && KEPT_REASONS.has(error.reason) ? error.reason : "non_retryable";
}

/** Milliseconds to wait before the retry that follows failure number `failures` (1-based). */
export function retryDelayMs(s: BackoffSettings, failures: number, random: () => number = Math.random): number {
  const base = s.retry_backoff === "exponential" ? s.retry_interval * 2 ** Math.max(0, failures - 1) : s.retry_interval;
  const capped = Math.min(base, s.retry_max_interval);
  const seconds = s.retry_jitter === "full" ? random() * capped : capped;
  return Math.round(seconds * 1000);
}
