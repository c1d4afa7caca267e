/**
 * Events (DESIGN §11.2–11.3): to one run (`POST /v1/runs/{run_id}/events`, delivered to its
 * oldest waiting wait_event or kept in its inbox) or by key (`POST /v1/events`, to every run
 * waiting on that name and key, and starting a run of each workflow whose triggers declare it,
 * DESIGN §17). Admins only. A token scoped to workflows reaches, and starts, only runs of those
 * workflows (DESIGN §13.1).
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Json } from "../../core/types.js";
import { ADMINS } from "../auth.js";
import type { RouteContext } from "../context.js";
import { errorResponses, ProblemSchema } from "../schemas.js";
import { checkRunScope } from "../scope.js";

const RunParams = z.object({ run_id: z.string().min(1).max(200) }).strict();
const Name = z.string().min(1).max(200);
const IdempotencyKey = Name.optional().describe("the same key again is answered as the first time, delivered once");

const SendBody = z.object({ name: Name, payload: z.unknown().optional(), idempotency_key: IdempotencyKey }).strict();
const PublishBody = z
  .object({ name: Name, key: Name, payload: z.unknown().optional(), idempotency_key: IdempotencyKey })
  .strict();

const Delivered = z.object({ node_id: z.string(), visit: z.number().int() });
const SendAnswer = z.object({
  event_id: z.string(),
  delivered_to: Delivered.nullable(),
  buffered: z.boolean(),
  duplicate: z.boolean(),
});
const PublishAnswer = z.object({
  event_id: z.string(),
  delivered_to: z.array(Delivered.extend({ run_id: z.string() })),
  duplicate: z
    .boolean()
    .describe(
      "the event was published before under its idempotency key: nothing changed; started lists what it started then",
    ),
  started: z
    .array(z.object({ workflow_id: z.string(), workflow_version: z.number().int(), run_id: z.string() }))
    .describe(
      "the runs the workflows' triggers started: one per workflow whose latest version declares the event (and its key, if the trigger names one) that the token's scope covers; a run started for the same event before (same name, key and idempotency key) is listed, not started again",
    ),
  not_started: z
    .array(
      z.object({
        workflow_id: z.string(),
        workflow_version: z.number().int(),
        trigger: z.number().int().describe("the trigger's index in the workflow's triggers"),
        reason: z
          .enum(["input_failed", "input_invalid", "idempotency_key_taken"])
          .describe(
            "input_failed: a template of the trigger's input failed; input_invalid: the input it made does not match the workflow's input_schema (or is not JSON, or too large); idempotency_key_taken: a run the engine did not start holds the trigger's key",
          ),
        message: z.string(),
        problems: z.array(ProblemSchema),
      }),
    )
    .describe(
      "triggers that matched but started no run, with why: the other workflows and the waiting runs are not held back",
    ),
});

export function registerEventRoutes(app: FastifyInstance, { engine, rates }: RouteContext): void {
  app.post<{ Params: z.output<typeof RunParams>; Body: z.output<typeof SendBody> }>(
    "/v1/runs/:run_id/events",
    {
      config: { access: ADMINS, scoped: true },
      schema: {
        operationId: "sendEvent",
        tags: ["events"],
        summary:
          "Send an event to a run: its oldest waiting wait_event takes it, else its inbox keeps it (409 when the run ended, 429 when its inbox holds 1,000 events or 16 MiB)",
        params: RunParams,
        body: SendBody,
        response: { ...errorResponses(404, 409, 429, 503), 200: SendAnswer },
      },
    },
    async (request) => {
      const { run_id } = request.params;
      rates.events.take(request.principal?.name);
      await checkRunScope(engine, request.principal, run_id);
      const { name, payload, idempotency_key } = request.body;
      return engine.sendEvent(run_id, name, (payload ?? null) as Json, {
        ...(idempotency_key === undefined ? {} : { idempotency_key }),
      });
    },
  );

  app.post<{ Body: z.output<typeof PublishBody> }>(
    "/v1/events",
    {
      // A scoped token's event reaches only runs of its workflows (DESIGN §13.1).
      config: { access: ADMINS, scoped: true },
      schema: {
        operationId: "publishEvent",
        tags: ["events"],
        summary:
          "Publish an event by key: every run waiting on that name and key receives it, and each workflow whose triggers declare it starts a run (once per idempotency key)",
        body: PublishBody,
        response: { ...errorResponses(429, 503), 200: PublishAnswer },
      },
    },
    async (request) => {
      const { name, key, payload, idempotency_key } = request.body;
      rates.events.take(request.principal?.name);
      return engine.publishEvent(name, key, (payload ?? null) as Json, {
        ...(idempotency_key === undefined ? {} : { idempotency_key }),
        ...(request.principal?.workflows ? { scope: request.principal.workflows.patterns } : {}),
      });
    },
  );
}
