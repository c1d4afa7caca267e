/** The error every failed call of skein/client throws (a network failure stays fetch's own TypeError). */
import type { ApiErrorCode } from "./types.js";

/**
 * The API answered an error: its HTTP `status` and the stable `code` of its error body
 * (`not_found`, `conflict`, `validation`, ...), for programs to branch on; `message` is for people.
 * `unexpected_response`: the answer was not the API's error shape (a proxy's 502 page, say).
 */
export class SkeinApiError extends Error {
  override readonly name = "SkeinApiError";
  constructor(
    readonly status: number,
    readonly code: ApiErrorCode | "unexpected_response",
    message: string,
    /** validation errors: `problems`, each with its path; limits: `retry_after_seconds`. */
    readonly details: Record<string, unknown> = {},
    /** Seconds the server asked to wait before trying again (`Retry-After` on 429 and 503). */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

/** The error of a non-2xx answer, read from its body (which is consumed). */
export async function errorOf(res: Response): Promise<SkeinApiError> {
  const text = await res.text().catch(() => "");
  const retryAfter = Number(res.headers.get("retry-after") ?? Number.NaN);
  const wait = Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined;
  try {
    const { error } = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; details?: unknown } };
    if (error && typeof error.code === "string" && typeof error.message === "string") {
      const details = error.details !== null && typeof error.details === "object" ? error.details : {};
      return new SkeinApiError(
        res.status,
        error.code as ApiErrorCode,
        error.message,
        details as Record<string, unknown>,
        wait,
      );
    }
  } catch {
    // Not JSON: answered below.
  }
  const head = text.slice(0, 200).trim();
  return new SkeinApiError(
    res.status,
    "unexpected_response",
    `${res.status} ${res.statusText}${head ? `: ${head}` : ""}`,
    {},
    wait,
  );
}
