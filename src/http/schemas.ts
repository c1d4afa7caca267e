/**
 * The shapes the HTTP API returns, as zod schemas: the OpenAPI document is generated from them
 * (and tests parse real responses with them, so the document stays true). Data is snake_case,
 * as the library returns it; times are epoch milliseconds. A schema with an `id` (zod's
 * `.meta({ id })`) is one named component of the document, referenced wherever it is used, so
 * generated clients get one named model for it.
 */
import { z } from "zod";
import { RUN_STATUSES, VISIT_STATES } from "../core/states.js";
import { ERROR_CODES } from "./errors.js";

export { RUN_STATUSES };

/** Any JSON value. */
const json = () => z.unknown().describe("any JSON value");
const time = () => z.number().int().describe("epoch milliseconds");
const nullableTime = () => time().nullable();

export const ErrorSchema = z
  .object({
    error: z.object({
      code: z.enum(ERROR_CODES).describe("stable: what kind of error, for programs (the message is for people)"),
      message: z.string(),
      details: z
        .record(z.string(), z.unknown())
        .describe("validation errors: `problems`, each with its path; limits: `retry_after_seconds`"),
    }),
  })
  .meta({ id: "Error", description: "The one error shape of the API" });

/**
 * The error statuses a route answers because of what its handler does (an unknown id, a state
 * that refuses the call, a limit, storage or an engine that is stopping). openapi.ts adds the
 * ones every route of its kind may answer: 400, 401, 403, 413 and 415.
 */
export function errorResponses(...statuses: (404 | 409 | 429 | 503)[]): Record<number, typeof ErrorSchema> {
  return Object.fromEntries(statuses.map((status) => [status, ErrorSchema]));
}

export const VisitErrorSchema = z
  .object({
    message: z.string(),
    reason: z.string(),
    name: z.string().optional(),
    details: json().optional(),
  })
  .meta({ id: "VisitError", description: "Why a visit, an attempt or a run failed" });

const figure = (what: string) => z.number().min(0).describe(what);

/** Usage an attempt reports (DESIGN §12): a worker's complete and fail bodies. */
export const UsageSchema = z
  .strictObject({
    tokens_in: figure("input (prompt) tokens").optional(),
    tokens_out: figure("output (completion) tokens").optional(),
    cost: figure("cost, in the unit the budget uses").optional(),
  })
  .meta({ id: "Usage", description: "What an attempt used, added to its run and every run above it" });

/** A run's budget (DESIGN §12): no attempt starts once its usage reaches either figure. */
export const BudgetSchema = z
  .strictObject({
    max_tokens: figure("most tokens (tokens_in + tokens_out) the run and its child runs may report").optional(),
    max_cost: figure("most cost the run and its child runs may report").optional(),
  })
  .meta({
    id: "Budget",
    description: "Usage at which no further attempt of the run (or its child runs) starts: budget_exceeded",
  });

/** A run's priority (DESIGN §17): its ready work is claimed by it, lower first, then by age. */
export const PrioritySchema = z
  .number()
  .int()
  .min(0)
  .max(9)
  .describe(
    "0 to 9, lower first (default 5): the run's ready work is claimed by priority, then by age; inherited by its child runs and map items",
  );

