/** Runs: start, read, list (paged), cancel, retry, fork, their events and their graph. */
import { randomBytes } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { budgetRaise } from "../../core/budget.js";
import type { Run } from "../../core/types.js";
import { graphModel, renderMermaid } from "../../definition/mermaid.js";
import { validateWorkflow } from "../../definition/validate.js";
import type { Engine } from "../../engine/engine.js";
import type { OperatorOptions } from "../../engine/engine-options.js";
import { MAP_ITEMS_MAX_LIMIT } from "../../engine/map-items.js";
import { MESSAGES_MAX_LIMIT } from "../../engine/messages.js";
import { ConflictError, ForbiddenError, ValidationError } from "../../errors.js";
import { MIN_SEARCH_CHARS } from "../../store/store.js";
import { ADMINS, READERS } from "../auth.js";
import type { RouteContext } from "../context.js";
import { hasCode } from "../errors.js";
import type { Principal } from "../principal.js";
import {
  BudgetSchema,
  EventSchema,
  errorResponses,
  MapItemSchema,
  MessageSchema,
  PrioritySchema,
  RUN_STATUSES,
  RunParams,
  RunSchema,
  RunWithNodesSchema,
  StepSchema,
} from "../schemas.js";
import {
  assertRunInScope,
  checkRunScope,
  childrenOutOfScope,
  hideRuns,
  inScope,
  runForReader,
  visibleWorkflowIds,
} from "../scope.js";

const StartBody = z
  .object({
    workflow_id: z.string().min(1).max(200),
    input: z.unknown().optional().describe("the run's input (default {}), checked against the workflow's input_schema"),
    idempotency_key: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe("the same key returns the same run; the same key with another input is a 409"),
    budget: BudgetSchema.optional().describe("the run's budget, replacing the workflow's budget"),
    tags: z
      .record(z.string(), z.string())
      .optional()
      .describe(
        "at most 16 name/value pairs (names of A-Z a-z 0-9 _ . : -), inherited by child runs; GET /v1/runs?tag=name:value finds them",
      ),
    key: z
      .string()
      .min(1)
      .max(256)
      .optional()
      .describe("at most one run of the workflow with this key is RUNNING at a time (a user, a conversation)"),
    on_active: z
      .enum(["queue", "reject", "cancel_active", "skip"])
      .optional()
      .describe(
        "while a run of the key is active: queue (default; begin after it, in order), reject (409 naming it), cancel_active (replace it), skip (answer it)",
      ),
    debounce_seconds: z
      .number()
      .positive()
      .max(86_400)
      .optional()
      .describe("starts of the key within this window make one run with the last input, begun when the window passes"),
    priority: PrioritySchema.optional(),
  })
  .strict();

/** The longest `q` of GET /v1/runs. */
const SEARCH_MAX_CHARS = 200;

const EpochMs = z.coerce.number().int().min(0).max(8.64e15);

const ListQuery = z
  .object({
    status: z.enum(RUN_STATUSES).optional(),
    workflow_id: z.string().min(1).max(200).optional(),
    schedule_id: z.string().min(1).max(200).optional().describe("only the runs this schedule started"),
    id_prefix: z.string().min(1).max(200).optional().describe("only runs whose run_id starts with this"),
    id_contains: z
      .string()
      .min(1)
      .max(200)
      // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing them is the point
      .refine((part) => !/[\u0000-\u001f\u007f]/.test(part), "id_contains must not contain control characters")
      .optional()
      .describe("only runs whose run_id contains this, in any case (e.g. the end of the id the admin page shows)"),
    created_after: EpochMs.optional().describe("only runs created at or after this time (ms since the epoch)"),
    created_before: EpochMs.optional().describe("only runs created before this time (ms since the epoch)"),
    q: z
      .string()
      .min(MIN_SEARCH_CHARS, `q must be at least ${MIN_SEARCH_CHARS} characters (the search index is of trigrams)`)
      .max(SEARCH_MAX_CHARS, `q must be at most ${SEARCH_MAX_CHARS} characters`)
      // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing them is the point
      .refine((q) => !/[\u0000-\u001f\u007f]/.test(q), "q must not contain control characters (NUL, newlines, tabs)")
      .optional()
      .describe(
        `only runs whose input or output contains this text, case-insensitively (${MIN_SEARCH_CHARS} to ${SEARCH_MAX_CHARS} characters)`,
      ),
    tag: z
      .union([z.string(), z.array(z.string())])
      .optional()
      .describe("only runs carrying this tag, as name:value (repeat it: runs carrying every one)"),
    paused: z.enum(["true", "false"]).optional().describe("only paused runs (true), or only runs not paused (false)"),
    limit: z.coerce.number().int().min(1).max(1000).default(50),
    cursor: z.string().max(1000).optional().describe("next_cursor of the previous page"),
  })
  .strict();

