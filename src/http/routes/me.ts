/** Who the caller is: the admin page offers what the token may do (an admin decides as an assignee). */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { RouteContext } from "../context.js";
import { ROLES } from "../principal.js";

const Me = z.object({
  role: z.enum(ROLES).nullable().describe("null: the API has no tokens (open, on loopback)"),
  name: z.string().nullable(),
  agent_types: z.array(z.string()).nullable(),
  workflows: z.array(z.string()).nullable().describe("the workflow patterns the token is scoped to; null: all"),
});

export function registerMeRoutes(app: FastifyInstance, _ctx: RouteContext): void {
  app.get(
    "/v1/me",
    {
      config: { access: ROLES, scoped: true },
      schema: {
        operationId: "getMe",
        tags: ["tokens"],
        summary: "The caller's token: role, name and scope",
        response: { 200: Me },
      },
    },
    async (request): Promise<z.output<typeof Me>> => {
      const p = request.principal;
      return {
        role: p?.role ?? null,
        name: p?.name ?? null,
        agent_types: p?.agent_types ?? null,
        workflows: p?.workflows ? [...p.workflows.patterns] : null,
      };
    },
  );
}
