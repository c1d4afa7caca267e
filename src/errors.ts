/**
 * The error family of Skein. Every error has a stable `code` (the HTTP layer and the CLI map
 * codes to statuses and exit codes) and a message that says what to do next.
 */

/** One problem found in user input, with where it is. */
export interface Problem {
  /** Where the problem is, e.g. `nodes[4].depends_on[1]` (empty for the whole document). */
  path: string;
  message: string;
}

export type SkeinErrorCode =
  | "validation"
  | "not_found"
  | "conflict"
  | "forbidden"
  | "database"
  | "engine_closed"
  | "limited"
  | "unavailable"
  | "non_retryable"
  | "retryable";

/** Base class: never thrown directly. */
export abstract class SkeinError extends Error {
  abstract readonly code: SkeinErrorCode;
}

/** Thrown when a definition, a run input or an option is invalid; `problems` lists every problem. */
export class ValidationError extends SkeinError {
  override readonly name = "ValidationError";
  readonly code = "validation";
  constructor(
    message: string,
    readonly problems: Problem[] = [],
  ) {
    super(problems.length > 0 ? `${message}:\n${problems.map(formatProblem).join("\n")}` : message);
  }
}

/** Thrown when a workflow, run, or node named by the caller does not exist. */
export class NotFoundError extends SkeinError {
  override readonly name = "NotFoundError";
  readonly code = "not_found";
}

/** Thrown when a request contradicts stored state (an idempotency key reused with another input, a finished run cancelled). */
export class ConflictError extends SkeinError {
  override readonly name = "ConflictError";
  readonly code = "conflict";
}

/** Thrown when the caller may not do what it asked (a review decided by someone not among its assignees). */
export class ForbiddenError extends SkeinError {
  override readonly name = "ForbiddenError";
  readonly code = "forbidden";
}

/** Thrown when the database file cannot be used: locked by another engine, corrupt, or not a Skein database. */
export class DatabaseError extends SkeinError {
  override readonly name = "DatabaseError";
  readonly code = "database";
  /** True when the same transaction may succeed if tried again: a deadlock, a lost connection. */
  readonly transient: boolean;
  /** True when the connection was lost while committing: the transaction may have committed. */
  readonly ambiguous: boolean;
  constructor(message: string, options: { transient?: boolean; ambiguous?: boolean; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.transient = options.transient ?? false;
    this.ambiguous = options.ambiguous ?? false;
  }
}

/**
 * Thrown when a caller is over a limit of what it may hold or send (DESIGN §13): too many
 * waiting claims or requests too fast for its token (`scope: "client"`, HTTP 429), or too many
 * waiting claims on the whole engine (`scope: "engine"`, HTTP 503). Retryable after
 * `retryAfterSeconds`.
 */
export class LimitError extends SkeinError {
  override readonly name = "LimitError";
  readonly code = "limited";
  constructor(
    message: string,
    readonly scope: "client" | "engine",
    readonly retryAfterSeconds: number,
  ) {
    super(message);
  }
}

/**
 * Thrown when the engine cannot record a request now because its storage failed for a reason
 * that passes (a full disk, a lost database connection): nothing of the request was written,
 * and the same request may succeed later. What the engine had already acknowledged is kept.
 */
export class UnavailableError extends SkeinError {
  override readonly name = "UnavailableError";
  readonly code = "unavailable";
  constructor(
    message: string,
    /** When to try again, in seconds (the engine's own retry pause). */
    readonly retryAfterSeconds = 1,
    options: { cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
  }
}

/** Thrown by engine methods called after `close()`. */
export class EngineClosedError extends SkeinError {
  override readonly name = "EngineClosedError";
  readonly code = "engine_closed";
}

/**
 * Thrown by an agent to fail its node for good: the engine does not retry it.
 * @example throw new NonRetryableError("the article was deleted upstream")
 */
export class NonRetryableError extends SkeinError {
  override readonly name = "NonRetryableError";
  readonly code = "non_retryable";
}

/**
 * Thrown by an agent to fail its attempt for now, retried as the node's retry settings allow.
 * `retryAfterMs` (a service's `Retry-After`) replaces the backoff delay of the retry, capped by
 * the node's `retry_max_interval`. Any other error is retried too; this one says when.
 * `rateLimited`: the service answered 429 (too many requests); with `retryAfterMs`, no attempt of
 * the agent type starts on any engine of the database for that long (DESIGN §17), and the visit's
 * error has reason `rate_limited`. The `llm` and `agent` nodes say so of their provider's 429s.
 * @example throw new RetryableError("rate limited", { retryAfterMs: 30_000, rateLimited: true })
 */
export class RetryableError extends SkeinError {
  override readonly name = "RetryableError";
  readonly code = "retryable";
  /** When to try again, in milliseconds (a non-negative integer), or undefined for the backoff delay. */
  readonly retryAfterMs: number | undefined;
  /** The service answered 429: it holds its agent type for `retryAfterMs`. */
  readonly rateLimited: boolean;
  constructor(message: string, options: { retryAfterMs?: number; rateLimited?: boolean; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    const ms = options.retryAfterMs;
    this.retryAfterMs = ms === undefined || !Number.isFinite(ms) || ms < 0 ? undefined : Math.round(ms);
    this.rateLimited = options.rateLimited === true;
  }
}

export function formatProblem(p: Problem): string {
  return p.path ? `  ${p.path}: ${p.message}` : `  ${p.message}`;
}

/** `word` after "a" or "an", by its first letter, for messages: "an aggregator node", "a sleep node". */
export function withArticle(word: string): string {
  return `${/^[aeiou]/i.test(word) ? "an" : "a"} ${word}`;
}
