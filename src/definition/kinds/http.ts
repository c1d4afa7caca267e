/**
 * `http` (DESIGN §12): one HTTP request per attempt, run by the engine's built-in in-process
 * agent (src/calls/http.ts, wired in engine/engine-parts.ts). This module is the payload's
 * rules only (pure): what validation refuses in a definition, what a resolved payload must be,
 * and the request it describes with its defaults.
 *
 * Decisions where DESIGN is silent:
 * - `method` is one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS (upper case); default GET.
 *   GET and HEAD carry no body.
 * - `query` values are strings, numbers or booleans (or lists of them: the name repeated),
 *   appended to the url's own query.
 * - `body`: a string is sent as it is (text/plain unless a content-type header is given), any
 *   other JSON value as JSON (application/json).
 * - `ok_status`: a list of statuses (200) or ranges ("200-299", "2xx"); default 2xx.
 * - `max_redirects`: 0 to 10, default 5; 0 returns a 3xx response as it is (judged by ok_status).
 * - Workers may not claim `http` nodes: the engine runs them (its secrets, its limits).
 */

import type { Problem } from "../../errors.js";
import type { Json } from "../../json-text.js";
import type { NodeDefinition } from "../schema.js";
import type { KindRules } from "./kind.js";

export const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

export const DEFAULT_MAX_REDIRECTS = 5;
const MAX_REDIRECTS_LIMIT = 10;
/** A day: a longer call belongs in a worker, with heartbeats. */
const MAX_TIMEOUT_MS = 86_400_000;
/** RFC 9110 token characters: what a header name may be. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const RANGE = /^([1-5])xx$|^(\d{3})-(\d{3})$/;

/** The request an http payload describes, with its defaults applied. */
export interface HttpRequestSpec {
  method: HttpMethod;
  url: string;
  headers: Record<string, string>;
  query: Record<string, string | number | boolean | (string | number | boolean)[]>;
  /** Absent: no body. */
  body?: Json;
  timeout_ms: number | null;
  /** Inclusive ranges of the statuses that succeed. */
  ok_status: [number, number][];
  max_redirects: number;
}

export const http: KindRules = {
  name: "http",
  start: "agent",
  notClaimable: "run in the engine (its built-in http agent, with the engine's secrets and limits)",
  retries: true,
  validate(node: NodeDefinition, checks) {
    // A version stored before `http` was a built-in kind (an agent of that name) still loads.
    if (checks.stored) return [];
    return payloadProblems(node.payload as Json, `${checks.at}.payload`, true);
  },
  checkResolved(payload) {
    const problems = payloadProblems(payload, "payload", false);
    return problems.length === 0 ? null : problems.map((p) => `${p.path}: ${p.message}`).join("; ");
  },
};

/**
 * Every problem of an http payload, each with its path under `at`. With `templates`, a string
 * holding `{{` is not judged (it is resolved later, and checked then by `checkResolved`).
 */
export function payloadProblems(payload: Json, at: string, templates: boolean): Problem[] {
  if (templates && isTemplate(payload)) return [];
  if (payload === null || typeof payload !== "object" || Array.isArray(payload)) {
    return [{ path: at, message: "must be an object: { method, url, headers, query, body, timeout_ms, ok_status }" }];
  }
  const problems: Problem[] = [];
  const add = (field: string, message: string) => problems.push({ path: `${at}.${field}`, message });
  const judged = (field: string) => field in payload && !(templates && isTemplate(payload[field] as Json));
  const known = ["method", "url", "headers", "query", "body", "timeout_ms", "ok_status", "max_redirects"];
  for (const field of Object.keys(payload)) {
    if (!known.includes(field)) add(field, `is not an http payload field; the fields are ${known.join(", ")}`);
  }
  if (!("url" in payload)) add("url", "is required: the absolute http:// or https:// URL to call");
  else if (judged("url")) {
    const problem = urlProblem(payload.url as Json);
    if (problem) add("url", problem);
  }
  const method = payload.method;
  if (judged("method") && !HTTP_METHODS.includes(method as HttpMethod)) {
    add("method", `must be one of ${HTTP_METHODS.join(", ")}, got ${JSON.stringify(method)}`);
  }
  if (judged("headers")) for (const [k, m] of headerProblems(payload.headers as Json, templates)) add(k, m);
  if (judged("query")) for (const [k, m] of queryProblems(payload.query as Json, templates)) add(k, m);
  if ("body" in payload && (method === "GET" || method === "HEAD" || !("method" in payload))) {
    add(
      "body",
      `a ${typeof method === "string" ? method : "GET"} request has no body; set method to POST, PUT or PATCH`,
    );
  }
  const timeout = payload.timeout_ms;
  if (
    judged("timeout_ms") &&
    !(Number.isInteger(timeout) && (timeout as number) >= 1 && (timeout as number) <= MAX_TIMEOUT_MS)
  ) {
    add("timeout_ms", `must be an integer of milliseconds from 1 to ${MAX_TIMEOUT_MS}, got ${JSON.stringify(timeout)}`);
  }
  if (judged("ok_status")) {
    const problem = okStatusProblem(payload.ok_status as Json, templates);
    if (problem) add("ok_status", problem);
  }
  const redirects = payload.max_redirects;
  if (
    judged("max_redirects") &&
    !(Number.isInteger(redirects) && (redirects as number) >= 0 && (redirects as number) <= MAX_REDIRECTS_LIMIT)
  ) {
    add("max_redirects", `must be an integer from 0 to ${MAX_REDIRECTS_LIMIT}, got ${JSON.stringify(redirects)}`);
  }
  return problems;
}