export const RunSchema = z
  .object({
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
    schedule_id: z
      .string()
      .nullable()
      .describe("the schedule that started the run (GET /v1/schedules/{id}); null otherwise"),
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
        ancestors: z
          .array(z.string())
          .optional()
          .describe("every run above this one, its parent first: its usage counts in each"),
        budgeted: z
          .array(z.string())
          .optional()
          .describe("the ancestors with a budget, checked before each attempt of this run"),
      })
      .nullable()
      .describe(
        "the parent attempt this child run is (a workflow node's, or a map node's item); null for a top-level run",
      ),
    usage: z
      .object({ tokens_in: z.number(), tokens_out: z.number(), cost: z.number() })
      .describe("what the run's attempts reported, its own and its child runs' (zeros when nothing was)"),
    budget: BudgetSchema.nullable().describe("the run's own budget (startRun's, else the workflow's); null: none"),
    scope: z
      .array(z.string())
      .nullable()
      .describe(
        "the workflows its workflow nodes and map items may start: the workflows (ids or patterns with *) of the scoped token that started its root, inherited by child runs; null: every workflow",
      ),
    reserved: z
      .record(z.string(), z.object({ tokens: z.number(), cost: z.number(), probe: z.literal(true).optional() }))
      .nullable()
      .describe(
        "on a run with a budget: the expected usage of each attempt in flight under it (its own and its child runs'), by <execution_id>@<attempt>; probe: nothing was known of the attempt, which runs alone. A scoped token reads the child runs' entries summed under one key, [run out of scope]. null: nothing reserved",
      ),
    tags: z
      .record(z.string(), z.string())
      .describe("its tags: startRun's name/value pairs, inherited by child runs ({} when none)"),
    paused: z
      .object({
        by: z.string().nullable().describe("who paused it; engine: a node whose retries ran out"),
        at: z.number(),
        reason: z.string().nullable(),
        node_id: z.string().optional().describe("the node whose retries ran out (on_exhausted: pause)"),
        visit: z.number().int().optional(),
      })
      .nullable()
      .describe("set while the run is paused: none of its attempts starts until it is resumed; null when it is not"),
    forked_from: z
      .object({ run_id: z.string(), node_id: z.string() })
      .nullable()
      .describe(
        "the run this one was forked from and the node it ran again from (POST /v1/runs/{run_id}/fork); null for a run started otherwise",
      ),
    key: z
      .string()
      .nullable()
      .describe(
        "its key: at most one run of its workflow and key is RUNNING at a time; null for a run started without one",
      ),
    queued: z
      .object({
        reason: z
          .enum(["key", "debounce"])
          .describe("key: behind the active run of its key; debounce: until its window passes"),
        since: time(),
        position: z.number().int().describe("its place in its key's queue"),
        until: time().optional().describe("a debounced run: when its window passes"),
        on_active: z.enum(["queue", "cancel_active"]),
      })
      .nullable()
      .describe("why a QUEUED run waits; null once it began"),
    triggered_by: z
      .object({
        event: z.string().describe("the event's name"),
        key: z.string().describe("the key it was published with"),
        event_id: z.string(),
        idempotency_key: z
          .string()
          .describe("the publisher's idempotency key (else the event's id): the trigger starts one run per key"),
      })
      .nullable()
      .describe(
        "the published event (POST /v1/events) whose trigger in the workflow's triggers started this run; null for a run started otherwise",
      ),
    priority: PrioritySchema,
  })
  .meta({ id: "Run", description: "A run of a workflow version" });

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
export const MapCountsSchema = z
  .object({
    total: z.number().int(),
    pending: z.number().int().describe("not started yet: total - running - succeeded - failed - cancelled"),
    running: z.number().int(),
    succeeded: z.number().int(),
    failed: z.number().int(),
    cancelled: z.number().int(),
    next: z.number().int().describe("the index where the search for the next item to start begins"),
    failed_items: z
      .array(
        z.object({
          index: z.number().int(),
          run_id: z.string().nullable().describe("the item's run; null when it failed before one started"),
          error: z.object({ message: z.string(), reason: z.string() }).nullable(),
        }),
      )
      .optional()
      .describe(
        "once the map SUCCEEDED within its tolerated failures: its failed and cancelled items, the first 100 by index (failed + cancelled counts them all)",
      ),
  })
  .meta({ id: "MapCounts", description: "A map visit's items by state" });

export const MAP_ITEM_STATES = ["PENDING", "RUNNING", "RETRYING", "SUCCEEDED", "FAILED", "CANCELLED"] as const;

