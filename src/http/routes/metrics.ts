/**
 * `GET /metrics` (DESIGN §9): the engine's metrics in Prometheus text format, when the server was
 * given a reader (`skein serve` always is). Outside /v1 where scrapers look for it, so the
 * OpenAPI document (which lists /v1/ routes) leaves it out on purpose: it is not JSON.
 * Admin and metrics tokens may scrape; an open API (no tokens) answers on loopback only.
 */
import type { FastifyInstance } from "fastify";
import { SCRAPERS } from "../auth.js";
import type { RouteContext } from "../context.js";
import { PROMETHEUS_CONTENT_TYPE, prometheusText } from "../metrics.js";

export function registerMetricsRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const reader = ctx.metrics;
  if (!reader) return;
  app.get(
    "/metrics",
    { config: { access: SCRAPERS }, schema: { summary: "The engine's metrics (Prometheus text format)" } },
    async (_request, reply) => {
      const text = await prometheusText(reader);
      return reply.type(PROMETHEUS_CONTENT_TYPE).send(text);
    },
  );
}
