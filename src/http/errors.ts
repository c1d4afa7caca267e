/**
 * The one error shape of the API, `{ "error": { "code", "message", "details" } }`, and the one
 * place where errors become HTTP statuses. The library's errors keep their message (written for
 * the caller); anything unexpected is logged and answered 500 without its message or stack.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import {
  ConflictError,
  DatabaseError,
  EngineClosedError,
  ForbiddenError,
  NotFoundError,
  UnavailableError,
  ValidationError,
} from "../errors.js";

export type ErrorCode =
  | "validation"
  | "bad_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "payload_too_large"
  | "unsupported_media_type"
  | "unavailable"
  | "internal";

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

/** The status and body an error is answered with, and a `Retry-After` (seconds) where waiting helps. */
export function toResponse(
  err: unknown,
  bodyLimit: number,
): { status: number; body: ErrorBody; unexpected: boolean; retryAfter?: number } {
  const known = (status: number, code: ErrorCode, message: string, details: Record<string, unknown> = {}) => ({
    status,
    body: errorBody(code, message, details),
    unexpected: false,
  });
  if (err instanceof HttpError) return known(err.statusCode, err.code, err.message, err.details);
  if (err instanceof UnavailableError) {
    // Storage failed for a reason that passes (a full disk): nothing was written; try again later.
    const message = "the server cannot record anything now (its storage is failing); nothing was written, retry later";
    return { ...known(503, "unavailable", message), retryAfter: err.retryAfterSeconds };
  }
  if (err instanceof ValidationError) {
    // The message without the problem lines (they are in details, with their paths).
    return known(400, "validation", (err.message.split("\n")[0] ?? "").replace(/:$/, ""), { problems: err.problems });
  }
  if (err instanceof NotFoundError) return known(404, "not_found", err.message);
  if (err instanceof ConflictError) return known(409, "conflict", err.message);
  if (err instanceof ForbiddenError) return known(403, "forbidden", err.message);
  if (err instanceof EngineClosedError) return known(503, "unavailable", "the engine is stopping; try again shortly");
  if (err instanceof DatabaseError) {
    // Its message may name files or hosts: logged, not answered.
    const body = errorBody("unavailable", "the database did not answer; try again");
    return { status: 503, body, unexpected: true, ...(err.transient ? { retryAfter: 1 } : {}) };
  }
  const fastify = err as Partial<FastifyError>;
  const status = fastify.statusCode;
  if (typeof status === "number" && status >= 400 && status < 500) {
    // fastify's own refusals of a request (bad JSON, bad content length, ...): their messages are about the request.
    if (fastify.code === "FST_ERR_CTP_INVALID_JSON_BODY") {
      // secure-json-parse refuses both alike (onProtoPoisoning and onConstructorPoisoning: "error").
      return known(
        400,
        "bad_request",
        "the body is not valid JSON, or it has a __proto__ or constructor.prototype key (refused)",
      );
    }
    if (status === 413) {
      return known(413, "payload_too_large", `the request body is over the limit of ${bodyLimit} bytes`, {
        limit_bytes: bodyLimit,
      });
    }
    if (status === 415) return known(415, "unsupported_media_type", `${fastify.message}; send application/json`);
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