/** One item of a map visit: a row, run as a child run of the visit's attempt. */
export const MapItemSchema = z
  .object({
    run_id: z.string().describe("the map's run"),
    node_id: z.string(),
    visit: z.number().int(),
    index: z.number().int().describe("its position in the list: its slot in the map's output"),
    item: json(),
    state: z.enum(MAP_ITEM_STATES),
    child_run_id: z
      .string()
      .nullable()
      .describe(
        "the child run that runs an item of a workflow (GET /v1/runs/{id}); null while PENDING, for an item that failed before its run started, and for an item of an agent",
      ),
    output: json().nullable().describe("the item's output once SUCCEEDED"),
    error: VisitErrorSchema.nullable().describe(
      "the item's error once FAILED or CANCELLED (the last failed attempt's while RETRYING)",
    ),
    started_at: nullableTime(),
    ended_at: nullableTime(),
    agent_type: z
      .string()
      .nullable()
      .describe("the agent that runs an item of an agent, in attempts of its own; null for an item of a workflow"),
    attempt: z.number().int().describe("an item of an agent: its attempts so far (fences results, as a visit's)"),
    failures: z.number().int().describe("an item of an agent: its failed attempts (they spend the map node's retries)"),
    interruptions: z.number().int().describe("an item of an agent: deaths of the engine holding its attempt"),
    ready_at: nullableTime(),
    deadline_at: nullableTime(),
    lease_expires_at: nullableTime(),
    holder: z.string().nullable().describe("the engine or worker holding its running attempt"),
  })
  .meta({
    id: "MapItem",
    description:
      "One item of a map visit: an item of an agent holds its own attempts; an item of a workflow (or one that undoes) is run by a child run",
  });

/** What a node ready to run waits for, when that is worth saying (engine/waiting.ts). */
const NodeWaitingSchema = z
  .object({
    reason: z
      .enum(["no_agent", "rate_limited", "priority"])
      .describe(
        "no_agent: no engine has a handler for its agent type and no worker claimed it lately; rate_limited: its agent type's rate limits or a provider's 429 hold it until `until`; priority: `ahead` ready visits of its agent type with a more urgent priority are claimed first",
      ),
    until: z.number().int().optional().describe("rate_limited: when an attempt of its type may start, epoch ms"),
    ahead: z.number().int().optional().describe("priority: the ready visits and map items claimed before it"),
    message: z.string().describe("what it waits for and what to do, in words"),
  })
  .meta({ id: "NodeWaiting", description: "What a node ready to run waits for" });

export const VisitSchema = z
  .object({
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
    items: MapCountsSchema.nullable().describe(
      "a map node's item counts; null for other kinds, and before a map begins",
    ),
    waiting: NodeWaitingSchema.optional().describe(
      "getRun only, when a ready node waits for something worth saying: an agent nothing serves (it would wait until the run's timeout), a rate limit, or more urgent work",
    ),
    ...attemptFields,
  })
  .meta({ id: "Visit", description: "One visit of a node: its attempts, payload, output or error" });

const CompensationSchema = z
  .object({
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
  })
  .meta({ id: "Compensation", description: "One step of a failed run's saga: the undoing of a visit" });

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
}).meta({
  id: "RunWithNodes",
  description: "A run with the current visit of each node, its compensations and child runs",
});

export const EventSchema = z
  .object({
    seq: z.number().int().describe("orders every event of the database"),
    run_id: z.string(),
    type: z.string().describe("run.started, node.succeeded, review.requested, ... (DESIGN §9)"),
    node_id: z.string().nullable(),
    visit: z.number().int().nullable(),
    trace_id: z.string(),
    at: time(),
    data: z.record(z.string(), z.unknown()),
  })
  .meta({ id: "RunEvent", description: "One event of a run's history (DESIGN §9)" });

export const PendingReviewSchema = z
  .object({
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
  })
  .meta({ id: "Review", description: "A node waiting for a person's decision" });

