/**
 * The shapes the page reads from the HTTP API (its OpenAPI document is the contract; these are
 * the fields the page uses). Times are epoch milliseconds, data is snake_case, as the API sends.
 */

export const RUN_STATUSES = ["QUEUED", "RUNNING", "COMPENSATING", "SUCCEEDED", "FAILED", "CANCELLED"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export type VisitState =
  | "PENDING"
  | "RUNNING"
  | "SUCCEEDED"
  | "FAILED"
  | "RETRYING"
  | "IN_REVIEW"
  | "WAITING"
  | "SKIPPED"
  | "CANCELLED";

export interface Problem {
  path: string;
  message: string;
}

export interface VisitError {
  message: string;
  reason: string;
  name?: string;
  details?: unknown;
}

export interface RunPause {
  by: string | null;
  at: number;
  reason: string | null;
  node_id?: string;
  visit?: number;
}

export interface Run {
  run_id: string;
  workflow_id: string;
  workflow_version: number;
  status: RunStatus;
  input: unknown;
  output: unknown;
  error: VisitError | null;
  end_cause: string | null;
  trace_id: string;
  needs_attention: boolean;
  /** Its tags, name to value ({} when none; absent from an older server). */
  tags?: Record<string, string>;
  /** Set while it is paused (no attempt starts); `node_id`: a node whose retries ran out (on_exhausted: pause). */
  paused?: RunPause | null;
  /** Its key (DESIGN §17): one run of its workflow and key runs at a time; null without one. */
  key?: string | null;
  /** Why a QUEUED run waits: behind the running run of its key, or until its debounce window passes. */
  queued?: { reason: "key" | "debounce"; since: number; position: number; until?: number } | null;
  created_at: number;
  updated_at: number;
  deadline_at: number;
  ended_at: number | null;
  /** The parent attempt this child run is (a workflow node's); null for a top-level run. */
  parent?: { run_id: string; node_id: string; visit: number; attempt: number; depth: number; item?: number } | null;
  /** The schedule that started the run (absent from an older server). */
  schedule_id?: string | null;
  /** What its attempts reported, its own and its child runs' (absent from an older server). */
  usage?: { tokens_in: number; tokens_out: number; cost: number };
  /** Its own budget; null: none (absent from an older server). */
  budget?: { max_tokens?: number; max_cost?: number } | null;
  /** The run and node it was forked from; null: started otherwise (absent from an older server). */
  forked_from?: { run_id: string; node_id: string } | null;
  /** Its priority, 0 (claimed first) to 9 (last) (absent from an older server). */
  priority?: number;
  /** The published event whose trigger started it; null: started otherwise (absent from an older server). */
  triggered_by?: { event: string; key: string; event_id: string; idempotency_key: string } | null;
}

/** One of a workflow's `triggers`: the events by key that start a run of it. */
export interface Trigger {
  event: string;
  key?: string;
  input?: unknown;
}

/** A run's priority when it was started without one: the page shows only others. */
export const DEFAULT_PRIORITY = 5;

/** A child run of a workflow node, as its parent lists it. */
export interface ChildRun {
  node_id: string;
  visit: number;
  attempt: number;
  run_id: string;
  workflow_id: string;
  status: RunStatus;
}

export interface Visit {
  run_id: string;
  node_id: string;
  visit: number;
  execution_id: string;
  agent_type: string;
  state: VisitState;
  payload: unknown;
  output: unknown;
  error: VisitError | null;
  reason: string | null;
  handled: boolean;
  fired: string[] | null;
  failures: number;
  attempt: number;
  holder: string | null;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
  deadline_at: number | null;
  /** When it became ready (or its retry is due); null when it waits for nothing an attempt gives. */
  ready_at?: number | null;
  /** A map node's item counts; null (or absent, from an older server) for other kinds. */
  items?: MapCounts | null;
  /** What a ready node waits for, when the server has something to say (an agent nothing serves). */
  /** Why a ready node is held back (getRun): `no_agent`, `rate_limited` (until), `priority` (ahead). */
  waiting?: { reason: string; message: string; until?: number; ahead?: number };
}

/** A map visit's items by state. */
export interface MapCounts {
  total: number;
  pending: number;
  running: number;
  succeeded: number;
  failed: number;
  cancelled: number;
}

/** One item of a map visit, as GET /v1/runs/{id}/nodes/{node_id}/items lists it. */
export interface MapItem {
  index: number;
  item: unknown;
  state: "PENDING" | "RUNNING" | "RETRYING" | "SUCCEEDED" | "FAILED" | "CANCELLED";
  /** The child run of an item of a workflow; null for an item of an agent (its attempts are its own). */
  child_run_id: string | null;
  output: unknown;
  error: VisitError | null;
  started_at: number | null;
  ended_at: number | null;
  /** Set for an item of an agent: it holds its attempts. */
  agent_type: string | null;
  attempt: number;
}

/** A durable step an attempt recorded (task.step), as GET /v1/runs/{id}/nodes/{node_id}/steps lists it. */
export interface Step {
  execution_id: string;
  name: string;
  node_id: string;
  visit: number;
  attempt: number;
  output: unknown;
  size: number;
  recorded_at: number;
}

/** One message of an agent node's conversation, as GET /v1/runs/{id}/nodes/{node_id}/messages lists it. */
export interface Message {
  seq: number;
  role: string;
  content: unknown;
  /** An assistant message's tool calls (OpenAI's shape). */
  tool_calls?: { id: string; type?: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
  /** A tool message's tool name. */
  name?: string;
  /** A tool call that failed, or whose arguments were invalid. */
  error?: boolean;
  /** A call of a tool with approval: the decision it waited for. */
  approval?: { decision: "approve" | "reject" | "timeout"; by: string | null; comment: string | null };
  usage?: { tokens_in?: number; tokens_out?: number } | null;
  finish_reason?: unknown;
  turn?: number;
  attempt?: number;
  recorded_at?: number;
}

export interface MessagePage {
  visit: number | null;
  messages: Message[];
  next_after: number | null;
}

export interface MapItemPage {
  items: MapItem[];
  next_after: number | null;
}

export interface Compensation {
  seq: number;
  node_id: string;
  visit: number;
  execution_id: string;
  agent_type: string;
  state: VisitState;
  output: unknown;
  error: VisitError | null;
  attempt: number;
}

export interface RunWithNodes extends Run {
  nodes: Visit[];
  waiting_reviews: number;
  compensations: Compensation[];
  children?: ChildRun[];
}

/** A running attempt's partial output (`event: node.progress` on the stream), stored with the run's events. */
/** A progress value: any JSON; an object when it is text (`{ delta }`, `{ content }`). */
export type ProgressValue = string | number | boolean | null | ProgressValue[] | { [field: string]: ProgressValue };

export interface ProgressEvent {
  seq?: number;
  run_id: string;
  type: "node.progress";
  node_id: string;
  visit: number;
  at: number;
  data: { attempt: number; progress: ProgressValue };
}

export interface RunEvent {
  seq: number;
  run_id: string;
  type: string;
  node_id: string | null;
  visit: number | null;
  at: number;
  data: Record<string, unknown>;
}

export interface PendingReview {
  run_id: string;
  workflow_id: string;
  node_id: string;
  visit: number;
  execution_id: string;
  title: unknown;
  instructions: unknown;
  assignees: unknown;
  data: unknown;
  requested_at: number | null;
  deadline_at: number | null;
}

/** GET /v1/me: the signed-in token (role null: the API has no tokens). */
export interface Me {
  role: "admin" | "agent" | "reviewer" | "metrics" | null;
  name: string | null;
  workflows: string[] | null;
}

export interface WorkflowSummary {
  id: string;
  version: number;
  created_at: number;
}

export interface Workflow {
  id: string;
  version: number;
  definition: unknown;
}

export interface WorkflowCheck {
  ok: boolean;
  errors: Problem[];
  warnings: Problem[];
}

export interface Registered {
  id: string;
  version: number;
  created: boolean;
  warnings: Problem[];
  /** Running runs of older versions, and how many could move to this one (POST /v1/workflows/{id}/migrate). */
  upgradable: { active: number; checked: number; compatible: number };
}

/** What POST /v1/workflows/{id}/migrate did, or with dry_run would do. */
export interface MigrateAnswer {
  moved: { run_id: string; from_version: number }[];
  incompatible: { run_id: string; from_version: number; reasons: string[] }[];
  dry_run: boolean;
}

/** A schedule, as GET /v1/schedules lists it. */
export interface Schedule {
  schedule_id: string;
  workflow_id: string;
  version: number | null;
  cron: string;
  timezone: string;
  input: unknown;
  overlap: "skip" | "allow" | "cancel_previous";
  catchup: "none" | "latest" | "all";
  catchup_limit: number;
  paused: boolean;
  next_fire_at: number | null;
  last_slot_at: number | null;
  last_run_id: string | null;
  created_at: number;
  updated_at: number;
}

/** GET /v1/schedules/{id}: with the next 5 fire times. */
export interface ScheduleWithTimes extends Schedule {
  next_fire_times: number[];
}