/** A run as an action answers it: what the caller may read of it, its children out of scope hidden. */
async function actionAnswer(engine: Engine, principal: Principal | null, run: Run) {
  return hideRuns(runForReader(principal, run), await childrenOutOfScope(engine, principal, run.run_id));
}

/** Who acts, as a run's history records it: the token's name when there is one, else what the body says. */
function operator(principal: Principal | null, body: { by?: string; reason?: string }): OperatorOptions {
  const by = principal?.name ?? body.by;
  return { ...(by === undefined ? {} : { by }), ...(body.reason === undefined ? {} : { reason: body.reason }) };
}

/** `tag=name:value` (one or repeated) as listRuns' tags: the value is all after the first colon. */
function tagFilter(tag: string | string[] | undefined): Record<string, string> | undefined {
  if (tag === undefined) return undefined;
  const tags: Record<string, string> = {};
  for (const pair of Array.isArray(tag) ? tag : [tag]) {
    const at = pair.indexOf(":");
    if (at <= 0) {
      throw new ValidationError("Invalid request query", [
        { path: "query.tag", message: `is name:value (e.g. customer:acme), got ${JSON.stringify(pair)}` },
      ]);
    }
    tags[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return tags;
}

const CancelBody = z
  .object({
    reason: z.string().max(1000).optional(),
    compensate: z.boolean().optional().describe("undo what the run did first (COMPENSATING, then CANCELLED)"),
  })
  .strict();

const OperatorBody = z
  .object({
    reason: z.string().max(1000).optional().describe("why, recorded in the run's history"),
    by: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe("who acts, recorded in the run's history; with a token, the token's name is recorded instead"),
  })
  .strict();

const RetryBody = z
  .object({
    from: z.string().min(1).max(200).optional().describe("an earlier node to run again, with everything downstream"),
    force: z.boolean().optional().describe("redrive a run that needs attention"),
    fresh_steps: z
      .boolean()
      .optional()
      .describe("new visits start without the durable steps of the failed visits they replace (task.step)"),
  })
  .strict();

export const ForkBody = z
  .object({
    from: z
      .string()
      .min(1)
      .max(200)
      .describe("the node to run again from: it and everything downstream run; what the source did before it is kept"),
    input: z
      .unknown()
      .optional()
      .describe("the fork's input (default the source's), checked against the workflow's input_schema"),
    payloads: z
      .record(z.string(), z.unknown())
      .optional()
      .describe(
        "payloads by node id, each replacing the resolved payload of that node's first visit; only nodes the fork runs",
      ),
    version: z.number().int().min(1).optional().describe("the workflow version the fork runs (default the source's)"),
  })
  .strict();

const EventsQuery = z
  .object({
    after_seq: z.coerce.number().int().min(0).optional(),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict();

const NodeParams = RunParams.extend({ node_id: z.string().min(1).max(200) }).strict();

const MapItemsQuery = z
  .object({
    visit: z.coerce.number().int().min(1).optional().describe("the node's visit (default: its current one)"),
    after: z.coerce
      .number()
      .int()
      .min(-1)
      .default(-1)
      .describe("items after this index (exclusive): next_after of the previous page"),
    limit: z.coerce.number().int().min(1).max(MAP_ITEMS_MAX_LIMIT).default(100),
  })
  .strict();

const MessagesQuery = z
  .object({
    visit: z.coerce.number().int().min(1).optional().describe("the node's visit (default: its current one)"),
    after: z.coerce
      .number()
      .int()
      .min(-1)
      .default(-1)
      .describe("messages after this seq (exclusive): next_after of the previous page"),
    limit: z.coerce.number().int().min(1).max(MESSAGES_MAX_LIMIT).default(100),
  })
  .strict();

const Cursor = z.object({ before: z.string().min(1) }).strict();

type Params = z.output<typeof RunParams>;
type NodeParamsOf = z.output<typeof NodeParams>;

/** What a scoped token is told when its budget would raise the workflow's (a 403). */
function raiseRefusal(workflowId: string, r: NonNullable<ReturnType<typeof budgetRaise>>): string {
  const asked = r.requested === null ? "leaves it out (no limit)" : `asks ${r.requested}`;
  return (
    `budget.${r.field} may only lower the budget of workflow "${workflowId}", whose ${r.field} is ${r.workflow}; ` +
    `this request ${asked}. Give ${r.field} at most ${r.workflow} (startRun's budget replaces the workflow's, so repeat the fields you keep), ` +
    "or start the run with an admin token without workflows"
  );
}

export function registerRunRoutes(app: FastifyInstance, { engine, rates }: RouteContext): void {
  app.post<{ Body: z.output<typeof StartBody> }>(
    "/v1/runs",
    {
      config: { access: ADMINS, scoped: true },
      schema: {
        operationId: "startRun",
        tags: ["runs"],
        summary: "Start a run of the latest version of a workflow (a traceparent header joins the caller's trace)",
        body: StartBody,
        response: { ...errorResponses(404, 409, 429, 503), 201: RunSchema },
      },
    },
    async (request, reply) => {
      const { workflow_id, input, idempotency_key, budget, tags, key, on_active, debounce_seconds, priority } =
        request.body;
      rates.starts.take(request.principal?.name);
      if (!inScope(request.principal, workflow_id)) {
        throw new ForbiddenError(
          `this token may not start runs of workflow "${workflow_id}": it is scoped to ${request.principal?.workflows?.patterns.join(", ")}`,
        );
      }
      // A budget may only lower the workflow's, unless the caller is an unscoped admin (DESIGN §13.1).
      let version: number | undefined;
      if (budget !== undefined && request.principal?.workflows) {
        const workflow = await engine.getWorkflow(workflow_id);
        const raised = budgetRaise(budget, workflow.definition.budget);
        if (raised) throw new ForbiddenError(raiseRefusal(workflow_id, raised));
        version = workflow.version; // the version checked is the one started
      }
      const run = await engine
        .startRun(workflow_id, {
          ...(version === undefined ? {} : { version }),
          input,
          ...(idempotency_key === undefined ? {} : { idempotency_key }),
          ...(budget === undefined ? {} : { budget }),
          ...(tags === undefined ? {} : { tags }),
          ...(key === undefined ? {} : { key }),
          ...(on_active === undefined ? {} : { on_active }),
          ...(debounce_seconds === undefined ? {} : { debounce_seconds }),
          ...(priority === undefined ? {} : { priority }),
          // The run and its children may start only what the token may (DESIGN §13.1).
          ...(request.principal?.workflows ? { scope: request.principal.workflows.patterns } : {}),
          traceparent: traceparentOf(request.headers.traceparent, request.id),
        })
        .catch((e: unknown) => {
          // The run that holds the key may be another workflow's, which a scoped token must not learn of.
          if (hasCode(e, "conflict") && request.principal?.workflows && idempotency_key !== undefined) {
            throw new ConflictError(
              `idempotency_key "${idempotency_key}" was already used for another run, with a different workflow or input; use a new key for a new run`,
            );
          }
          throw e;
        });
      return reply.code(201).send(run);
    },
  );

  app.get<{ Querystring: z.output<typeof ListQuery> }>(
    "/v1/runs",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "listRuns",
        tags: ["runs"],
        summary:
          "Runs, newest first, a page at a time, filtered by status, workflow, id (its start or any part), creation time and text",
        querystring: ListQuery,
        response: {
          ...errorResponses(503),
          200: z.object({
            runs: z.array(RunSchema),
            next_cursor: z.string().nullable().describe("pass as cursor for the next page; null on the last"),
          }),
        },
      },
    },
    async (request) => {
      const {
        status,
        workflow_id,
        schedule_id,
        id_prefix,
        id_contains,
        created_after,
        created_before,
        q,
        tag,
        paused,
        limit,
        cursor,
      } = request.query;
      const tags = tagFilter(tag);
      const scope = await visibleWorkflowIds(engine, request.principal);
      const runs = await engine.listRuns({
        limit: limit + 1,
        ...(status === undefined ? {} : { status }),
        ...(workflow_id === undefined ? {} : { workflow_id }),
        ...(schedule_id === undefined ? {} : { schedule_id }),
        ...(id_prefix === undefined ? {} : { id_prefix }),
        ...(id_contains === undefined ? {} : { id_contains }),
        ...(created_after === undefined ? {} : { created_after }),
        ...(created_before === undefined ? {} : { created_before }),
        ...(q === undefined ? {} : { q }),
        ...(tags === undefined ? {} : { tags }),
        ...(paused === undefined ? {} : { paused: paused === "true" }),
        ...(scope === null ? {} : { workflow_ids: scope }),
        ...(cursor === undefined ? {} : { before: decodeCursor(cursor) }),
      });
      const page = runs.slice(0, limit);
      const last = page[page.length - 1];
      return {
        runs: await Promise.all(page.map((r) => listedRun(engine, request.principal, r))),
        next_cursor: runs.length > limit && last ? encodeCursor(last.run_id) : null,
      };
    },
  );

  app.get<{ Params: Params }>(
    "/v1/runs/:run_id",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "getRun",
        tags: ["runs"],
        summary: "A run with its current visits as nodes",
        params: RunParams,
        response: { ...errorResponses(404, 503), 200: RunWithNodesSchema },
      },
    },
    async (request) => {
      const run = await engine.getRun(request.params.run_id);
      assertRunInScope(request.principal, run);
      // Child runs of workflows outside a scoped token's scope are not its to learn of: not listed, their ids hidden.
      const hidden = await childrenOutOfScope(engine, request.principal, run);
      return hideRuns(
        runForReader(request.principal, {
          ...run,
          children: run.children.filter((c) => inScope(request.principal, c.workflow_id)),
        }),
        hidden,
      );
    },
  );

  app.get<{ Params: NodeParamsOf; Querystring: z.output<typeof MapItemsQuery> }>(
    "/v1/runs/:run_id/nodes/:node_id/items",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "listMapItems",
        tags: ["runs"],
        summary: "A map node's items by index, a page at a time, each with its state and the run that runs it",
        params: NodeParams,
        querystring: MapItemsQuery,
        response: {
          ...errorResponses(404, 503),
          200: z.object({
            items: z.array(MapItemSchema),
            next_after: z.number().int().nullable().describe("pass as after for the next page; null on the last"),
          }),
        },
      },
    },
    async (request) => {
      const { run_id, node_id } = request.params;
      const { visit, after, limit } = request.query;
      await checkRunScope(engine, request.principal, run_id);
      return engine.listMapItems(run_id, node_id, { after, limit, ...(visit === undefined ? {} : { visit }) });
    },
  );

  app.get<{ Params: NodeParamsOf }>(
    "/v1/runs/:run_id/nodes/:node_id/steps",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "listSteps",
        tags: ["runs"],
        summary:
          "A node's durable steps over its visits (task.step): name, the attempt that recorded it, output, size, time",
        params: NodeParams,
        response: { ...errorResponses(404, 503), 200: z.object({ steps: z.array(StepSchema) }) },
      },
    },
    async (request) => {
      const { run_id, node_id } = request.params;
      await checkRunScope(engine, request.principal, run_id);
      return { steps: await engine.listSteps(run_id, node_id) };
    },
  );

  app.get<{ Params: NodeParamsOf; Querystring: z.output<typeof MessagesQuery> }>(
    "/v1/runs/:run_id/nodes/:node_id/messages",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "listMessages",
        tags: ["runs"],
        summary:
          "An agent node's conversation in one visit, a page at a time: its instructions and input, then each model turn and tool call as recorded",
        params: NodeParams,
        querystring: MessagesQuery,
        response: {
          ...errorResponses(404, 503),
          200: z.object({
            visit: z.number().int().nullable().describe("the visit read; null when the node has not been visited"),
            messages: z.array(MessageSchema),
            next_after: z.number().int().nullable().describe("pass as after for the next page; null on the last"),
          }),
        },
      },
    },
    async (request) => {
      const { run_id, node_id } = request.params;
      const { visit, after, limit } = request.query;
      await checkRunScope(engine, request.principal, run_id);
      return engine.listMessages(run_id, node_id, { after, limit, ...(visit === undefined ? {} : { visit }) });
    },
  );

  app.get<{ Params: Params }>(
    "/v1/runs/:run_id/progress",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "listProgress",
        tags: ["runs"],
        summary:
          "A run's kept progress, one stream per attempt: its text deltas joined, its last other value, and whether a retry superseded it",
        params: RunParams,
        response: {
          ...errorResponses(404, 503),
          200: z.object({
            streams: z.array(
              z.object({
                node_id: z.string(),
                visit: z.number().int(),
                attempt: z.number().int(),
                text: z.string().describe("its `{ delta }` values joined, in order"),
                last: z.unknown().describe("the last value it sent that is not a text delta, else null"),
                events: z.number().int().describe("node.progress events kept"),
                last_seq: z.number().int().describe("its last event's seq: the stream's cursor after it"),
                superseded: z.boolean().describe("the attempt was retried, or a later one started"),
              }),
            ),
          }),
        },
      },
    },
    async (request) => {
      const { run_id } = request.params;
      await checkRunScope(engine, request.principal, run_id);
      return { streams: await engine.listProgress(run_id) };
    },
  );

  app.post<{ Params: Params; Body: z.output<typeof CancelBody> }>(
    "/v1/runs/:run_id/cancel",
    {
      config: { access: ADMINS, scoped: true },
      schema: {
        operationId: "cancelRun",
        tags: ["runs"],
        summary: "Cancel a run (409 when it already ended)",
        params: RunParams,
        body: CancelBody,
        response: { ...errorResponses(404, 409, 503), 200: RunSchema },
      },
    },
    async (request) => {
      const { reason, compensate } = request.body;
      await checkRunScope(engine, request.principal, request.params.run_id);
      const run = await engine.cancelRun(request.params.run_id, {
        ...(reason === undefined ? {} : { reason }),
        ...(compensate === undefined ? {} : { compensate }),
      });
      return actionAnswer(engine, request.principal, run);
    },
  );

  for (const action of ["pause", "resume"] as const) {
    app.post<{ Params: Params; Body: z.output<typeof OperatorBody> }>(
      `/v1/runs/:run_id/${action}`,
      {
        config: { access: ADMINS, scoped: true },
        schema: {
          operationId: `${action}Run`,
          tags: ["runs"],
          summary:
            action === "pause"
              ? "Pause a run: none of its attempts starts until it is resumed (409 when it ended)"
              : "Resume a paused run: its ready nodes start (409 when it ended)",
          params: RunParams,
          body: OperatorBody,
          response: { ...errorResponses(404, 409, 503), 200: RunSchema },
        },
      },
      async (request) => {
        await checkRunScope(engine, request.principal, request.params.run_id);
        const who = operator(request.principal, request.body);
        const run = await (action === "pause" ? engine.pauseRun : engine.resumeRun).call(
          engine,
          request.params.run_id,
          who,
        );
        return actionAnswer(engine, request.principal, run);
      },
    );
  }

  app.post<{ Params: z.output<typeof NodeParams>; Body: z.output<typeof OperatorBody> }>(
    "/v1/runs/:run_id/nodes/:node_id/fail",
    {
      config: { access: ADMINS, scoped: true },
      schema: {
        operationId: "failVisit",
        tags: ["runs"],
        summary:
          "Fail a node that waits for an attempt (RETRYING or ready: a node paused by on_exhausted among them), taking its failure path (409 when it is running or done)",
        params: NodeParams,
        body: OperatorBody,
        response: { ...errorResponses(404, 409, 503), 200: RunSchema },
      },
    },
    async (request) => {
      await checkRunScope(engine, request.principal, request.params.run_id);
      const run = await engine.failVisit(
        request.params.run_id,
        request.params.node_id,
        operator(request.principal, request.body),
      );
      return actionAnswer(engine, request.principal, run);
    },
  );

  app.post<{ Params: Params; Body: z.output<typeof RetryBody> }>(
    "/v1/runs/:run_id/retry",
    {
      config: { access: ADMINS, scoped: true },
      schema: {
        operationId: "retryRun",
        tags: ["runs"],
        summary: "Redrive a FAILED or CANCELLED run (409 otherwise)",
        params: RunParams,
        body: RetryBody,
        response: { ...errorResponses(404, 409, 429, 503), 200: RunSchema },
      },
    },
    async (request) => {
      const { from, force, fresh_steps } = request.body;
      rates.starts.take(request.principal?.name);
      await checkRunScope(engine, request.principal, request.params.run_id);
      const run = await engine.retryRun(request.params.run_id, {
        ...(from === undefined ? {} : { from }),
        ...(force === undefined ? {} : { force }),
        ...(fresh_steps === undefined ? {} : { fresh_steps }),
      });
      return actionAnswer(engine, request.principal, run);
    },
  );

  app.post<{ Params: Params; Body: z.output<typeof ForkBody> }>(
    "/v1/runs/:run_id/fork",
    {
      config: { access: ADMINS, scoped: true },
      schema: {
        operationId: "forkRun",
        tags: ["runs"],
        summary:
          "Fork a run (finished or not): a new run keeps what it did before a node and runs the node and what follows with an edited input and payloads",
        params: RunParams,
        body: ForkBody,
        response: { ...errorResponses(404, 409, 429, 503), 201: RunSchema },
      },
    },
    async (request, reply) => {
      const { from, input, payloads, version } = request.body;
      rates.starts.take(request.principal?.name);
      // The fork is a run of the source's workflow: a token that may start it may fork (DESIGN §13.1).
      await checkRunScope(engine, request.principal, request.params.run_id);
      const run = await engine.forkRun(request.params.run_id, {
        from,
        ...(input === undefined ? {} : { input }),
        ...(payloads === undefined ? {} : { payloads }),
        ...(version === undefined ? {} : { version }),
        ...(request.principal?.workflows ? { scope: request.principal.workflows.patterns } : {}),
      });
      return reply.code(201).send(run);
    },
  );

  app.get<{ Params: Params; Querystring: z.output<typeof EventsQuery> }>(
    "/v1/runs/:run_id/events",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "listRunEvents",
        tags: ["events"],
        summary: "A run's history, oldest first, after after_seq",
        params: RunParams,
        querystring: EventsQuery,
        response: {
          ...errorResponses(404, 503),
          200: z.object({
            events: z.array(EventSchema),
            next_after_seq: z
              .number()
              .int()
              .nullable()
              .describe("pass as after_seq for the next page; null on the last"),
          }),
        },
      },
    },
    async (request) => {
      const { run_id } = request.params;
      const { after_seq, limit } = request.query;
      await checkRunScope(engine, request.principal, run_id);
      const events = await engine.listEvents(run_id, {
        limit,
        ...(after_seq === undefined ? {} : { afterSeq: after_seq }),
      });
      // Every run has a run.started event: an empty first page may be an unknown run (404).
      if (events.length === 0 && after_seq === undefined) await engine.getRun(run_id);
      const last = events[events.length - 1];
      const hidden = await childrenOutOfScope(engine, request.principal, run_id);
      return { events: hideRuns(events, hidden), next_after_seq: events.length === limit && last ? last.seq : null };
    },
  );

  app.get<{ Params: Params }>(
    "/v1/runs/:run_id/graph",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "getRunGraph",
        tags: ["runs"],
        summary: "The run's workflow as a Mermaid flowchart, with node states and the path taken",
        params: RunParams,
        response: { ...errorResponses(404, 503), 200: { content: { "text/plain": { schema: z.string() } } } },
      },
    },
    async (request, reply) => {
      const run = await engine.getRun(request.params.run_id);
      assertRunInScope(request.principal, run);
      const workflow = await engine.getWorkflow(run.workflow_id, run.workflow_version);
      const checked = validateWorkflow(workflow.definition);
      if (!checked.ok) throw new Error(`stored workflow ${run.workflow_id} v${run.workflow_version} does not validate`);
      // A failed visit's label quotes its error, which may name a child run out of a scoped token's scope.
      const hidden = await childrenOutOfScope(engine, request.principal, run);
      const overlay = hideRuns({ nodes: run.nodes, visits: await engine.listVisits(run.run_id) }, hidden);
      return reply.type("text/plain; charset=utf-8").send(`${renderMermaid(graphModel(checked.graph, overlay))}\n`);
    },
  );
}

