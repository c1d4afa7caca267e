/**
 * A request that met a closed connection before any answer (issue 33). The common cause is a
 * race, not a failure: a client reuses a kept-alive connection just as the server closes it for
 * being idle (its timer and the client's both near their end, more often on a loaded machine),
 * and the request dies with ECONNRESET, EPIPE, or undici's "other side closed" (UND_ERR_SOCKET).
 * Such a request is sent again once, on a new connection, when sending it twice changes nothing
 * (GET, and the POSTs the API makes idempotent): each client lists its own. A second reset is
 * the server's, not the race: it is reported.
 */

/** Node's codes for a connection closed under a request, and undici's (fetch's) for the same. */
const RESET_CODES = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"]);

/** True when `e` (or what it wraps: fetch's TypeError carries the socket's error as `cause`) is a reset connection. */
export function isConnectionReset(e: unknown): boolean {
  for (let error = e, depth = 0; error instanceof Error && depth < 4; error = error.cause, depth++) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== undefined && RESET_CODES.has(code)) return true;
    if (error.message === "other side closed") return true;
  }
  return false;
}

/**
 * `send()`, and once more if it failed on a reset connection and `resendable` (sending it twice
 * changes nothing). `send` must fail only before any answer arrived for a reset to count: an
 * answer cut halfway may have been acted on.
 */
export async function resendOnReset<T>(resendable: boolean, send: () => Promise<T>): Promise<T> {
  try {
    return await send();
  } catch (e) {
    if (!resendable || !isConnectionReset(e)) throw e;
    return send();
  }
}