/** A claimed task, as an external worker gets it (DESIGN §5). */
export const TaskSchema = z
  .object({
    run_id: z.string(),
    node_id: z.string(),
    agent_type: z.string(),
    visit: z.number().int(),
    attempt: z.number().int().describe("send it back with every heartbeat and report"),
    execution_id: z.string().describe("stable across attempts: the idempotency key of side effects"),
    payload: json(),
    input: json(),
    deps: z.record(z.string(), z.object({ status: z.string(), output: json(), error: json() })),
    trigger: json().describe("the edge that activated this visit, if any: { node_id, visit, status, output, error }"),
    compensates: z
      .object({ execution_id: z.string(), output: json(), error: json() })
      .optional()
      .describe("on a compensation's task only: the visit it undoes (DESIGN §6); its execution_id ends in :compensate"),
    item: z
      .object({ index: z.number().int() })
      .optional()
      .describe(
        "on a map item's task only: its index in the list; input is the item, and the execution_id is the map visit's and ~<index>",
      ),
    trace_id: z.string(),
    traceparent: z.string(),
    workflow_id: z.string(),
    workflow_version: z.number().int(),
    deadline_at: z.number().describe("epoch ms: the attempt's hard cap (the node's timeout)"),
    lease_expires_at: z.number().describe("epoch ms: heartbeat before then, or the attempt fails (lease_expired)"),
    secrets: z
      .array(z.object({ at: z.array(z.union([z.string(), z.number().int()])), names: z.array(z.string()) }))
      .optional()
      .describe(
        'where the payload holds "[secret NAME]" placeholders: each path under the payload with the secret names read there; the worker puts in its own values (SKEIN_SECRET_<NAME>) at those paths only',
      ),
    steps: z
      .array(z.object({ name: z.string(), output: json(), attempt: z.number().int() }))
      .optional()
      .describe(
        "the durable steps this visit recorded before (DESIGN §14.1), in the order recorded: a step of this name returns its output without running again; absent: none",
      ),
  })
  .meta({ id: "Task", description: "A claimed attempt of a visit (or of a compensation), for an external worker" });

export const StepSchema = z
  .object({
    execution_id: z.string().describe("the attempt's execution_id: a visit's, a compensation's or a map item's"),
    name: z.string().describe("unique within its visit"),
    run_id: z.string(),
    node_id: z.string(),
    visit: z.number().int(),
    attempt: z.number().int().describe("the attempt that recorded it (a redrive's copy keeps it)"),
    output: json(),
    size: z.number().int().describe("bytes of the output's JSON"),
    recorded_at: z.number().describe("epoch ms"),
  })
  .meta({
    id: "Step",
    description: "A durable step an attempt recorded (task.step, POST /v1/tasks/{execution_id}/steps)",
  });

export const MessageSchema = z
  .object({
    seq: z
      .number()
      .int()
      .describe("its place in the visit's conversation, from 0: pass as after for the messages after it"),
    role: z.string().describe("system and user (the payload's instructions and input), assistant (a model turn), tool"),
    content: json().describe("the text; a failed tool call's says why"),
    tool_calls: json()
      .optional()
      .describe("an assistant message's tool calls, OpenAI's shape: [{ id, type, function: { name, arguments } }]"),
    tool_call_id: z.string().optional().describe("a tool message's call id"),
    name: z.string().optional().describe("a tool message's tool name"),
    error: z.boolean().optional().describe("true for a tool call that failed, or whose arguments were invalid"),
    approval: json()
      .optional()
      .describe("a call of a tool with approval: its decision, { decision: approve, reject or timeout, by, comment }"),
    usage: json().optional().describe("what the model turn or tool call cost: { tokens_in, tokens_out }"),
    finish_reason: json().optional().describe("how a model turn ended (stop, tool_calls, length)"),
    turn: z.number().int().optional().describe("the model turn it is (assistant) or belongs to (tool)"),
    attempt: z.number().int().optional().describe("the attempt that recorded it; absent for the payload's messages"),
    recorded_at: time().optional(),
  })
  .meta({
    id: "Message",
    description:
      "One message of an agent node's conversation (DESIGN §14.2): the payload's instructions and input, then each recorded model turn and tool call",
  });

export const ProblemSchema = z
  .object({ path: z.string(), message: z.string() })
  .meta({ id: "Problem", description: "One problem of a definition or a request, with its path" });

/** Path parameters shared by the run routes. */
export const RunParams = z.object({ run_id: z.string().min(1).max(200) }).strict();

export const OVERLAPS = ["skip", "allow", "cancel_previous"] as const;
export const CATCHUPS = ["none", "latest", "all"] as const;