/**
 * A run of a list as the caller may read it: a scoped token is not told the id or the error of a
 * child out of its scope that a failed run's error carries (`details.run_id`).
 */
async function listedRun(engine: Engine, principal: Principal | null, run: Run): Promise<Run> {
  const child = (run.error?.details as { run_id?: unknown } | undefined)?.run_id;
  if (!principal?.workflows || typeof child !== "string") return runForReader(principal, run);
  const found = await engine.getRun(child).catch(() => null);
  const hidden = found && inScope(principal, found.workflow_id) ? [] : [child];
  return hideRuns(runForReader(principal, run), hidden);
}

/** The caller's traceparent when valid; else one in the request's trace, so logs and run share the trace id. */
function traceparentOf(header: string | string[] | undefined, traceId: string): string {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (value?.startsWith(`00-${traceId}-`)) return value;
  return `00-${traceId}-${randomBytes(8).toString("hex")}-01`;
}

function encodeCursor(runId: string): string {
  return Buffer.from(JSON.stringify({ before: runId })).toString("base64url");
}

function decodeCursor(cursor: string): string {
  try {
    return Cursor.parse(JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"))).before;
  } catch {
    throw new ValidationError("Invalid request query", [
      { path: "query.cursor", message: "is not a cursor this API returned: pass next_cursor of the previous page" },
    ]);
  }
}
