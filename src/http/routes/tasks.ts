/**
 * The external-agent protocol (DESIGN §5): claim tasks of some agent types with a lease (long
 * poll up to 30 s), heartbeat while working, then complete or fail with the attempt. A report
 * or heartbeat for an attempt the caller no longer holds is 409 and changes nothing; the
 * identical report sent twice is answered the same way (`status: "duplicate"` the second time).
 * An `agent` token claims only the agent types it lists.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { MAX_TASKS, MAX_WAIT_SECONDS } from "../../engine/external.js";
import { ForbiddenError } from "../../errors.js";
import { AGENTS } from "../auth.js";
import type { RouteContext } from "../server.js";

const json = () => z.unknown();

const TaskSchema = z.object({
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
  trace_id: z.string(),
  traceparent: z.string(),
  workflow_id: z.string(),
  workflow_version: z.number().int(),
  deadline_at: z.number().describe("epoch ms: the attempt's hard cap (the node's timeout)"),
  lease_expires_at: z.number().describe("epoch ms: heartbeat before then, or the attempt fails (lease_expired)"),
});

const ClaimBody = z
  .object({
    agent_types: z.array(z.string().min(1).max(200)).min(1).max(50),
    worker_id: z.string().min(1).max(200).describe("names the worker in the visits' holder and the events"),
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

const TaskParams = z.object({ execution_id: z.string().min(1).max(600) }).strict();

const Answer = z.object({
  status: z.enum(["accepted", "duplicate"]).describe("duplicate: the same report was applied before"),
  lease_expires_at: z.number().nullable(),
});

const HeartbeatBody = z
  .object({ attempt: z.number().int().min(1), lease_seconds: z.number().min(1).max(86_400).default(60) })
  .strict();

const CompleteBody = z
  .object({
    attempt: z.number().int().min(1),
    output: json().describe("any JSON value"),
    next: z
      .union([z.string().min(1), z.array(z.string().min(1)).min(1)])
      .optional()
      .describe("the agent's route: node ids among the node's next_on_success, or \"$end\""),
  })
  .strict();

const FailBody = z
  .object({
    attempt: z.number().int().min(1),
    error: z.object({ message: z.string().min(1).max(10_000) }).catchall(z.unknown()),
    retryable: z.boolean().default(true).describe("false fails the visit at once, without retries"),
  })
  .strict();

const conflict = "409 when the caller no longer holds the attempt (expired, superseded, cancelled)";

export function registerTaskRoutes(app: FastifyInstance, { engine }: RouteContext): void {
  app.post<{ Body: z.output<typeof ClaimBody> }>(
    "/v1/tasks/claim",
    {
      config: { access: AGENTS },
      schema: {
        summary: "Claim ready tasks of some agent types, with a lease (long poll with wait_seconds)",
        body: ClaimBody,
        response: { 200: z.object({ tasks: z.array(TaskSchema) }) },
      },
    },
    async (request, reply) => {
      const allowed = request.principal?.agent_types;
      const refused = allowed ? request.body.agent_types.filter((t) => !allowed.includes(t)) : [];
      if (refused.length > 0) {
        throw new ForbiddenError(
          `this token may claim ${allowed?.join(", ")}, not ${refused.join(", ")}; ask for a token that lists them`,
        );
      }
      if (request.body.wait_seconds === 0) return { tasks: await engine.claimTasks(request.body) };
      // A worker that goes away (stopping) ends its long poll: nothing more is claimed for it.
      const gone = new AbortController();
      reply.raw.once("close", () => {
        if (!reply.raw.writableEnded) gone.abort();
      });
      return { tasks: await engine.claimTasks({ ...request.body, signal: gone.signal }) };
    },
  );

  app.post<{ Params: z.output<typeof TaskParams>; Body: z.output<typeof HeartbeatBody> }>(
    "/v1/tasks/:execution_id/heartbeat",
    {
      config: { access: AGENTS },
      schema: {
        summary: `Renew the lease of a claimed task (${conflict})`,
        params: TaskParams,
        body: HeartbeatBody,
        response: { 200: Answer },
      },
    },
    async (request) => engine.heartbeatTask(request.params.execution_id, request.body),
  );

  app.post<{ Params: z.output<typeof TaskParams>; Body: z.output<typeof CompleteBody> }>(
    "/v1/tasks/:execution_id/complete",
    {
      config: { access: AGENTS },
      schema: {
        summary: `Report a claimed task's success (${conflict})`,
        params: TaskParams,
        body: CompleteBody,
        response: { 200: Answer },
      },
    },
    async (request) => {
      const { attempt, output, next } = request.body;
      return engine.completeTask(request.params.execution_id, { attempt, output, ...(next ? { next } : {}) });
    },
  );

  app.post<{ Params: z.output<typeof TaskParams>; Body: z.output<typeof FailBody> }>(
    "/v1/tasks/:execution_id/fail",
    {
      config: { access: AGENTS },
      schema: {
        summary: `Report a claimed task's failure, retried unless retryable is false (${conflict})`,
        params: TaskParams,
        body: FailBody,
        response: { 200: Answer },
      },
    },
    async (request) => {
      const { attempt, error, retryable } = request.body;
      return engine.failTask(request.params.execution_id, {
        attempt,
        error: error as { message: string },
        retryable,
      });
    },
  );
}
