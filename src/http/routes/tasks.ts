/**
 * The external-agent protocol (DESIGN §5): claim tasks of some agent types with a lease (long
 * poll up to 30 s), heartbeat while working, then complete or fail with the attempt. A report
 * or heartbeat for an attempt the caller no longer holds is 409 and changes nothing; the
 * identical report sent twice is answered the same way (`status: "duplicate"` the second time).
 * An `agent` token claims only the agent types it lists. A claimed attempt is bound to the token
 * and `worker_id` that claimed it (DESIGN §13): heartbeats and reports from anyone else are 403
 * (an agent type the token may not claim) or 409, and change nothing. Ids are checked here,
 * before the engine sees them; claims and heartbeats are rate-limited per token (429).
 * Progress (DESIGN §11.6) is checked like a heartbeat but changes nothing stored: it goes to the
 * live subscribers, throttled per attempt, and is dropped (`delivered: false`) once the attempt ended.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { AGENT_TYPE_PATTERN, NODE_ID_PATTERN } from "../../definition/schema.js";
import {
  EXECUTION_ID_PATTERN,
  MAX_TASKS,
  MAX_WAIT_SECONDS,
  WORKER_ID_PATTERN,
  type WorkerIdentity,
} from "../../engine/attempts/external-requests.js";
import { AGENTS } from "../auth.js";
import type { RouteContext } from "../context.js";
import type { Principal } from "../principal.js";
import { errorResponses, TaskSchema, UsageSchema } from "../schemas.js";

const json = () => z.unknown();

const workerId = z
  .string()
  .regex(WORKER_ID_PATTERN, { error: "must be 1 to 128 letters, digits, '_', '.', ':' or '-'" })
  .describe("names the worker in the visits' holder and the events; send the same one with every heartbeat and report");

const ClaimBody = z
  .object({
    agent_types: z
      .array(z.string().regex(AGENT_TYPE_PATTERN, { error: "must be 1 to 128 letters, digits, '_', '.', ':' or '-'" }))
      .min(1)
      .max(50),
    worker_id: workerId,
    max_tasks: z.number().int().min(1).max(MAX_TASKS).default(1),
    lease_seconds: z.number().min(1).max(86_400).default(60),
    wait_seconds: z
      .number()
      .min(0)
      .max(MAX_WAIT_SECONDS)
      .default(0)
      .describe("long poll: how long to wait when no task is ready"),
  })
  .strict();

const TaskParams = z
  .object({
    execution_id: z.string().regex(EXECUTION_ID_PATTERN, {
      error:
        "must be <run_id>:<node_id>:<visit> (with :compensate for a compensation, ~<index> for a map item), as the claimed task gave it",
    }),
  })
  .strict();

const Answer = z.object({
  status: z.enum(["accepted", "duplicate"]).describe("duplicate: the same report was applied before"),
  lease_expires_at: z.number().nullable(),
});

const HeartbeatBody = z
  .object({
    attempt: z.number().int().min(1),
    worker_id: workerId,
    lease_seconds: z.number().min(1).max(86_400).default(60),
  })
  .strict();

const ProgressBody = z
  .object({
    attempt: z.number().int().min(1),
    worker_id: workerId,
    progress: json().describe(
      "any JSON value: the attempt's partial output (text as deltas, `{ delta }`: kept and joined; a count)",
    ),
  })
  .strict();

const StepBody = z
  .object({
    attempt: z.number().int().min(1),
    worker_id: workerId,
    name: z.string().min(1).max(200).describe("unique within the visit (e.g. search:3)"),
    output: json().describe("any JSON value: the step's result, within the engine's payload size limit"),
  })
  .strict();

const StepAnswer = z.object({
  status: z
    .enum(["recorded", "duplicate"])
    .describe("duplicate: an earlier attempt recorded this name; its output is answered, use it"),
  output: json().describe("the output recorded under the name"),
  attempt: z.number().int().describe("the attempt that recorded it"),
});

const ProgressAnswer = z.object({
  delivered: z.boolean().describe("false: the attempt no longer runs, and the progress was dropped (stop sending it)"),
});

const target = z.union([
  z.literal("$end"),
  z.string().regex(NODE_ID_PATTERN, { error: 'must be a node id ([A-Za-z0-9_-]{1,64}) or "$end"' }),
]);

const CompleteBody = z
  .object({
    attempt: z.number().int().min(1),
    worker_id: workerId,
    output: json().describe("any JSON value"),
    next: z
      .union([target, z.array(target).min(1).max(100)])
      .optional()
      .describe(
        "the agent's route: node ids among the node's next_on_success, or \"$end\"; any other is refused (400, details.problems names the declared targets) and the attempt stays held",
      ),
    usage: UsageSchema.optional().describe(
      "what the attempt used (DESIGN §12), added to the run when the report is accepted",
    ),
  })
  .strict();

const FailBody = z
  .object({
    attempt: z.number().int().min(1),
    worker_id: workerId,
    error: z
      .object({
        message: z.string().min(1).max(10_000),
        retry_after_ms: z
          .number()
          .int()
          .min(0)
          .optional()
          .describe("wait this long before the retry instead of the backoff delay (at most retry_max_interval)"),
        rate_limited: z
          .boolean()
          .optional()
          .describe(
            "the service the agent called answered 429 (too many requests): with retry_after_ms, no attempt of this agent type starts on any engine until then (the visit's error has reason rate_limited)",
          ),
      })
      .catchall(z.unknown()),
    retryable: z.boolean().default(true).describe("false fails the visit at once, without retries"),
    usage: UsageSchema.optional().describe("what the attempt used, added to the run when the report is accepted"),
  })
  .strict();

const conflict =
  "409 when the caller does not hold the attempt (expired, superseded, cancelled, another worker's); 403 for an agent type its token may not claim";

/** The worker as the engine binds its attempts: its worker_id and the token it presented. */
function identity(principal: Principal | null, workerId: string): WorkerIdentity {
  return principal ? { worker_id: workerId, token: principal } : { worker_id: workerId };
}

