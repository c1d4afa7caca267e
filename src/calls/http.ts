/**
 * The `http` node's built-in agent (DESIGN §12): one request per attempt, with node:http(s).
 * The payload's rules are definition/kinds/http.ts; this is the I/O.
 *
 * - `Idempotency-Key: <execution_id>` unless the payload sets one (any case): the same on every
 *   attempt of the visit, so a service that honours it does the work once.
 * - Aborted at the attempt's signal (its deadline, a cancel) and at `timeout_ms` (the engine's
 *   clock), body reading included.
 * - Redirects are followed here (at most `max_redirects`): 303, and 301/302 after a POST, become
 *   a GET without a body (RFC 9110 §15.4); 307/308 keep the method and body. A redirect to
 *   another origin drops Authorization, Cookie, Proxy-Authorization and every header that
 *   carries a secret's value (in any of its encoded forms); one that would re-send a body
 *   carrying a secret (307/308) is refused, not retried (DESIGN §13.1).
 * - Every request and redirect hop is checked before it is sent: the secrets it carries must
 *   allow its host (their `hosts`), and the socket connects only to addresses the egress rules
 *   allow, checked in its DNS lookup (egress.ts). Requests go through node:http(s) for that
 *   lookup (Node's fetch takes no resolver), one connection each (no pooled socket is reused
 *   across engines with other rules).
 * - The body is read as a stream up to `maxResponseBytes` (maxPayloadBytes): a larger one fails
 *   the attempt, not retried (`invalid_output`). A JSON content type is parsed strictly
 *   (json-text.ts), anything else is text (UTF-8); a body that is not UTF-8 (binary, Latin-1) is
 *   kept as received, in base64 with `body_encoding: "base64"`, never decoded with U+FFFD.
 * - 429, 5xx, network errors and `timeout_ms` fail the attempt as retryable, `Retry-After`
 *   (seconds or an HTTP date) setting the delay; any other status not in `ok_status` is not
 *   retried, its message with the status and the start of the body (its first 300 bytes,
 *   secrets redacted before the cut: a value cut at the end would escape redaction).
 */
import { isUtf8 } from "node:buffer";
import http from "node:http";
import https from "node:https";
import { Readable } from "node:stream";
import type { AgentHandler, Task } from "../agents/task.js";
import type { Clock } from "../clock.js";
import type { Json } from "../core/types.js";
import { type HttpRequestSpec, httpRequestOf, isOkStatus } from "../definition/kinds/http.js";
import type { Secrets } from "../engine/attempts/secrets.js";
import { NonRetryableError, RetryableError } from "../errors.js";
import { parseJsonText } from "../json-text.js";
import { Egress } from "./egress.js";

export interface HttpAgentOptions {
  /** The largest response body read, in bytes (the engine's maxPayloadBytes). */
  maxResponseBytes: number;
  /** The engine's clock: `timeout_ms` and HTTP-date Retry-After are judged by it. */
  clock: Clock;
  /** Where requests may go (DESIGN §13.1). @defaultValue link-local and nothing else refused */
  egress?: Egress;
  /** The engine's secrets: their hosts are checked on every hop, and a redirect drops what carries them. */
  secrets?: Secrets;
}

/** The output of an http node. */
export interface HttpOutput {
  status: number;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  /** Parsed JSON for a JSON content type, else text; null when empty; base64 when the bytes are not UTF-8. */
  body: Json;
  /** Present, as "base64", only when `body` holds bytes that are not UTF-8 text, in base64. */
  body_encoding?: "base64";
}

/** A response body over the limit: fails the attempt with reason `invalid_output`, not retried. */
export class ResponseTooLargeError extends NonRetryableError {
  readonly reason = "invalid_output";
}

const EXCERPT_BYTES = 300;
const CROSS_ORIGIN_DROPPED = ["authorization", "cookie", "proxy-authorization"];

/** The agent that runs `http` nodes' attempts. */
export function httpAgent(options: HttpAgentOptions): AgentHandler {
  return async (task: Task) => {
    let spec: HttpRequestSpec;
    try {
      spec = httpRequestOf(task.payload);
    } catch (e) {
      throw new NonRetryableError(`the http payload is invalid: ${(e as Error).message}`);
    }
    return callHttp(spec, task, options);
  };
}

async function callHttp(spec: HttpRequestSpec, task: Task, o: HttpAgentOptions): Promise<HttpOutput> {
  const controller = new AbortController();
  const attemptSignal = task.signal;
  const onAbort = () => controller.abort(attemptSignal.reason);
  if (attemptSignal.aborted) throw attemptSignal.reason;
  attemptSignal.addEventListener("abort", onAbort, { once: true });
  let timedOut = false;
  const timer =
    spec.timeout_ms === null
      ? null
      : o.clock.setTimeout(() => {
          timedOut = true;
          controller.abort(new Error("timeout_ms"));
        }, spec.timeout_ms);
  let where = `${spec.method} ${describeUrl(spec.url)}`;
  try {
    const response = await send(spec, task, controller.signal, o, (url, method) => {
      where = `${method} ${describeUrl(url)}`;
    });
    return await judge(response, spec, where, o);
  } catch (e) {
    if (attemptSignal.aborted) throw attemptSignal.reason;
    if (timedOut) throw new RetryableError(`${where} gave no whole response within timeout_ms (${spec.timeout_ms} ms)`);
    if (e instanceof NonRetryableError || e instanceof RetryableError) throw e;
    throw new RetryableError(`${where} failed: ${networkMessage(e)}`, { cause: e });
  } finally {
    if (timer !== null) o.clock.clearTimeout(timer);
    attemptSignal.removeEventListener("abort", onAbort);
  }
}

