/**
 * The shapes the HTTP API returns, as zod schemas: the OpenAPI document is generated from them
 * (and tests parse real responses with them, so the document stays true). Data is snake_case,
 * as the library returns it; times are epoch milliseconds.
 */
import { z } from "zod";
import { VISIT_STATES } from "../core/states.js";

/** Any JSON value. */
const json = () => z.unknown().describe("any JSON value");
const time = () => z.number().int().describe("epoch milliseconds");
const nullableTime = () => time().nullable();

export const RUN_STATUSES = ["RUNNING", "COMPENSATING", "SUCCEEDED", "FAILED", "CANCELLED"] as const;

export const ErrorSchema = z.object({
  error: z.object({
    code: z.string().describe("stable: validation, bad_request, unauthorized, forbidden, not_found, conflict, ..."),
    message: z.string(),
    details: z.record(z.string(), z.unknown()).describe("validation errors: `problems`, each with its path"),
  }),
});

export const VisitErrorSchema = z.object({
  message: z.string(),
  reason: z.string(),
  name: z.string().optional(),
  details: json().optional(),
});

export const RunSchema = z.object({
  run_id: z.string(),
  workflow_id: z.string(),
  workflow_version: z.number().int(),
  status: z.enum(RUN_STATUSES),
  input: json(),
  output: json().nullable(),
  error: VisitErrorSchema.nullable(),
  end_cause: z.enum(["failed", "cancelled", "ttl", "end"]).nullable(),
  trace_id: z.string(),
  traceparent: z.string(),
  idempotency_key: z.string().nullable(),
  input_hash: z.string(),
  needs_attention: z.boolean(),
  created_at: time(),
  updated_at: time(),
  deadline_at: time(),
  ended_at: nullableTime(),
  parent: z
    .object({
      run_id: z.string(),
      node_id: z.string(),
      visit: z.number().int(),
      attempt: z.number().int(),
      depth: z.number().int().describe("1: the child of a top-level run"),
      item: z.number().int().optional().describe("a map node's item: its index (absent for a workflow node's child)"),
    })
    .nullable()
    .describe(
      "the parent attempt this child run is (a workflow node's, or a map node's item); null for a top-level run",
    ),
});

/** What visits and compensation rows share: their attempts and due times. */
const attemptFields = {
  failures: z.number().int(),
  attempt: z.number().int(),
  interruptions: z.number().int(),
  ready_at: nullableTime(),
  deadline_at: nullableTime(),
  lease_expires_at: nullableTime(),
  holder: z.string().nullable(),
  created_at: time(),
  started_at: nullableTime(),
  ended_at: nullableTime(),
};

/** A map visit's items by state (DESIGN §11.1). */
export const MapCountsSchema = z.object({
  total: z.number().int(),
  pending: z.number().int().describe("not started yet: total - running - succeeded - failed - cancelled"),
  running: z.number().int(),
  succeeded: z.number().int(),
  failed: z.number().int(),
  cancelled: z.number().int(),
  next: z.number().int().describe("the index where the search for the next item to start begins"),
});

export const MAP_ITEM_STATES = ["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"] as const;

/** One item of a map visit: a row, run as a child run of the visit's attempt. */
export const MapItemSchema = z.object({
  run_id: z.string().describe("the map's run"),
  node_id: z.string(),
  visit: z.number().int(),
  index: z.number().int().describe("its position in the list: its slot in the map's output"),
  item: json(),
  state: z.enum(MAP_ITEM_STATES),
  child_run_id: z.string().nullable().describe("the run that runs the item (GET /v1/runs/{id}); null while PENDING"),
  output: json().nullable().describe("the item run's output once SUCCEEDED"),
  error: VisitErrorSchema.nullable().describe("the item run's error once FAILED or CANCELLED"),
  started_at: nullableTime(),
  ended_at: nullableTime(),
});

export const VisitSchema = z.object({
  run_id: z.string(),
  node_id: z.string(),
  visit: z.number().int(),
  execution_id: z.string(),
  agent_type: z.string(),
  state: z.enum(VISIT_STATES),
  is_current: z.boolean(),
  loop_activated: z.boolean(),
  trigger: z.object({ node_id: z.string(), visit: z.number().int() }).nullable(),
  payload: json().nullable(),
  output: json().nullable(),
  error: VisitErrorSchema.nullable(),
  reason: z.string().nullable(),
  handled: z.boolean(),
  fired: z.array(z.string()).nullable(),
  prior_starts: z.number().int(),
  items: MapCountsSchema.nullable().describe("a map node's item counts; null for other kinds, and before a map begins"),
  ...attemptFields,
});

const CompensationSchema = z.object({
  run_id: z.string(),
  seq: z.number().int(),
  node_id: z.string(),
  visit: z.number().int(),
  execution_id: z.string(),
  agent_type: z.string(),
  state: z.enum(VISIT_STATES),
  output: json().nullable(),
  error: VisitErrorSchema.nullable(),
  reason: z.string().nullable(),
  ...attemptFields,
});

export const RunWithNodesSchema = RunSchema.extend({
  nodes: z.array(VisitSchema).describe("the current visit of each node, in document order"),
  waiting_reviews: z.number().int(),
  compensations: z.array(CompensationSchema),
  children: z
    .array(
      z.object({
        node_id: z.string(),
        visit: z.number().int(),
        attempt: z.number().int(),
        run_id: z.string(),
        workflow_id: z.string(),
        status: z.enum(RUN_STATUSES),
      }),
    )
    .describe(
      "the child runs of its workflow nodes, by node, visit and attempt (not its map items: GET /v1/runs/{id}/nodes/{node_id}/items)",
    ),
});

export const EventSchema = z.object({
  seq: z.number().int().describe("orders every event of the database"),
  run_id: z.string(),
  type: z.string().describe("run.started, node.succeeded, review.requested, ... (DESIGN §9)"),
  node_id: z.string().nullable(),
  visit: z.number().int().nullable(),
  trace_id: z.string(),
  at: time(),
  data: z.record(z.string(), z.unknown()),
});

export const PendingReviewSchema = z.object({
  run_id: z.string(),
  workflow_id: z.string(),
  node_id: z.string(),
  visit: z.number().int(),
  execution_id: z.string(),
  title: json().nullable(),
  instructions: json().nullable(),
  assignees: json().nullable(),
  data: json().nullable().describe("the review node's payload: what to review"),
  requested_at: nullableTime(),
  deadline_at: nullableTime(),
  trace_id: z.string(),
});

export const ProblemSchema = z.object({ path: z.string(), message: z.string() });

/** Path parameters shared by the run routes. */
export const RunParams = z.object({ run_id: z.string().min(1).max(200) }).strict();