export function registerTaskRoutes(app: FastifyInstance, { engine, rates }: RouteContext): void {
  app.post<{ Body: z.output<typeof ClaimBody> }>(
    "/v1/tasks/claim",
    {
      config: { access: AGENTS },
      schema: {
        operationId: "claimTasks",
        tags: ["tasks"],
        summary: "Claim ready tasks of some agent types, with a lease (long poll with wait_seconds)",
        body: ClaimBody,
        response: { ...errorResponses(429, 503), 200: z.object({ tasks: z.array(TaskSchema) }) },
      },
    },
    async (request, reply) => {
      const claim = { ...request.body, ...identity(request.principal, request.body.worker_id) };
      if (request.body.wait_seconds === 0) return { tasks: await engine.claimTasks(claim) };
      // A worker that goes away (stopping) ends its long poll: nothing more is claimed for it.
      const gone = new AbortController();
      reply.raw.once("close", () => {
        if (!reply.raw.writableEnded) gone.abort();
      });
      return { tasks: await engine.claimTasks({ ...claim, signal: gone.signal }) };
    },
  );

  app.post<{ Params: z.output<typeof TaskParams>; Body: z.output<typeof HeartbeatBody> }>(
    "/v1/tasks/:execution_id/heartbeat",
    {
      config: { access: AGENTS },
      schema: {
        operationId: "heartbeatTask",
        tags: ["tasks"],
        summary: `Renew the lease of a claimed task (${conflict})`,
        params: TaskParams,
        body: HeartbeatBody,
        response: { ...errorResponses(404, 409, 429, 503), 200: Answer },
      },
    },
    async (request) => {
      const { attempt, worker_id, lease_seconds } = request.body;
      return engine.heartbeatTask(request.params.execution_id, {
        ...identity(request.principal, worker_id),
        attempt,
        lease_seconds,
      });
    },
  );

  app.post<{ Params: z.output<typeof TaskParams>; Body: z.output<typeof ProgressBody> }>(
    "/v1/tasks/:execution_id/progress",
    {
      config: { access: AGENTS },
      schema: {
        operationId: "progressTask",
        tags: ["tasks"],
        summary: `Stream a claimed task's partial output as node.progress, kept with the run's events: throttled per attempt (${conflict})`,
        params: TaskParams,
        body: ProgressBody,
        response: { ...errorResponses(404, 409, 429, 503), 202: ProgressAnswer },
      },
    },
    async (request, reply) => {
      const { attempt, worker_id, progress } = request.body;
      rates.progress.take(request.principal?.name);
      const answer = await engine.progressTask(request.params.execution_id, {
        ...identity(request.principal, worker_id),
        attempt,
        progress,
      });
      return reply.code(202).send(answer);
    },
  );

  app.post<{ Params: z.output<typeof TaskParams>; Body: z.output<typeof StepBody> }>(
    "/v1/tasks/:execution_id/steps",
    {
      config: { access: AGENTS },
      schema: {
        operationId: "recordTaskStep",
        tags: ["tasks"],
        summary: `Record a durable step of a claimed task before using its output (DESIGN §14.1): a later attempt of the visit gets it with its claim (${conflict})`,
        params: TaskParams,
        body: StepBody,
        response: { ...errorResponses(404, 409, 503), 200: StepAnswer },
      },
    },
    async (request) => {
      const { attempt, worker_id, name, output } = request.body;
      return engine.recordTaskStep(request.params.execution_id, {
        ...identity(request.principal, worker_id),
        attempt,
        name,
        output,
      });
    },
  );

  app.post<{ Params: z.output<typeof TaskParams>; Body: z.output<typeof CompleteBody> }>(
    "/v1/tasks/:execution_id/complete",
    {
      config: { access: AGENTS },
      schema: {
        operationId: "completeTask",
        tags: ["tasks"],
        summary: `Report a claimed task's success (${conflict}; 400 for a next the node does not declare, which leaves the attempt held: report again)`,
        params: TaskParams,
        body: CompleteBody,
        response: { ...errorResponses(404, 409, 503), 200: Answer },
      },
    },
    async (request) => {
      const { attempt, worker_id, output, next, usage } = request.body;
      return engine.completeTask(request.params.execution_id, {
        ...identity(request.principal, worker_id),
        attempt,
        output,
        ...(next ? { next } : {}),
        ...(usage ? { usage } : {}),
      });
    },
  );

  app.post<{ Params: z.output<typeof TaskParams>; Body: z.output<typeof FailBody> }>(
    "/v1/tasks/:execution_id/fail",
    {
      config: { access: AGENTS },
      schema: {
        operationId: "failTask",
        tags: ["tasks"],
        summary: `Report a claimed task's failure, retried unless retryable is false (${conflict})`,
        params: TaskParams,
        body: FailBody,
        response: { ...errorResponses(404, 409, 503), 200: Answer },
      },
    },
    async (request) => {
      const { attempt, worker_id, error, retryable, usage } = request.body;
      return engine.failTask(request.params.execution_id, {
        ...identity(request.principal, worker_id),
        attempt,
        error: error as { message: string },
        retryable,
        ...(usage ? { usage } : {}),
      });
    },
  );
}