/**
 * The request a resolved payload describes (defaults applied).
 * @throws Error naming every problem, for a payload `checkResolved` would refuse
 */
export function httpRequestOf(payload: Json): HttpRequestSpec {
  const problems = payloadProblems(payload, "payload", false);
  if (problems.length > 0) throw new Error(problems.map((p) => `${p.path}: ${p.message}`).join("; "));
  const p = payload as Record<string, Json>;
  const spec: HttpRequestSpec = {
    method: (p.method as HttpMethod | undefined) ?? "GET",
    url: p.url as string,
    headers: (p.headers as Record<string, string> | undefined) ?? {},
    query: (p.query as HttpRequestSpec["query"] | undefined) ?? {},
    timeout_ms: (p.timeout_ms as number | undefined) ?? null,
    ok_status: ((p.ok_status as (number | string)[] | undefined) ?? ["2xx"]).map(statusRange),
    max_redirects: (p.max_redirects as number | undefined) ?? DEFAULT_MAX_REDIRECTS,
  };
  if ("body" in p) spec.body = p.body as Json;
  return spec;
}

/** Whether a status is among the payload's ok ones. */
export function isOkStatus(spec: Pick<HttpRequestSpec, "ok_status">, status: number): boolean {
  return spec.ok_status.some(([lo, hi]) => status >= lo && status <= hi);
}

function isTemplate(value: Json | undefined): boolean {
  return typeof value === "string" && value.includes("{{");
}

function urlProblem(url: Json): string | null {
  if (typeof url !== "string") return `must be a string URL, got ${JSON.stringify(url)}`;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `must be an absolute URL with http:// or https://, got ${JSON.stringify(url)}`;
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    return `must use http:// or https://, not ${parsed.protocol}//`;
  }
  if (parsed.username !== "" || parsed.password !== "") {
    return "must not hold a user name or password; send credentials in a header, e.g. Authorization: Bearer {{ secrets.TOKEN }}";
  }
  return null;
}

function headerProblems(headers: Json, templates: boolean): [string, string][] {
  if (headers === null || typeof headers !== "object" || Array.isArray(headers)) {
    return [["headers", "must be an object of header names to string values"]];
  }
  const problems: [string, string][] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name)) problems.push([`headers.${name}`, "is not a valid header name (RFC 9110 token)"]);
    else if (typeof value !== "string") {
      problems.push([`headers.${name}`, `must be a string, got ${JSON.stringify(value)}`]);
    } else if (!(templates && isTemplate(value)) && /[\r\n\0]/.test(value)) {
      problems.push([`headers.${name}`, "must not hold a line break or a NUL character"]);
    }
  }
  return problems;
}

function queryProblems(query: Json, templates: boolean): [string, string][] {
  if (query === null || typeof query !== "object" || Array.isArray(query)) {
    return [["query", "must be an object of parameter names to values"]];
  }
  const scalar = (v: Json) => typeof v === "string" || typeof v === "number" || typeof v === "boolean";
  const problems: [string, string][] = [];
  for (const [name, value] of Object.entries(query)) {
    if (templates && isTemplate(value)) continue;
    if (!(scalar(value) || (Array.isArray(value) && value.every(scalar)))) {
      problems.push([`query.${name}`, "must be a string, number or boolean, or a list of them"]);
    }
  }
  return problems;
}

function okStatusProblem(value: Json, templates: boolean): string | null {
  const message = 'must be a non-empty list of statuses (200) or ranges ("200-299", "2xx")';
  if (!Array.isArray(value) || value.length === 0) return message;
  for (const item of value) {
    if (templates && isTemplate(item)) continue;
    if (typeof item === "number" && Number.isInteger(item) && item >= 100 && item <= 599) continue;
    if (typeof item === "string") {
      const [lo, hi] = statusRange(item);
      if (lo >= 100 && hi <= 599 && lo <= hi) continue;
    }
    return `${message}, got ${JSON.stringify(item)}`;
  }
  return null;
}

/** A status or range as [lo, hi]; [0, -1] when it is neither. */
function statusRange(item: number | string): [number, number] {
  if (typeof item === "number") return [item, item];
  const m = RANGE.exec(item);
  if (!m) return [0, -1];
  if (m[1] !== undefined) return [Number(m[1]) * 100, Number(m[1]) * 100 + 99];
  return [Number(m[2]), Number(m[3])];
}
