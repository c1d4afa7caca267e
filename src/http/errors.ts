/**
 * The one error shape of the API, `{ "error": { "code", "message", "details" } }`, and the one
 * place where errors become HTTP statuses. The library's errors keep their message (written for
 * the caller); anything unexpected is logged and answered 500 without its message or stack.
 */
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import type {
  ConflictError,
  DatabaseError,
  EngineClosedError,
  ForbiddenError,
  LimitError,
  NonRetryableError,
  NotFoundError,
  RetryableError,
  SkeinErrorCode,
  UnavailableError,
  ValidationError,
} from "../errors.js";

/** Every `error.code` the API answers: stable, for programs to branch on. */
export const ERROR_CODES = [
  "validation",
  "bad_request",
  "unauthorized",
  "forbidden",
  "not_found",
  "conflict",
  "payload_too_large",
  "uri_too_long",
  "unsupported_media_type",
  "request_timeout",
  "headers_too_large",
  "too_many_requests",
  "unavailable",
  "internal",
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * The longest path segment the router takes (fastify's default, 100, refused the execution ids
 * of long node ids with a 414). Above every id's own limit, so the route's schema answers with
 * the precise 400 instead.
 */
export const MAX_PARAM_LENGTH = 2000;

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details: Record<string, unknown> };
}

/** An error the HTTP layer itself raises (auth, bad cursors, ...), with its status and code. */
export class HttpError extends Error {
  override readonly name = "HttpError";
  constructor(
    readonly statusCode: number,
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export function errorBody(code: ErrorCode, message: string, details: Record<string, unknown> = {}): ErrorBody {
  return { error: { code, message, details } };
}

/** How an error is answered: its status and body, whether to log it, and a `Retry-After` (seconds) where waiting helps. */
export interface Answer {
  status: number;
  body: ErrorBody;
  unexpected: boolean;
  retryAfter?: number;
}

/** The library's error whose `code` is C (each class declares its code as a literal). */
type ErrorWithCode<C extends SkeinErrorCode> = Extract<
  | ValidationError
  | NotFoundError
  | ConflictError
  | ForbiddenError
  | DatabaseError
  | EngineClosedError
  | LimitError
  | UnavailableError
  | NonRetryableError
  | RetryableError,
  { code: C }
>;

function known(status: number, code: ErrorCode, message: string, details: Record<string, unknown> = {}): Answer {
  return { status, body: errorBody(code, message, details), unexpected: false };
}

/**
 * The one table of the library's errors as HTTP answers, by their stable `code` (errors.ts).
 * Null: not the caller's to see (an agent's own errors never reach a route), answered 500.
 */
const ANSWERS: { readonly [C in SkeinErrorCode]: ((err: ErrorWithCode<C>) => Answer) | null } = {
  // The message without the problem lines (they are in details, with their paths).
  validation: (err) =>
    known(400, "validation", (err.message.split("\n")[0] ?? "").replace(/:$/, ""), { problems: err.problems }),
  not_found: (err) => known(404, "not_found", err.message),
  conflict: (err) => known(409, "conflict", err.message),
  forbidden: (err) => known(403, "forbidden", err.message),
  limited: (err) => ({
    ...(err.scope === "client"
      ? known(429, "too_many_requests", err.message, { retry_after_seconds: err.retryAfterSeconds })
      : known(503, "unavailable", err.message, { retry_after_seconds: err.retryAfterSeconds })),
    retryAfter: err.retryAfterSeconds,
  }),
  // Storage failed for a reason that passes (a full disk): nothing was written; try again later.
  unavailable: (err) => ({
    ...known(
      503,
      "unavailable",
      "the server cannot record anything now (its storage is failing); nothing was written, retry later",
    ),
    retryAfter: err.retryAfterSeconds,
  }),
  engine_closed: () => known(503, "unavailable", "the engine is stopping; try again shortly"),
  // Its message may name files or hosts: logged, not answered.
  database: (err) => ({
    status: 503,
    body: errorBody("unavailable", "the database did not answer; try again"),
    unexpected: true,
    ...(err.transient ? { retryAfter: 1 } : {}),
  }),
  non_retryable: null,
  retryable: null,
};

/**
 * The library's error with this code, told by its `code` as the CLI does (output.ts), not by its
 * class: an error from another copy of the package is answered the same.
 */
export function hasCode<C extends SkeinErrorCode>(err: unknown, code: C): err is ErrorWithCode<C> {
  return err instanceof Error && (err as { code?: unknown }).code === code;
}

/** How an error is answered: the HTTP layer's own errors carry their answer, the library's are looked up by code. */
export function toResponse(err: unknown, bodyLimit: number): Answer {
  if (err instanceof HttpError) return known(err.statusCode, err.code, err.message, err.details);
  const code = err instanceof Error ? (err as { code?: unknown }).code : undefined;
  const answer = typeof code === "string" && Object.hasOwn(ANSWERS, code) ? ANSWERS[code as SkeinErrorCode] : null;
  if (answer) return answer(err as never);
  return frameworkAnswer(err, bodyLimit);
}

/** fastify's own refusals of a request (bad JSON, bad content length, ...): their messages are about the request. Else 500. */
function frameworkAnswer(err: unknown, bodyLimit: number): Answer {
  const fastify = err as Partial<FastifyError>;
  const status = fastify.statusCode;
  if (typeof status === "number" && status >= 400 && status < 500) {
    if (status === 413) {
      return known(413, "payload_too_large", `the request body is over the limit of ${bodyLimit} bytes`, {
        limit_bytes: bodyLimit,
      });
    }
    if (status === 415) return known(415, "unsupported_media_type", `${fastify.message}; send application/json`);
    if (fastify.code === "FST_ERR_MAX_PARAM_LENGTH") {
      return known(414, "uri_too_long", `a path segment is over ${MAX_PARAM_LENGTH} characters: no id is that long`);
    }
    if (fastify.code === "FST_ERR_BAD_URL") {
      return known(
        400,
        "bad_request",
        "the URL's path is not valid percent-encoding (a % must start %XX of UTF-8): encode ids with encodeURIComponent",
      );
    }
    return known(400, "bad_request", fastify.message ?? "bad request");
  }
  return {
    status: 500,
    body: errorBody("internal", "internal error; the server log has the details"),
    unexpected: true,
  };
}

/** fastify's error handler: answers in the one shape; logs what was not the caller's fault. */
export function handleError(err: unknown, request: FastifyRequest, reply: FastifyReply, bodyLimit: number): void {
  const { status, body, unexpected, retryAfter } = toResponse(err, bodyLimit);
  if (unexpected) request.log.error({ err }, "request failed");
  if (status === 401) void reply.header("www-authenticate", 'Bearer realm="skein"');
  if (retryAfter !== undefined) void reply.header("retry-after", String(retryAfter));
  void reply.code(status).type("application/json").send(body);
}

/**
 * Answers what the HTTP parser refused before any route saw it (the `clientError` of node's
 * server: a request or headers timeout, headers too large, malformed HTTP) in the one shape,
 * then closes the connection.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  const [status, body] =
    err.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? [408, errorBody("request_timeout", "the request did not arrive in time: send headers and body promptly")]
      : err.code === "HPE_HEADER_OVERFLOW"
        ? [431, errorBody("headers_too_large", "the request line and headers are over the size limit (16 KiB)")]
        : [400, errorBody("bad_request", "the request is not valid HTTP/1.1")];
  if (socket.writable) {
    const text = JSON.stringify(body);
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
    );
  }
  socket.destroy(err);
}
