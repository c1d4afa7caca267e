/**
 * Reviews: what waits for people, and a decision on one. With tokens, the decision is made as
 * the token's name (a reviewer decides only as itself; the node's `assignees` decide who may).
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { ForbiddenError } from "../../errors.js";
import { READERS, REVIEWERS } from "../auth.js";
import { PendingReviewSchema, VisitSchema } from "../schemas.js";
import type { RouteContext } from "../server.js";

const ListQuery = z.object({ status: z.literal("pending").default("pending") }).strict();

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
      .describe("who decides, only when the API has no tokens; with a token it is the token's name"),
  })
  .strict();

export function registerReviewRoutes(app: FastifyInstance, { engine }: RouteContext): void {
  app.get<{ Querystring: z.output<typeof ListQuery> }>(
    "/v1/reviews",
    {
      config: { access: READERS },
      schema: {
        summary: "Nodes waiting for a person's decision, oldest first",
        querystring: ListQuery,
        response: { 200: z.object({ reviews: z.array(PendingReviewSchema) }) },
      },
    },
    async (request) => ({ reviews: await engine.listReviews({ status: request.query.status }) }),
  );

  app.post<{ Params: z.output<typeof NodeParams>; Body: z.output<typeof DecisionBody> }>(
    "/v1/runs/:run_id/nodes/:node_id/review",
    {
      config: { access: REVIEWERS },
      schema: {
        summary: "Approve or reject a node waiting for review (409 when already decided, 403 when not an assignee)",
        params: NodeParams,
        body: DecisionBody,
        response: { 200: VisitSchema },
      },
    },
    async (request) => {
      const { decision, comment, output, execution_id, by } = request.body;
      const principal = request.principal;
      if (principal && by !== undefined && by !== principal.name) {
        throw new ForbiddenError(`this token decides as "${principal.name}", not as "${by}": leave out by`);
      }
      const who = principal?.name ?? by;
      return engine.review(request.params.run_id, request.params.node_id, {
        decision,
        ...(who === undefined ? {} : { by: who }),
        ...(comment === undefined ? {} : { comment }),
        ...(output === undefined ? {} : { output }),
        ...(execution_id === undefined ? {} : { execution_id }),
      });
    },
  );
}