/** Sends the request and follows redirects; the last response, its body unread. */
async function send(
  spec: HttpRequestSpec,
  task: Task,
  signal: AbortSignal,
  o: HttpAgentOptions,
  at: (url: string, method: string) => void,
): Promise<Response> {
  const egress = o.egress ?? DEFAULT_EGRESS;
  let url = withQuery(spec.url, spec.query);
  let method: string = spec.method;
  const headers = new Headers(spec.headers);
  let body: string | undefined;
  if (spec.body !== undefined) {
    body = typeof spec.body === "string" ? spec.body : JSON.stringify(spec.body);
    if (!headers.has("content-type")) {
      headers.set("content-type", typeof spec.body === "string" ? "text/plain; charset=utf-8" : "application/json");
    }
  }
  if (!headers.has("idempotency-key")) headers.set("idempotency-key", task.execution_id);
  for (let redirects = 0; ; redirects += 1) {
    at(url, method);
    const target = new URL(url);
    const refused = o.secrets?.hostRefusal(carriers(target, headers, body), hostOf(target)) ?? null;
    if (refused !== null) throw new NonRetryableError(`${method} ${describeUrl(url)}: ${refused}`);
    const response = await request(target, method, headers, body, signal, egress);
    const location = response.headers.get("location");
    if (!isRedirect(response.status) || location === null || spec.max_redirects === 0) return response;
    await response.body?.cancel();
    if (redirects >= spec.max_redirects) {
      throw new NonRetryableError(
        `${method} ${describeUrl(url)}: stopped after ${spec.max_redirects} redirects (max_redirects), the last to ${describeUrl(location, url)}; call the final URL, or raise max_redirects (at most 10)`,
      );
    }
    const next = new URL(location, url);
    if (next.protocol !== "http:" && next.protocol !== "https:") {
      throw new NonRetryableError(
        `${method} ${describeUrl(url)} redirected to ${next.protocol} URL, which is not followed`,
      );
    }
    const status = response.status;
    if ((status === 303 && method !== "HEAD") || ((status === 301 || status === 302) && method === "POST")) {
      method = "GET";
      body = undefined;
      headers.delete("content-type");
      headers.delete("content-length");
    }
    if (next.origin !== new URL(url).origin) {
      for (const name of CROSS_ORIGIN_DROPPED) headers.delete(name);
      for (const [name, value] of [...headers]) if (o.secrets?.carries(value)) headers.delete(name);
      if (body !== undefined && o.secrets?.carries(body)) {
        throw new NonRetryableError(
          `${method} ${describeUrl(url)} redirected (${status}) to another origin, ${next.origin}, which would get a body that carries a secret: not followed; call the final URL, or keep the secret out of the body (a header is dropped on such a redirect instead)`,
        );
      }
    }
    url = next.toString();
  }
}

/** Refuses link-local addresses only: an engine without egress rules. */
const DEFAULT_EGRESS = new Egress();

/** What a request sends that may carry a secret: its URL, header values and body. */
function carriers(url: URL, headers: Headers, body: string | undefined): string[] {
  return [url.toString(), decodeURIComponentSafe(url.toString()), ...[...headers].map(([, v]) => v), body ?? ""];
}

function decodeURIComponentSafe(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** A URL's host name, without an IPv6 literal's brackets. */
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, "");
}

/**
 * One request with node:http(s), its socket's lookup checked by the egress rules (IP literals
 * before connecting), answered as a fetch Response with its body unread.
 */
