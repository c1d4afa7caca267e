/**
 * The page's only way to the server: the public HTTP API under /v1, with the bearer token the
 * user signed in with. The token lives in sessionStorage (gone when the tab closes) and travels
 * in the Authorization header only, never in a URL. With no tokens configured the API is open
 * and no token is needed.
 */
import type { Problem } from "./types.js";

const TOKEN_KEY = "skein.token";

export function storedToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function storeToken(token: string | null): void {
  if (token === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

/** An answer other than 2xx, in the API's one error shape. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Validation errors: every problem with its path. */
    readonly problems: Problem[] = [],
  ) {
    super(message);
  }
}

/** Told when the server wants a (valid) token: the page then shows the sign-in form. */
const unauthorizedListeners = new Set<() => void>();
export function onUnauthorized(listener: () => void): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

/** The Authorization header for `token` (the stored one unless given). */
export function authHeaders(token: string | null = storedToken()): Record<string, string> {
  return token === null ? {} : { authorization: `Bearer ${token}` };
}

/** Calls the API and parses its JSON. @throws ApiError for any answer but 2xx */
export async function api<T>(method: "GET" | "POST" | "PUT", path: string, body?: unknown): Promise<T> {
  const token = storedToken();
  const headers: Record<string, string> = { accept: "application/json", ...authHeaders(token) };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(path, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    cache: "no-store",
  });
  if (res.ok) return (await res.json()) as T;
  throw await errorOf(res, token);
}

/**
 * The ApiError of a refused answer to a request sent with `sentToken`, and the sign-in form for a
 * 401, unless the user has signed in (or out) since it was sent: requests sent before signing in
 * may be answered after it, and their 401 says nothing of the token the page holds now.
 */
export async function errorOf(res: Response, sentToken: string | null): Promise<ApiError> {
  if (res.status === 401 && sentToken === storedToken()) for (const listener of unauthorizedListeners) listener();
  let error: { code?: string; message?: string; details?: { problems?: Problem[] } } = {};
  try {
    error = ((await res.json()) as { error?: typeof error }).error ?? {};
  } catch {
    // Not the API's JSON (a proxy's page, a dropped connection): the status says enough.
  }
  return new ApiError(
    res.status,
    error.code ?? "http",
    error.message ?? `${res.status} ${res.statusText}`,
    error.details?.problems ?? [],
  );
}

/** A query string of the defined values. */
export function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined) search.set(key, String(value));
  const text = search.toString();
  return text === "" ? "" : `?${text}`;
}

/** What to show for an error of any kind. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