/** What a schedule may say (DESIGN §11.5): the body of PUT /v1/schedules/{schedule_id}. */
export const ScheduleInputSchema = z
  .object({
    workflow_id: z.string().min(1).max(200).describe("a registered workflow"),
    version: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe("a pinned version of the workflow; default: its latest at each firing"),
    cron: z
      .string()
      .min(1)
      .max(200)
      .describe('5 fields (minute hour day month weekday), or 6 with seconds first: "0 9 * * 1-5"'),
    timezone: z.string().min(1).max(100).optional().describe('an IANA time zone, "Europe/Paris"; default "UTC"'),
    input: json().optional().describe("the runs' input (default {}), checked against the workflow's input_schema"),
    overlap: z
      .enum(OVERLAPS)
      .optional()
      .describe(
        "a slot while a run of this schedule has not ended: skip it (default), allow a second, cancel_previous",
      ),
    catchup: z
      .enum(CATCHUPS)
      .optional()
      .describe("slots missed while no engine ran: none, latest (default: one run for the most recent), all"),
    catchup_limit: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .optional()
      .describe("catchup all: at most this many missed slots, the most recent (default 100)"),
    paused: z.boolean().optional().describe("default false"),
  })
  .strict()
  .meta({ id: "ScheduleInput", description: "A schedule as written: PUT /v1/schedules/{schedule_id}" });

export const ScheduleSchema = z
  .object({
    schedule_id: z.string(),
    workflow_id: z.string(),
    version: z.number().int().nullable().describe("the pinned version; null: the latest at each firing"),
    cron: z.string(),
    timezone: z.string(),
    input: json(),
    overlap: z.enum(OVERLAPS),
    catchup: z.enum(CATCHUPS),
    catchup_limit: z.number().int(),
    paused: z.boolean(),
    next_fire_at: nullableTime().describe("the next slot; null while paused"),
    last_slot_at: nullableTime().describe("the latest slot handled (fired, or skipped by overlap)"),
    last_run_id: z.string().nullable().describe("the latest run a slot started"),
    scope: z
      .array(z.string())
      .nullable()
      .describe(
        "the workflows of the scoped token that put it, given to the runs its slots start (a run may start only workflows of its scope); null: every workflow",
      ),
    created_at: time(),
    updated_at: time(),
  })
  .meta({ id: "Schedule", description: "A schedule: a workflow started on a cron expression in a time zone" });

export const ScheduleWithTimesSchema = ScheduleSchema.extend({
  next_fire_times: z.array(time()).describe("the next 5 slots (empty while paused), epoch ms"),
}).meta({ id: "ScheduleWithTimes", description: "A schedule with its next fire times" });

/** Path parameters of the schedule routes. */
export const ScheduleParams = z
  .object({
    schedule_id: z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, "must be 1-128 of A-Z, a-z, 0-9, '_', '.', ':', '-'"),
  })
  .strict();

/** What registering a version says of the runs of older versions (Engine.registerWorkflow's `upgradable`). */
export const UpgradableSchema = z
  .object({
    active: z.number().int().describe("active (RUNNING) top-level runs of older versions, counted up to 10 000"),
    checked: z.number().int().describe("how many of them were checked against the rule: the newest 1000"),
    compatible: z.number().int().describe("how many of those checked could move to this version now"),
  })
  .describe("runs of older versions that POST /v1/workflows/{id}/migrate could move to this version");

export const MigrateBodySchema = z
  .object({
    to_version: z.number().int().min(1).describe("the version to move runs to: newer than theirs"),
    from_version: z.number().int().min(1).optional().describe("only runs of this version; default: every older one"),
    run_ids: z
      .array(z.string().min(1).max(200))
      .max(1000)
      .optional()
      .describe("only these runs, each of the workflow (404 otherwise); default: every active run of an older version"),
    dry_run: z.boolean().optional().describe("move nothing: answer what would move (default false)"),
  })
  .strict();

export const MigrateAnswerSchema = z.object({
  moved: z
    .array(z.object({ run_id: z.string(), from_version: z.number().int() }))
    .describe("the runs moved (with dry_run: that would move), each with the version it had"),
  incompatible: z
    .array(z.object({ run_id: z.string(), from_version: z.number().int(), reasons: z.array(z.string()) }))
    .describe("the runs left as they are, each with every reason (docs/concepts.md, Upgrading runs in flight)"),
  dry_run: z.boolean(),
});
