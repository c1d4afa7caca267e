/**
 * With no tokens the API is open and bound to loopback (DESIGN §13); what keeps a web page on
 * another site from driving it by DNS rebinding (its name re-pointed at 127.0.0.1) is the `Host`
 * header, which the browser sets to that name. Only loopback names, with any port, and the host
 * of the `publicUrl` are answered. A page of another site that calls 127.0.0.1 by its own name
 * sends the right Host, but its `Origin` names that site: a request with an Origin of another
 * host (or `null`, from a sandboxed frame or a file) is refused alike. Clients other than
 * browsers send no Origin.
 */
import { HttpError } from "./errors.js";

const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** The host part of a Host header (`[::1]:8080` → `[::1]`), lower case; null when malformed. */
function hostOf(header: string): string | null {
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::\d{1,5})?$/i.exec(header.trim());
  return m?.[1] ? m[1].toLowerCase() : null;
}

/** The host of an Origin header, lower case; null for `null` or anything not a URL. */
function originHostOf(origin: string): string | null {
  try {
    return new URL(origin).hostname.toLowerCase() || null;
  } catch {
    return null;
  }
}

/** A check of the Host and Origin headers of each request to an open API. */
export function hostChecker(
  publicUrl: string | undefined,
): (host: string | undefined, origin?: string | string[] | undefined) => void {
  const allowed = new Set(LOOPBACK);
  if (publicUrl !== undefined) allowed.add(new URL(publicUrl).hostname.toLowerCase());
  const names = [...allowed].join(", ");
  return (header, origin) => {
    if (origin !== undefined) {
      const from = typeof origin === "string" ? originHostOf(origin) : null;
      if (from === null || !allowed.has(from)) {
        throw new HttpError(
          403,
          "forbidden",
          `with no tokens this API answers only pages of ${names}, not a request from ${JSON.stringify(origin)}: configure tokens (skein serve --tokens) to call it from another site`,
        );
      }
    }
    const host = header === undefined ? null : hostOf(header);
    if (host !== null && allowed.has(host)) return;
    throw new HttpError(
      403,
      "forbidden",
      `with no tokens this API answers only requests for ${names} (any port), not for ${header === undefined ? "a request without a Host header" : JSON.stringify(header)}: use one of those names, or configure tokens (skein serve --tokens)`,
    );
  };
}
