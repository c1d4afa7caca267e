/** POST /v1/runs/bulk: one action on every run a filter matches (DESIGN §16), over engine.bulkRuns. */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { BULK_DEFAULT_CAP, BULK_MAX_CAP } from "../../engine/bulk.js";
import { MIN_SEARCH_CHARS } from "../../store/store.js";
import { ADMINS } from "../auth.js";
import type { RouteContext } from "../context.js";
import { errorResponses, RUN_STATUSES } from "../schemas.js";
import { visibleWorkflowIds } from "../scope.js";
import { ForkBody } from "./runs.js";

const EpochMs = z.number().int().min(0).max(8.64e15);

const BulkFilterSchema = z
  .object({
    workflow_id: z.string().min(1).max(200).optional(),
    workflow_version: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe("only runs of this version of workflow_id (which it needs)"),
    status: z
      .enum(RUN_STATUSES)
      .optional()
      .describe("only runs in this status; one the action does not apply to matches none"),
    created_after: EpochMs.optional().describe("only runs created at or after this time (ms since the epoch)"),
    created_before: EpochMs.optional().describe("only runs created before this time (ms since the epoch)"),
    tags: z.record(z.string(), z.string()).optional().describe("only runs carrying every one of these tags"),
    q: z
      .string()
      .min(MIN_SEARCH_CHARS, `q must be at least ${MIN_SEARCH_CHARS} characters (the search index is of trigrams)`)
      .max(200)
      .optional()
      .describe("only runs whose input or output contains this text, case-insensitively"),
    id_contains: z.string().min(1).max(200).optional().describe("only runs whose run_id contains this, in any case"),
    paused: z.boolean().optional().describe("only paused runs (true), or only runs not paused (false)"),
    before: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe("only runs created before this run: a previous answer's next_before"),
  })
  .strict();

const CancelAction = z
  .object({
    kind: z.literal("cancel").describe("RUNNING runs"),
    reason: z.string().max(1000).optional(),
    compensate: z.boolean().optional().describe("undo what each run did first (COMPENSATING, then CANCELLED)"),
  })
  .strict();

const RetryAction = z
  .object({
    kind: z.literal("retry").describe("FAILED and CANCELLED runs"),
    from: z.string().min(1).max(200).optional().describe("an earlier node to run again, with everything downstream"),
    force: z.boolean().optional().describe("redrive runs that need attention"),
    fresh_steps: z.boolean().optional().describe("new visits start without the failed visits' durable steps"),
  })
  .strict();

const PauseAction = z
  .object({
    kind: z.literal("pause").describe("RUNNING runs not paused"),
    reason: z.string().max(1000).optional(),
  })
  .strict();

const ResumeAction = z.object({ kind: z.literal("resume").describe("paused runs") }).strict();

const ForkAction = ForkBody.extend({
  kind: z.literal("fork").describe("top-level runs, finished or running"),
}).strict();

const MigrateAction = z
  .object({
    kind: z.literal("migrate").describe("RUNNING top-level runs of filter.workflow_id older than to_version"),
    to_version: z
      .number()
      .int()
      .min(1)
      .describe("the version to move them to; a run the rule refuses is refused with its reasons"),
  })
  .strict();

const BulkBody = z
  .object({
    filter: BulkFilterSchema,
    action: z.discriminatedUnion("kind", [
      CancelAction,
      RetryAction,
      PauseAction,
      ResumeAction,
      ForkAction,
      MigrateAction,
    ]),
    dry_run: z.boolean().optional().describe("count the runs the action applies to and change nothing"),
    cap: z
      .number()
      .int()
      .min(1)
      .max(BULK_MAX_CAP)
      .default(BULK_DEFAULT_CAP)
      .describe("at most this many runs a call; the answer's more says to call again"),
  })
  .strict();

const BulkAnswerSchema = z.object({
  matched: z.number().int().describe("runs matched that the action applies to, at most cap"),
  applied: z.number().int().describe("of those, the runs it was applied to (0 on a dry run)"),
  refused: z
    .array(z.object({ run_id: z.string(), reason: z.string() }))
    .describe("runs that changed since they were read, or otherwise refused it, each with why"),
  more: z.boolean().describe("more runs matched than cap: call again"),
  dry_run: z.boolean(),
  run_ids: z.array(z.string()).describe("the first (at most 10) runs matched, newest first"),
  next_before: z
    .string()
    .nullable()
    .describe("when more: the last run matched, as filter.before to go on past refused runs; else null"),
});

export function registerBulkRoutes(app: FastifyInstance, { engine, rates }: RouteContext): void {
  app.post<{ Body: z.output<typeof BulkBody> }>(
    "/v1/runs/bulk",
    {
      config: { access: ADMINS, scoped: true },
      schema: {
        operationId: "bulkRuns",
        tags: ["runs"],
        summary:
          "Cancel, retry, pause, resume, fork or migrate every run a filter matches (cancel: RUNNING, retry: FAILED and CANCELLED, fork: any, migrate: RUNNING of an older version, all top-level runs; pause: RUNNING and resume: paused, child runs too), at most cap a call, each run wholly or not at all; dry_run counts them",
        body: BulkBody,
        response: { ...errorResponses(429, 503), 200: BulkAnswerSchema },
      },
    },
    async (request) => {
      const { filter, action, dry_run, cap } = request.body;
      // A bulk retry or fork starts runs: one call counts as one start against the token's rate.
      if ((action.kind === "retry" || action.kind === "fork") && dry_run !== true)
        rates.starts.take(request.principal?.name);
      // A scoped token acts on the runs of its workflows only, as it lists them.
      const scope = await visibleWorkflowIds(engine, request.principal);
      // Pausing and resuming record who: the token's name.
      const who = request.principal?.name;
      return engine.bulkRuns({
        filter: { ...filter, ...(scope === null ? {} : { workflow_ids: scope }) },
        action:
          (action.kind === "pause" || action.kind === "resume") && who !== undefined ? { ...action, by: who } : action,
        cap,
        ...(dry_run === undefined ? {} : { dry_run }),
      });
    },
  );
}
