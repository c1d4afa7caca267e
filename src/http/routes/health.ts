/** Liveness, readiness (the database answers) and the OpenAPI document: public, no token. */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { PUBLIC } from "../auth.js";
import type { RouteContext } from "../context.js";
import { errorBody } from "../errors.js";
import { openApiDocument } from "../openapi.js";
import { ErrorSchema } from "../schemas.js";

const Status = z.object({ status: z.literal("ok") });

export function registerHealthRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.get(
    "/v1/health",
    {
      config: { access: PUBLIC },
      schema: { operationId: "getHealth", tags: ["health"], summary: "The process answers", response: { 200: Status } },
    },
    async () => ({ status: "ok" as const }),
  );

  app.get(
    "/v1/ready",
    {
      config: { access: PUBLIC },
      schema: {
        operationId: "getReady",
        tags: ["health"],
        summary: "The database answers, takes writes, and the server is not stopping",
        response: { 200: Status, 503: ErrorSchema },
      },
    },
    async (request, reply) => {
      const unavailable = ctx.engine.unavailable;
      if (unavailable) {
        // The engine's last transaction failed for storage (a full disk): not ready until one commits.
        request.log.warn({ err: unavailable }, "not ready");
        return reply
          .code(503)
          .header("retry-after", String(unavailable.retryAfterSeconds))
          .send(errorBody("unavailable", "not ready: the server cannot record anything now (its storage is failing)"));
      }
      try {
        if (!ctx.accepting()) throw new Error("the server is stopping");
        await ctx.engine.listRuns({ limit: 1 });
        return { status: "ok" as const };
      } catch (err) {
        request.log.warn({ err }, "not ready");
        return reply
          .code(503)
          .send(errorBody("unavailable", "not ready: the database does not answer or the server is stopping"));
      }
    },
  );

  let document: unknown = null;
  app.get(
    "/v1/openapi.json",
    {
      config: { access: PUBLIC },
      schema: {
        operationId: "getOpenApiDocument",
        tags: ["health"],
        summary: "This document (OpenAPI 3.1)",
        response: { 200: z.record(z.string(), z.unknown()).describe("an OpenAPI 3.1 document") },
      },
    },
    async () => {
      document ??= openApiDocument(ctx.routes, ctx.publicUrl);
      return document;
    },
  );
}
