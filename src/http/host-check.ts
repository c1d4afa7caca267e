/**
 * With no tokens the API is open and bound to loopback (DESIGN §13); what keeps a web page on
 * another site from driving it by DNS rebinding (its name re-pointed at 127.0.0.1) is the `Host`
 * header, which the browser sets to that name. Only loopback names, with any port, and the host
 * of the `publicUrl` are answered.
 */
import { HttpError } from "./errors.js";

const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** The host part of a Host header (`[::1]:8080` → `[::1]`), lower case; null when malformed. */
function hostOf(header: string): string | null {
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::\d{1,5})?$/i.exec(header.trim());
  return m?.[1] ? m[1].toLowerCase() : null;
}

/** A check of the Host header of each request to an open API. */
export function hostChecker(publicUrl: string | undefined): (host: string | undefined) => void {
  const allowed = new Set(LOOPBACK);
  if (publicUrl !== undefined) allowed.add(new URL(publicUrl).hostname.toLowerCase());
  const names = [...allowed].join(", ");
  return (header) => {
    const host = header === undefined ? null : hostOf(header);
    if (host !== null && allowed.has(host)) return;
    throw new HttpError(
      403,
      "forbidden",
      `with no tokens this API answers only requests for ${names} (any port), not for ${header === undefined ? "a request without a Host header" : JSON.stringify(header)}: use one of those names, or configure tokens (skein serve --tokens)`,
    );
  };
}
