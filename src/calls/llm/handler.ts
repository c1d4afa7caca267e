/**
 * The `llm` node's in-process agent (DESIGN §12): one streamed chat completion per attempt.
 * POSTs `<base_url>/chat/completions` (node:http(s), connections kept alive between calls: an
 * agent loop's turn is a call), sends each chunk's new text as `task.progress({ delta })`,
 * reports the usage, and returns `{ content, parsed, tool_calls, usage, finish_reason, model }`.
 * Failures the next attempt may not repeat (429, 5xx, a network error, a stream cut short, JSON
 * that does not parse or match) are RetryableError; the rest (other 4xx, an unknown provider, a
 * redirect, an answer over its size bounds) NonRetryableError.
 *
 * Every answer is read with a bound (completion.ts): the stream, one event of it, a JSON
 * completion, and an error body (its first 4 KiB). No redirect is followed: the prompt, the
 * api_key and the provider's headers go to `base_url` and nowhere else. A redirect, even to the
 * same origin, fails the attempt and names where it points, so the operator sets base_url to it
 * (a completions endpoint has no reason to move; following one would need the method rules of
 * RFC 9110 and a check of each hop, for no gain).
 *
 * Before the request is sent, every secret it carries (a `{{ secrets.X }}` in the prompt, a
 * provider header or api_key equal to a secret) must allow base_url's host (its `hosts`, DESIGN
 * §13.1). Registration checks the same for a static provider; this covers a provider named by a
 * template, and a workflow registered before the providers or the secrets' hosts changed.
 */
