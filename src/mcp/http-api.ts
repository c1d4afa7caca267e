/**
 * The MCP server's SkeinApi over `skein serve`'s HTTP API (docs/http-api.md), with fetch: for an
 * MCP server on a machine that cannot open the database, or that should act with a token's
 * rights only. The API's error answers become errors with its `code` and message (a validation
 * error with its problems, as the library's ValidationError words them).
 */
import type { Json, Run } from "../core/types.js";
import { ValidationError } from "../errors.js";
import type { Decision, EventsPage, RunsPage, RunsQuery, SkeinApi } from "./skein-api.js";

/** An error the API answered, with its `code` (validation, not_found, conflict, forbidden, ...) and HTTP status. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly code: string,
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** `base`: the address `skein serve` prints (`http://127.0.0.1:8080`, with or without `/v1`). */
export function httpApi(base: string, token: string | undefined): SkeinApi {
  const root = `${base.replace(/\/+$/, "").replace(/\/v1$/, "")}/v1`;

  async function call(method: string, path: string, body?: unknown): Promise<Response> {
    const headers: Record<string, string> = {};
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    let response: Response;
    try {
      response = await fetch(`${root}${path}`, {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (e) {
      const cause = (e as { cause?: { message?: string } }).cause?.message ?? (e as Error).message;
      throw new ApiError(
        "unavailable",
        0,
        `cannot reach the Skein API at ${root} (${cause}): is skein serve running there? Check --url`,
      );
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }

  const json = async <T>(method: string, path: string, body?: unknown): Promise<T> =>
    (await (await call(method, path, body)).json()) as T;
  const run = (id: string) => `/runs/${encodeURIComponent(id)}`;

  return {
    listWorkflows: async () =>
      (await json<{ workflows: { id: string; version: number; created_at: number }[] }>("GET", "/workflows")).workflows,

    listRuns: (query: RunsQuery) => {
      const params = new URLSearchParams({ limit: String(query.limit) });
      if (query.status !== undefined) params.set("status", query.status);
      if (query.workflow_id !== undefined) params.set("workflow_id", query.workflow_id);
      if (query.q !== undefined) params.set("q", query.q);
      if (query.id_contains !== undefined) params.set("id_contains", query.id_contains);
      if (query.cursor !== undefined) params.set("cursor", query.cursor);
      return json<RunsPage>("GET", `/runs?${params}`);
    },

    getRun: (runId) => json("GET", run(runId)),

    graph: async (runId) => (await (await call("GET", `${run(runId)}/graph`)).text()).trimEnd(),

    listEvents: (runId, { after_seq, limit }) => {
      const params = new URLSearchParams({ limit: String(limit) });
      if (after_seq !== undefined) params.set("after_seq", String(after_seq));
      return json<EventsPage>("GET", `${run(runId)}/events?${params}`);
    },

    listReviews: async (runIds) => {
      const query = runIds === undefined ? "" : `?${new URLSearchParams({ run_ids: runIds.join(",") })}`;
      return (await json<{ reviews: Awaited<ReturnType<SkeinApi["listReviews"]>> }>("GET", `/reviews${query}`)).reviews;
    },

    startRun: (workflowId, options) => json<Run>("POST", "/runs", { workflow_id: workflowId, ...options }),

    review: (runId, nodeId, decision: Decision) =>
      json("POST", `${run(runId)}/nodes/${encodeURIComponent(nodeId)}/review`, decision),

    sendEvent: (runId, name, payload: Json, options) =>
      json("POST", `${run(runId)}/events`, { name, payload, ...options }),

    cancelRun: (runId, options) => json<Run>("POST", `${run(runId)}/cancel`, options),

    retryRun: (runId, options) => json<Run>("POST", `${run(runId)}/retry`, options),

    close: async () => {},
  };
}

/** The API's `{ error: { code, message, details } }` as an error; a body not of that shape, by its status. */
async function errorOf(response: Response): Promise<Error> {
  const text = await response.text();
  let error: { code?: unknown; message?: unknown; details?: { problems?: unknown } } | undefined;
  try {
    error = (JSON.parse(text) as { error?: typeof error }).error;
  } catch {
    error = undefined;
  }
  const code = typeof error?.code === "string" ? error.code : `http_${response.status}`;
  const message = typeof error?.message === "string" ? error.message : `HTTP ${response.status}: ${text.slice(0, 200)}`;
  const problems = error?.details?.problems;
  if (code === "validation" && Array.isArray(problems)) {
    return new ValidationError(message, problems as ConstructorParameters<typeof ValidationError>[1]);
  }
  if (response.status === 401) {
    return new ApiError(code, 401, `${message}: pass a token of skein serve's tokens as --token (or SKEIN_TOKEN)`);
  }
  return new ApiError(code, response.status, message);
}