function request(
  url: URL,
  method: string,
  headers: Headers,
  body: string | undefined,
  signal: AbortSignal,
  egress: Egress,
): Promise<Response> {
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
  egress.checkLiteral(hostOf(url), port);
  const send = url.protocol === "https:" ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const req = send(
      url,
      { method, headers: Object.fromEntries(headers), signal, agent: false, lookup: egress.lookupFor(port) },
      (res) => {
        const status = res.statusCode ?? 0;
        const answered = new Headers();
        for (let i = 0; i + 1 < res.rawHeaders.length; i += 2)
          answered.append(res.rawHeaders[i] as string, res.rawHeaders[i + 1] as string);
        if (status < 200 || status > 599) {
          res.destroy();
          reject(
            new NonRetryableError(
              `${method} ${describeUrl(url.toString())} answered status ${status}, which is not HTTP`,
            ),
          );
          return;
        }
        const empty = method === "HEAD" || status === 204 || status === 205 || status === 304;
        if (empty) res.resume();
        const stream = empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>);
        resolve(new Response(stream, { status, statusText: res.statusMessage ?? "", headers: answered }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** The output of an ok response, or the failure of another. */
async function judge(
  response: Response,
  spec: HttpRequestSpec,
  where: string,
  o: HttpAgentOptions,
): Promise<HttpOutput> {
  const status = response.status;
  if (!isOkStatus(spec, status)) {
    const excerpt = await readExcerpt(response, o.secrets);
    const message = `${where} answered ${status}${response.statusText ? ` ${response.statusText}` : ""}${excerpt ? `: ${excerpt}` : ""}`;
    if (status === 429 || status >= 500) {
      const retryAfterMs = retryAfterOf(response.headers.get("retry-after"), o.clock.now());
      throw new RetryableError(message, retryAfterMs === undefined ? {} : { retryAfterMs });
    }
    throw new NonRetryableError(`${message}; ok_status lists the statuses that succeed (default 2xx)`);
  }
  const bytes = await readLimited(response, o.maxResponseBytes, where);
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  return { status, headers, ...parseBody(bytes, response.headers.get("content-type"), where) };
}

function parseBody(
  bytes: Buffer,
  contentType: string | null,
  where: string,
): Pick<HttpOutput, "body" | "body_encoding"> {
  if (bytes.length === 0) return { body: null };
  if (contentType !== null && /^[^;]*[/+]json\s*(;|$)/i.test(contentType)) {
    try {
      return { body: parseJsonText(bytes, { what: `the response body of ${where}`, base: "body" }) as Json };
    } catch (e) {
      throw new NonRetryableError(
        `${where} sent content-type ${contentType} with a body that is not JSON: ${(e as Error).message}`,
      );
    }
  }
  // Text is kept as received (DESIGN §13): bytes that are not UTF-8 are not decoded with U+FFFD.
  if (!isUtf8(bytes)) return { body: bytes.toString("base64"), body_encoding: "base64" };
  return { body: new TextDecoder("utf-8").decode(bytes) };
}

/** The body, refused past `limit` bytes (the rest is not read). */
async function readLimited(response: Response, limit: number, where: string): Promise<Buffer> {
  if (!response.body) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => undefined);
      throw new ResponseTooLargeError(
        `the response body of ${where} is over the limit of ${limit} bytes (maxPayloadBytes); ask the service for less (a page, a range), or call it from an agent that stores the body elsewhere`,
      );
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/**
 * The start of a failed response's body, for its message (the rest is not read). Secrets are
 * redacted here, before the cut and the folding of whitespace could hide a value from redaction.
 */
async function readExcerpt(response: Response, secrets: Secrets | undefined): Promise<string> {
  if (!response.body) return "";
  // The excerpt is a courtesy: a body cut short still leaves the status to report.
  const bytes = await readUpTo(response.body, EXCERPT_BYTES + 1).catch(() => Buffer.alloc(0));
  const total = bytes.length;
  // stream: a character cut at the end is left out, not decoded as U+FFFD (which would hide a cut value).
  let text = new TextDecoder("utf-8").decode(bytes.subarray(0, EXCERPT_BYTES), { stream: true });
  if (secrets) text = secrets.redact(total > EXCERPT_BYTES ? secrets.withoutCutSecret(text) : text);
  text = text.replace(/\s+/g, " ").trim();
  return total > EXCERPT_BYTES ? `${text}...` : text;
}

/**
 * The first `limit` bytes of a body (fewer when it ends first); the rest is not read: leaving the
 * loop cancels a web stream and destroys a Node one, so an endless body costs no more than `limit`.
 */
export async function readUpTo(body: AsyncIterable<Uint8Array>, limit: number): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    total += chunk.byteLength;
    if (total >= limit) break;
  }
  return Buffer.concat(chunks).subarray(0, limit);
}

/** Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP date, as milliseconds from now. */
export function retryAfterOf(value: string | null, now: number): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function isRedirect(status: number): boolean {
  return status === 301 || status === 302 || status === 303 || status === 307 || status === 308;
}

function withQuery(url: string, query: HttpRequestSpec["query"]): string {
  const entries = Object.entries(query);
  if (entries.length === 0) return url;
  const parsed = new URL(url);
  for (const [name, value] of entries) {
    for (const item of Array.isArray(value) ? value : [value]) parsed.searchParams.append(name, String(item));
  }
  return parsed.toString();
}

/** A URL for messages: without its query (which may hold keys) or fragment. */
function describeUrl(url: string, base?: string): string {
  try {
    const u = new URL(url, base);
    return `${u.origin}${u.pathname}`;
  } catch {
    return JSON.stringify(url.slice(0, 200));
  }
}

/** What a failed request says: node:http's message names the reason (ECONNREFUSED, a reset); a wrapped error's is in its cause. */
function networkMessage(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const cause = e.cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return `${e.message} (${typeof code === "string" ? `${code}: ` : ""}${cause.message})`;
  }
  return e.message;
}