import http, { type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import https from "node:https";
import type { AgentHandler, Task } from "../../agents/task.js";
import type { Json, Usage } from "../../core/types.js";
import { DEFAULT_PROVIDER, type LlmMessage, type LlmPayload } from "../../definition/kinds/llm.js";
import type { Secrets } from "../../engine/attempts/secrets.js";
import { NonRetryableError, RetryableError } from "../../errors.js";
import { readUpTo, retryAfterOf } from "../http.js";
import { type Completion, causeOf, readJson, readJsonBody, readStream } from "./completion.js";
import { ContentParser } from "./parse-content.js";
import { checkProviders, type LlmOptions, type LlmProvider, providerOf } from "./providers.js";

export interface LlmHandlerContext {
  /** The engine option `llm`. */
  llm: LlmOptions | undefined;
  /** The engine's maxPayloadBytes: the largest output. */
  maxOutputBytes: number;
  /** The engine's clock (a `Retry-After` date is relative to it). */
  now: () => number;
  /** The engine's secrets: those a request carries must allow base_url's host. */
  secrets?: Secrets;
}

/** The most of an error body read from a provider, in bytes (its message is in the first few); the rest is not read. */
const ERROR_BODY_BYTES = 4096;

/** The handler, or a ValidationError for providers that are not valid (createEngine refuses them). */
export function llmHandler(c: LlmHandlerContext): AgentHandler {
  const providers = checkProviders(c.llm);
  const parser = new ContentParser();
  // Kept-alive connections to the providers: a turn of an agent loop is a request, and a new
  // connection (or fetch's web streams) would cost it more than the engine's own work.
  const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
  return async (task: Task) => {
    // The kind checked the resolved payload before the visit could start.
    const payload = task.payload as unknown as LlmPayload;
    const providerName = payload.provider ?? DEFAULT_PROVIDER;
    const provider = providerOf(providers, payload.provider);
    const who = `provider "${providerName}"`;
    const url = `${provider.base_url.replace(/\/+$/, "")}/chat/completions`;
    const headers = headersOf(provider, task);
    const body = requestJson(payload);
    const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
    const refused = c.secrets?.hostRefusal([url, ...Object.values(headers), body], host) ?? null;
    if (refused !== null) throw new NonRetryableError(`${who} at ${url}: ${refused}`);
    let response: IncomingMessage;
    try {
      response = await post(url, headers, body, task.signal, agents);
    } catch (e) {
      if (task.signal.aborted) throw task.signal.reason;
      throw new RetryableError(`could not reach ${who} at ${url}: ${causeOf(e)}`, { cause: e });
    }
    const status = response.statusCode ?? 0;
    if (status >= 300 && status < 400) throw redirectError(response, who, url);
    if (status < 200 || status >= 300) throw await statusError(response, who, c.now(), c.secrets);

    const text = new SafeDeltas(task, c.secrets);
    const read = { who, maxBytes: c.maxOutputBytes, onContent: (delta: string) => text.add(delta) };
    let completion: Completion;
    try {
      completion = (response.headers["content-type"] ?? "").includes("text/event-stream")
        ? await readStream(response, read)
        : readJson(await readJsonBody(response, read), read);
    } catch (e) {
      if (task.signal.aborted) throw task.signal.reason;
      throw e;
    }
    text.end();
    // The tokens were spent whether or not the content is what was asked for.
    if (completion.usage) task.reportUsage(usageOf(completion.usage, provider));

    // A reply that only calls tools has no content to parse.
    const onlyTools = completion.content === "" && completion.tool_calls.length > 0;
    const parsed = onlyTools ? null : await parser.parse(payload.response_format, completion.content);
    return {
      content: completion.content,
      parsed,
      tool_calls: completion.tool_calls,
      usage: completion.usage,
      finish_reason: completion.finish_reason,
      model: completion.model ?? payload.model,
    } as unknown as Json;
  };
}

function headersOf(provider: LlmProvider, task: Task): Record<string, string> {
  return {
    "content-type": "application/json",
    accept: "text/event-stream, application/json",
    // The visit's execution_id: the same on every attempt, so a provider that deduplicates may.
    "idempotency-key": task.execution_id,
    traceparent: task.traceparent,
    ...(provider.api_key === undefined ? {} : { authorization: `Bearer ${provider.api_key}` }),
    ...provider.headers,
  };
}

/** The chat completions request: always streamed, with the usage in its last chunk. */
function requestJson(p: LlmPayload): string {
  const messages: LlmMessage[] = p.messages ?? [{ role: "user", content: p.prompt ?? "" }];
  const rest = JSON.stringify({
    model: p.model,
    stream: true,
    stream_options: { include_usage: true },
    ...(p.temperature === undefined ? {} : { temperature: p.temperature }),
    ...(p.max_tokens === undefined ? {} : { max_tokens: p.max_tokens }),
    ...(p.response_format === undefined ? {} : { response_format: p.response_format }),
    ...(p.tools === undefined ? {} : { tools: p.tools }),
    ...(p.tool_choice === undefined ? {} : { tool_choice: p.tool_choice }),
  });
  return `{"messages":[${messages.map(messageJson).join(",")}],${rest.slice(1)}`;
}

/**
 * Each message's JSON, kept while the message is: an agent loop sends every earlier message
 * again each turn (the protocol is stateless), and would otherwise serialise its whole
 * conversation per turn. Messages are payload values, never changed once made.
 */
const messagesJson = new WeakMap<LlmMessage, string>();

function messageJson(m: LlmMessage): string {
  // The kind checked that each is an object; a WeakMap would throw on anything else.
  if (typeof m !== "object" || m === null) return JSON.stringify(m);
  let json = messagesJson.get(m);
  if (json === undefined) {
    json = JSON.stringify(withoutParsedArguments(m));
    messagesJson.set(m, json);
  }
  return json;
}

/**
 * An earlier node's `tool_calls` may go back into `messages` as they are: the `parsed_arguments`
 * this node adds to each is not OpenAI's, and strict providers refuse fields they do not know.
 */
function withoutParsedArguments(m: LlmMessage): LlmMessage {
  if (m.role !== "assistant" || !Array.isArray(m.tool_calls)) return m;
  const tool_calls = m.tool_calls.map((call) => {
    if (call === null || typeof call !== "object" || Array.isArray(call)) return call;
    const { parsed_arguments: _, ...rest } = call;
    return rest;
  });
  return { ...m, tool_calls };
}

function usageOf(u: { prompt_tokens: number; completion_tokens: number }, provider: LlmProvider): Usage {
  const usage: Usage = { tokens_in: u.prompt_tokens, tokens_out: u.completion_tokens };
  const price = provider.cost_per_1k;
  if (price) usage.cost = (u.prompt_tokens * price.input + u.completion_tokens * price.output) / 1000;
  return usage;
}

/**
 * One POST, answered with its status and headers and its body unread. No redirect is followed
 * (node:http follows none). Idle connections hold no process open (node:http unrefs them) and
 * close before the provider's `Keep-Alive: timeout` would.
 */
function post(
  url: string,
  headers: Record<string, string>,
  body: string,
  signal: AbortSignal,
  agents: { http: http.Agent; https: https.Agent },
): Promise<IncomingMessage> {
  const secure = url.startsWith("https:");
  const send = secure ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const req = send(
      url,
      {
        method: "POST",
        headers: { ...headers, "content-length": String(Buffer.byteLength(body)) },
        agent: secure ? agents.https : agents.http,
        signal,
      },
      resolve,
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** 429 and 5xx are retried (after `Retry-After` when the provider sends one; a 429 says it rate-limited); other statuses are not. */
async function statusError(response: IncomingMessage, who: string, now: number, secrets?: Secrets): Promise<Error> {
  const status = response.statusCode ?? 0;
  const text = await errorBodyStart(response);
  const message = `${who} answered ${status}: ${providerMessage(text, secrets)}`;
  if (status === 429 || status >= 500) {
    const retryAfterMs = retryAfterMsOf(response.headers, now);
    // A 429 with a Retry-After holds the agent type on every engine for that long (DESIGN §17).
    const rateLimited = status === 429;
    return new RetryableError(message, retryAfterMs === undefined ? { rateLimited } : { retryAfterMs, rateLimited });
  }
  return new NonRetryableError(message);
}

/** The start of an error body, as text (a character cut at the end is dropped); "" when it cannot be read. */
async function errorBodyStart(response: IncomingMessage): Promise<string> {
  try {
    const bytes = await readUpTo(response, ERROR_BODY_BYTES);
    return new TextDecoder().decode(bytes, { stream: true });
  } catch {
    // The body is a courtesy: a body cut short still leaves the status to report.
    return "";
  } finally {
    // The rest is not read: the connection goes.
    response.destroy();
  }
}

/** A redirect is not followed (see the module doc): not retried, naming where it points, without its query. */
function redirectError(response: IncomingMessage, who: string, url: string): Error {
  response.destroy();
  const location = response.headers.location;
  let target = "no Location";
  if (location !== undefined) {
    try {
      const next = new URL(location, url);
      target = `${next.origin}${next.pathname}`;
    } catch {
      target = "a Location that is not a URL";
    }
  }
  return new NonRetryableError(
    `${who} answered ${response.statusCode} redirecting to ${target}; the request is not sent there (redirects are not followed): set the provider's base_url to the address that answers`,
  );
}

/**
 * OpenAI's `{ error: { message } }` (and the `{ error: "..." }` of some servers), else the body's
 * start, without a secret's value cut at its end (redaction, later, finds whole values only).
 */
function providerMessage(text: string, secrets?: Secrets): string {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    if (typeof body.error === "string") return body.error;
    if (typeof body.error?.message === "string") return body.error.message;
    if (typeof body.message === "string") return body.message;
  } catch {
    // not JSON
  }
  if (text === "") return "(no body)";
  return text.length > 500 && secrets ? secrets.withoutCutSecret(text.slice(0, 500)) : text.slice(0, 500);
}

/** `retry-after-ms` (OpenAI's), else `Retry-After` in seconds or as an HTTP date; undefined when absent or unreadable. */
function retryAfterMsOf(headers: IncomingHttpHeaders, now: number): number | undefined {
  const ms = Number(headers["retry-after-ms"] ?? Number.NaN);
  if (Number.isFinite(ms) && ms >= 0) return Math.round(ms);
  return retryAfterOf(headers["retry-after"] ?? null, now);
}

/**
 * The completion's text as progress deltas, each holding whole secrets' values: a delta is held
 * back while the text ends with what could be the start of one, so that redaction (which finds
 * whole values, in each delta) never lets a value through in two pieces.
 */
class SafeDeltas {
  private text = "";
  private sent = 0;

  constructor(
    private readonly task: Task,
    private readonly secrets: Secrets | undefined,
  ) {}

  add(delta: string): void {
    this.text += delta;
    this.send(this.secrets ? this.secrets.withoutCutSecret(this.text).length : this.text.length);
  }

  /** The text is whole: what was held back goes. */
  end(): void {
    this.send(this.text.length);
  }

  private send(upTo: number): void {
    if (upTo <= this.sent) return;
    this.task.progress({ delta: this.text.slice(this.sent, upTo) });
    this.sent = upTo;
  }
}
