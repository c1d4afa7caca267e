/**
 * The client's types, derived from the generated api-types.ts: what each operation takes (its
 * path and query parameters, side by side, and its JSON `body`) and what it answers on success.
 */
import type { components, operations } from "./api-types.js";

/** Every operation of the HTTP API, by its operationId (`startRun`, `getRun`, `listReviews`, ...). */
export type OperationId = keyof operations;

/** An operation's path parameters (never when it has none). */
export type PathParams<O extends OperationId> = operations[O]["parameters"] extends { path: infer P } ? P : never;
/** An operation's query parameters (never when it takes none). */
export type QueryParams<O extends OperationId> = NonNullable<operations[O]["parameters"]["query"]>;
/** An operation's JSON request body (never when it takes none). */
export type RequestBody<O extends OperationId> = [NonNullable<operations[O]["requestBody"]>] extends [never]
  ? never
  : NonNullable<operations[O]["requestBody"]> extends { content: { "application/json": infer B } }
    ? B
    : never;

/**
 * What an operation takes: its path and query parameters by name, and `body` (its JSON request
 * body) where it has one. `client.getRun({ run_id })`, `client.listRuns({ status: "RUNNING" })`,
 * `client.startRun({ body: { workflow_id, input } })`.
 */
export type Input<O extends OperationId> = ([PathParams<O>] extends [never] ? unknown : PathParams<O>) &
  ([QueryParams<O>] extends [never] ? unknown : QueryParams<O>) &
  ([RequestBody<O>] extends [never] ? unknown : { body: RequestBody<O> });

/** The JSON bodies an operation answers with a 2xx status (never when none is JSON). */
export type SuccessBody<O extends OperationId> = {
  [S in keyof operations[O]["responses"]]: S extends 200 | 201 | 202 | 204
    ? operations[O]["responses"][S] extends { content: { "application/json": infer J } }
      ? J
      : never
    : never;
}[keyof operations[O]["responses"]];
/** What an operation answers on success: its 2xx JSON body (unknown for a stream or a text). */
export type Output<O extends OperationId> = [SuccessBody<O>] extends [never] ? unknown : SuccessBody<O>;

/** An operation's arguments: its input, optional when nothing in it is required. */
export type Args<O extends OperationId> =
  Record<never, never> extends Input<O> ? [input?: Input<O>] : [input: Input<O>];

/** The models of the API, by name: `Schema<"Run">`, `Schema<"Review">`, ... */
export type Schema<N extends keyof components["schemas"]> = components["schemas"][N];

/** Every `error.code` the API answers, for programs to branch on. */
export type ApiErrorCode = Schema<"Error">["error"]["code"];

/** A stored event of the run's log, as `GET /v1/stream` and `GET /v1/runs/{run_id}/events` send it. */
export type RunEvent = Schema<"RunEvent">;

/**
 * A running attempt's progress, as the stream sends it (`event: node.progress`). `data.progress`
 * is `{ delta }` for an llm node's text, `{ turn, delta }` for an agent node's, and any JSON a
 * custom agent's `task.progress(value)` sent.
 */
export interface ProgressEvent {
  /** Set where the server keeps progress in the log; absent where it sends progress live only. */
  seq?: number;
  run_id: string;
  type: "node.progress";
  node_id: string;
  visit: number;
  at: number;
  trace_id: string;
  data: { attempt: number; progress: unknown };
}

/** What `subscribe` hands over: a stored event, or a running attempt's progress. */
export type StreamEvent = RunEvent | ProgressEvent;

/** True for a running attempt's progress (narrows a StreamEvent). */
export function isProgress(event: StreamEvent): event is ProgressEvent {
  return event.type === "node.progress";
}
