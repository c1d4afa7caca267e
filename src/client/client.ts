/**
 * `createClient`: every operation of the HTTP API as a method named by its operationId, typed
 * from the OpenAPI document (api-types.ts, operations.ts: generated), plus `subscribe` for a
 * run's live events. Plain fetch, no Node-only imports: it runs in browsers and in Node alike.
 */
import { errorOf } from "./errors.js";
import { OPERATIONS } from "./operations.js";
import { type SubscribeOptions, type Subscription, subscribe } from "./subscribe.js";
import type { Args, OperationId, Output, StreamEvent } from "./types.js";

export interface ClientOptions {
  /**
   * Where the API is, without `/v1`: `"http://127.0.0.1:8080"`, or `""` for the page's own origin.
   * @defaultValue ""
   */
  baseUrl?: string;
  /** The bearer token, or a function read before each request (a token that changes). @defaultValue none */
  token?: string | (() => string | null | undefined);
  /** The fetch to use (a wrapper that adds headers, a test's). @defaultValue globalThis.fetch */
  fetch?: typeof fetch;
}

/** Every operation as a method: `client.getRun({ run_id })` answers `GET /v1/runs/{run_id}`'s body. */
export type Operations = { [O in OperationId]: (...args: Args<O>) => Promise<Output<O>> };

export interface SkeinClient extends Operations {
  /** Calls an operation by its operationId: `client.call("getRun", { run_id })`. @throws SkeinApiError */
  call<O extends OperationId>(operationId: O, ...args: Args<O>): Promise<Output<O>>;
  /**
   * Follows a run's events (`GET /v1/stream`), reconnecting by itself: each event once, in order.
   * @example
   * const sub = client.subscribe(runId, (e) => console.log(e.type), { fromStart: true });
   * // later
   * sub.close();
   */
  subscribe(runId: string, onEvent: (event: StreamEvent) => void, options?: SubscribeOptions): Subscription;
  /** The headers each request sends (the Authorization header when a token is set). */
  headers(): Record<string, string>;
  /** The absolute or origin-relative URL of an API path: `url("/v1/stream")`. */
  url(path: string): string;
  /** The fetch the client uses. */
  readonly fetch: typeof fetch;
}

/**
 * A client of the Skein HTTP API.
 * @example
 * import { createClient } from "skein/client";
 * const client = createClient({ baseUrl: "http://127.0.0.1:8080", token: process.env.SKEIN_TOKEN });
 * const run = await client.startRun({ body: { workflow_id: "publish", input: { topic: "durable agents" } } });
 * const read = await client.getRun({ run_id: run.run_id });
 */
export function createClient(options: ClientOptions = {}): SkeinClient {
  const base = (options.baseUrl ?? "").replace(/\/+$/, "");
  // Bound late, not captured: a page's fetch may be replaced after the client was made.
  const fetchFn: typeof fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const headers = (): Record<string, string> => {
    const token = typeof options.token === "function" ? options.token() : options.token;
    return token ? { authorization: `Bearer ${token}` } : {};
  };
  const url = (path: string) => `${base}${path}`;

  const call = async (operationId: OperationId, input?: Record<string, unknown>): Promise<unknown> => {
    const operation = OPERATIONS[operationId];
    if (operation === undefined) throw new TypeError(`unknown operation ${String(operationId)}`);
    const [method, template] = operation;
    const { body, ...parameters } = input ?? {};
    const used = new Set<string>();
    const path = template.replace(/\{([^}]+)\}/g, (_, name: string) => {
      used.add(name);
      const value = parameters[name];
      if (value === undefined || value === null) throw new TypeError(`${operationId} needs ${name}`);
      return encodeURIComponent(String(value));
    });
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(parameters)) {
      if (used.has(name) || value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) query.append(name, String(one));
    }
    const search = `${query}` ? `?${query}` : "";
    const res = await fetchFn(url(`${path}${search}`), {
      method,
      headers: {
        accept: "application/json",
        ...headers(),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!res.ok) throw await errorOf(res);
    const type = res.headers.get("content-type") ?? "";
    if (res.status === 204) return undefined;
    return type.includes("json") ? res.json() : res.text();
  };

  const client = {
    call: call as SkeinClient["call"],
    headers,
    url,
    fetch: fetchFn,
    subscribe: (runId: string, onEvent: (event: StreamEvent) => void, subscribeOptions?: SubscribeOptions) =>
      subscribe(client, runId, onEvent, subscribeOptions),
  } as SkeinClient;
  for (const operationId of Object.keys(OPERATIONS) as OperationId[]) {
    (client as unknown as Record<string, unknown>)[operationId] = (input?: Record<string, unknown>) =>
      call(operationId, input);
  }
  return client;
}
