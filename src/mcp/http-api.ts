/**
 * The MCP server's SkeinApi over `skein serve`'s HTTP API (docs/http-api.md), through
 * `skein/client`: for an MCP server on a machine that cannot open the database, or that should
 * act with a token's rights only. The API's error answers become errors with its `code` and
 * message (a validation error with its problems, as the library's ValidationError words them).
 */
import { createClient, SkeinApiError } from "../client/index.js";
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
  const root = base.replace(/\/+$/, "").replace(/\/v1$/, "");
  const client = createClient({ baseUrl: root, ...(token === undefined ? {} : { token }) });
  // The client's parameters are typed from the API's schemas; the tools' zod schemas checked these already.
  const call = client.call as unknown as (operationId: string, input?: Record<string, unknown>) => Promise<unknown>;
  /** One operation, its failure worded for the agent (and the person setting up --url and --token). */
  const api = async <T>(operationId: string, input?: Record<string, unknown>): Promise<T> => {
    try {
      return (await call(operationId, input)) as T;
    } catch (e) {
      throw refusal(e, root);
    }
  };
  const defined = (o: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

  return {
    listWorkflows: async () =>
      (await api<{ workflows: { id: string; version: number; created_at: number }[] }>("listWorkflows")).workflows,
    listRuns: (q: RunsQuery) =>
      api<RunsPage>(
        "listRuns",
        defined({
          limit: q.limit,
          status: q.status,
          workflow_id: q.workflow_id,
          q: q.q,
          id_contains: q.id_contains,
          paused: q.paused === undefined ? undefined : String(q.paused),
          cursor: q.cursor,
        }),
      ),
    getRun: (runId) => api("getRun", { run_id: runId }),
    graph: async (runId) => (await api<string>("getRunGraph", { run_id: runId })).trimEnd(),
    listEvents: (runId, { after_seq, limit }) =>
      api<EventsPage>("listRunEvents", defined({ run_id: runId, after_seq, limit })),
    listReviews: async (runIds) =>
      (
        await api<{ reviews: Awaited<ReturnType<SkeinApi["listReviews"]>> }>(
          "listReviews",
          runIds === undefined ? {} : { run_ids: runIds.join(",") },
        )
      ).reviews,
    startRun: (workflowId, options) => api<Run>("startRun", { body: { workflow_id: workflowId, ...options } }),
    review: (runId, nodeId, decision: Decision) =>
      api("decideReview", { run_id: runId, node_id: nodeId, body: decision }),
    sendEvent: (runId, name, payload: Json, options) =>
      api("sendEvent", { run_id: runId, body: { name, payload, ...options } }),
    cancelRun: (runId, options) => api<Run>("cancelRun", { run_id: runId, body: options }),
    retryRun: (runId, options) => api<Run>("retryRun", { run_id: runId, body: options }),
    close: async () => {},
  };
}

/** The client's failure as the tools report it: the API's refusal by its code, an unreachable server with what to check. */
function refusal(e: unknown, root: string): Error {
  if (e instanceof SkeinApiError) {
    const problems = e.details.problems;
    if (e.code === "validation" && Array.isArray(problems)) {
      return new ValidationError(e.message, problems as ConstructorParameters<typeof ValidationError>[1]);
    }
    if (e.status === 401) {
      return new ApiError(
        e.code,
        401,
        `${e.message}: pass a token of skein serve's tokens as --token (or SKEIN_TOKEN)`,
      );
    }
    return new ApiError(e.code, e.status, e.message);
  }
  // fetch's own failure: no answer at all.
  const cause = (e as { cause?: { message?: string } }).cause?.message ?? (e as Error).message;
  return new ApiError(
    "unavailable",
    0,
    `cannot reach the Skein API at ${root}/v1 (${cause}): is skein serve running there? Check --url`,
  );
}
