/**
 * Reviews: what waits for people, and a decision on one. With tokens, a reviewer decides as the
 * token's name only; an admin decides as itself, or *as* one of the node's assignees with `by`
 * (recorded with the admin's name, DESIGN §13). The node's `assignees` decide who may.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { ForbiddenError } from "../../errors.js";
import { READERS, REVIEWERS } from "../auth.js";
import type { RouteContext } from "../context.js";
import { errorResponses, PendingReviewSchema, VisitSchema } from "../schemas.js";
import { checkRunScope, inScope } from "../scope.js";

/** The most run ids one `run_ids` may name: a page of the runs list is 50. */
const MAX_RUN_IDS = 100;

const ListQuery = z
  .object({
    status: z.literal("pending").default("pending"),
    run_ids: z
      .string()
      .min(1)
      .max(MAX_RUN_IDS * 201)
      .transform((text) => text.split(","))
      .pipe(z.array(z.string().min(1).max(200)).max(MAX_RUN_IDS))
      .optional()
      .describe(`only the reviews of these runs: their ids, comma-separated, at most ${MAX_RUN_IDS}`),
  })
  .strict();

const NodeParams = z.object({ run_id: z.string().min(1).max(200), node_id: z.string().min(1).max(200) }).strict();

const DecisionBody = z
  .object({
    decision: z.enum(["approve", "reject"]),
    comment: z.string().max(10_000).optional(),
    output: z.unknown().optional().describe("approve only: edited output to pass on"),
    execution_id: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe("the review round decided on (409 when the node has moved to another round)"),
    by: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe(
        "who decides: with no tokens, anyone named; an admin token, one of the node's assignees (it decides as them); a reviewer token, only its own name",
      ),
  })
  .strict();

export function registerReviewRoutes(app: FastifyInstance, { engine }: RouteContext): void {
  app.get<{ Querystring: z.output<typeof ListQuery> }>(
    "/v1/reviews",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "listReviews",
        tags: ["reviews"],
        summary: "Nodes waiting for a person's decision, oldest first",
        querystring: ListQuery,
        response: { ...errorResponses(503), 200: z.object({ reviews: z.array(PendingReviewSchema) }) },
      },
    },
    async (request) => ({
      reviews: (await engine.listReviews({ status: request.query.status, runIds: request.query.run_ids })).filter((r) =>
        inScope(request.principal, r.workflow_id),
      ),
    }),
  );

  app.post<{ Params: z.output<typeof NodeParams>; Body: z.output<typeof DecisionBody> }>(
    "/v1/runs/:run_id/nodes/:node_id/review",
    {
      config: { access: REVIEWERS, scoped: true },
      schema: {
        operationId: "decideReview",
        tags: ["reviews"],
        summary: "Approve or reject a node waiting for review (409 when already decided, 403 when not an assignee)",
        params: NodeParams,
        body: DecisionBody,
        response: { ...errorResponses(404, 409, 503), 200: VisitSchema },
      },
    },
    async (request) => {
      const { decision, comment, output, execution_id, by } = request.body;
      const principal = request.principal;
      if (principal?.role === "reviewer" && by !== undefined && by !== principal.name) {
        throw new ForbiddenError(`this token decides as "${principal.name}", not as "${by}": leave out by`);
      }
      await checkRunScope(engine, principal, request.params.run_id);
      const who = principal?.role === "admin" ? (by ?? principal.name) : (principal?.name ?? by);
      return engine.review(request.params.run_id, request.params.node_id, {
        decision,
        ...(who === undefined ? {} : { by: who }),
        ...(principal?.role === "admin" ? { admin: principal.name } : {}),
        ...(comment === undefined ? {} : { comment }),
        ...(output === undefined ? {} : { output }),
        ...(execution_id === undefined ? {} : { execution_id }),
      });
    },
  );
}
