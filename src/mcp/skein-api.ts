/**
 * What the MCP server's tools ask of Skein, one small interface with two implementations: over
 * an `Engine` on the database (engine-api.ts) and over `skein serve`'s HTTP API (http-api.ts).
 * Both answer the same shapes (the HTTP API's, which are the library's types as JSON), so a tool
 * reads the same whichever way the server reaches Skein. Every method throws the library's error
 * (or, over HTTP, an error with the API's `code` and message): the tools turn it into an MCP
 * tool error whose text is that message.
 */
import type { RunStatus } from "../core/states.js";
import type { Budget, Json, Run, RunEvent, Visit } from "../core/types.js";
import type { PendingReview, RunWithNodes } from "../engine/engine-options.js";
import type { SendEventAnswer } from "../engine/writer/inputs.js";

export interface RunsQuery {
  status?: RunStatus;
  workflow_id?: string;
  /** Text the run's input or output contains, any case (3 characters or more). */
  q?: string;
  /** Only runs whose run_id contains this. */
  id_contains?: string;
  /** Only paused runs (DESIGN §16). */
  paused?: boolean;
  limit: number;
  /** `next_cursor` of the previous page. */
  cursor?: string;
}

export interface RunsPage {
  runs: Run[];
  /** Pass as `cursor` for the next page; null on the last. */
  next_cursor: string | null;
}

export interface EventsPage {
  events: RunEvent[];
  /** Pass as `after_seq` for the next page; null on the last. */
  next_after_seq: number | null;
}

export interface Decision {
  decision: "approve" | "reject";
  by?: string;
  comment?: string;
  output?: unknown;
  execution_id?: string;
}

export interface SkeinApi {
  listWorkflows(): Promise<{ id: string; version: number; created_at: number }[]>;
  listRuns(query: RunsQuery): Promise<RunsPage>;
  getRun(runId: string): Promise<RunWithNodes>;
  /** The run's workflow as a Mermaid flowchart with its node states and path. */
  graph(runId: string): Promise<string>;
  listEvents(runId: string, options: { after_seq?: number; limit: number }): Promise<EventsPage>;
  listReviews(runIds?: string[]): Promise<PendingReview[]>;
  startRun(workflowId: string, options: { input?: unknown; idempotency_key?: string; budget?: Budget }): Promise<Run>;
  review(runId: string, nodeId: string, decision: Decision): Promise<Visit>;
  sendEvent(
    runId: string,
    name: string,
    payload: Json,
    options: { idempotency_key?: string },
  ): Promise<SendEventAnswer>;
  cancelRun(runId: string, options: { reason?: string; compensate?: boolean }): Promise<Run>;
  retryRun(runId: string, options: { from?: string; force?: boolean; fresh_steps?: boolean }): Promise<Run>;
  close(): Promise<void>;
}
