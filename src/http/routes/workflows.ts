/**
 * Workflows: list, read a version, check a definition without storing it, register (PUT the
 * definition), and move running runs of older versions to a newer one (migrate).
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { WorkflowInput } from "../../definition/workflow-input.js";
import { ForbiddenError, NotFoundError, ValidationError } from "../../errors.js";
import { ADMINS, READERS } from "../auth.js";
import type { RouteContext } from "../context.js";
import { errorResponses, MigrateAnswerSchema, MigrateBodySchema, ProblemSchema, UpgradableSchema } from "../schemas.js";
import { inScope, type WorkflowScope } from "../scope.js";

const Id = z.object({ id: z.string().min(1).max(200) }).strict();
const VersionQuery = z.object({ version: z.coerce.number().int().min(1).optional() }).strict();
/** Any JSON document: registerWorkflow validates it and lists every problem with its path. */
const Definition = z.unknown().meta({ $ref: "#/components/schemas/WorkflowDefinition" });

const Summary = z.object({ id: z.string(), version: z.number().int(), created_at: z.number().int() });
const Workflow = z.object({
  id: z.string(),
  version: z.number().int(),
  definition: z.unknown().meta({ $ref: "#/components/schemas/WorkflowDefinition" }),
});
const Registered = z.object({
  id: z.string(),
  version: z.number().int(),
  created: z.boolean().describe("false: the same content was already registered as this version"),
  warnings: z.array(ProblemSchema),
  upgradable: UpgradableSchema,
});

const Checked = z.object({
  ok: z.boolean().describe("true: PUT would accept this definition"),
  errors: z.array(ProblemSchema).describe("every problem that refuses it, with its path"),
  warnings: z.array(ProblemSchema),
});

export function registerWorkflowRoutes(app: FastifyInstance, { engine }: RouteContext): void {
  app.get(
    "/v1/workflows",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "listWorkflows",
        tags: ["workflows"],
        summary: "Registered workflows with their latest versions",
        response: { ...errorResponses(503), 200: z.object({ workflows: z.array(Summary) }) },
      },
    },
    async (request) => ({
      workflows: (await engine.listWorkflows()).filter((w) => inScope(request.principal, w.id)),
    }),
  );

  // A dry run for editors (the admin page checks as the user types): 200 whatever the verdict,
  // since an invalid definition is the answer asked for, not a bad request.
  app.post<{ Body: unknown }>(
    "/v1/workflows/validate",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "validateWorkflow",
        tags: ["workflows"],
        summary: "Check a definition as PUT would, storing nothing: every problem with its path, and the warnings",
        body: Definition,
        response: { ...errorResponses(503), 200: Checked },
      },
    },
    async (request) => engine.checkWorkflow(request.body),
  );

  app.get<{ Params: z.output<typeof Id>; Querystring: z.output<typeof VersionQuery> }>(
    "/v1/workflows/:id",
    {
      config: { access: READERS, scoped: true },
      schema: {
        operationId: "getWorkflow",
        tags: ["workflows"],
        summary: "A workflow's definition: the latest version, or ?version=N",
        params: Id,
        querystring: VersionQuery,
        response: { ...errorResponses(404, 503), 200: Workflow },
      },
    },
    async (request) => {
      const { id } = request.params;
      if (!inScope(request.principal, id)) {
        throw new NotFoundError(
          `workflow "${id}" is not registered; register it first with registerWorkflow (or skein workflows put)`,
        );
      }
      return engine.getWorkflow(id, request.query.version);
    },
  );

  app.put<{ Params: z.output<typeof Id>; Body: unknown }>(
    "/v1/workflows/:id",
    {
      config: { access: ADMINS, scoped: true },
      schema: {
        operationId: "registerWorkflow",
        tags: ["workflows"],
        summary: "Register a definition: 201 with a new version, 200 when the content is unchanged",
        params: Id,
        body: Definition,
        response: { ...errorResponses(503), 200: Registered, 201: Registered },
      },
    },
    async (request, reply) => {
      if (!inScope(request.principal, request.params.id)) {
        throw new ForbiddenError(
          `this token may not register workflow "${request.params.id}": it is scoped to ${request.principal?.workflows?.patterns.join(", ")}`,
        );
      }
      const documentId = (request.body as { id?: unknown } | null)?.id;
      if (documentId !== undefined && documentId !== request.params.id) {
        throw new ValidationError("The workflow's id differs from the id in the URL", [
          {
            path: "id",
            message: `must be ${JSON.stringify(request.params.id)} (the id in the URL), got ${JSON.stringify(documentId)}`,
          },
        ]);
      }
      if (request.principal?.workflows) assertStartsInScope(request.principal.workflows, request.body);
      const registered = await engine.registerWorkflow(request.body as WorkflowInput); // checked there, as any JSON
      return reply.code(registered.created ? 201 : 200).send(registered);
    },
  );

  app.post<{ Params: z.output<typeof Id>; Body: z.output<typeof MigrateBodySchema> }>(
    "/v1/workflows/:id/migrate",
    {
      config: { access: ADMINS, scoped: true },
      schema: {
        operationId: "migrateRuns",
        tags: ["workflows"],
        summary:
          "Move running runs of older versions to a newer version: those the rule allows move, the others are answered with every reason (dry_run: move nothing)",
        params: Id,
        body: MigrateBodySchema,
        response: { ...errorResponses(404, 503), 200: MigrateAnswerSchema },
      },
    },
    async (request) => {
      const { id } = request.params;
      if (!inScope(request.principal, id)) {
        throw new NotFoundError(
          `workflow "${id}" is not registered; register it first with registerWorkflow (or skein workflows put)`,
        );
      }
      const { to_version, from_version, run_ids, dry_run } = request.body;
      return engine.migrateRuns({
        workflow_id: id,
        to_version,
        ...(from_version === undefined ? {} : { from_version }),
        ...(run_ids === undefined ? {} : { run_ids }),
        ...(dry_run === undefined ? {} : { dry_run }),
      });
    },
  );
}

/**
 * A scoped token may register only workflows whose `workflow` nodes and `map` items start
 * workflows of its scope (DESIGN §13.1): static ids are checked here; templated ones at run time,
 * where a child out of scope fails its visit `out_of_scope`.
 * @throws ForbiddenError naming the node's path and the id
 */
function assertStartsInScope(scope: WorkflowScope, body: unknown): void {
  const nodes = (body as { nodes?: unknown } | null)?.nodes;
  if (!Array.isArray(nodes)) return; // registerWorkflow says what is wrong
  for (const [i, node] of nodes.entries()) {
    const n = node as { agent_type?: unknown; payload?: { workflow_id?: unknown; each?: { workflow_id?: unknown } } };
    const target =
      n?.agent_type === "workflow"
        ? { path: `nodes[${i}].payload.workflow_id`, id: n.payload?.workflow_id }
        : n?.agent_type === "map"
          ? { path: `nodes[${i}].payload.each.workflow_id`, id: n.payload?.each?.workflow_id }
          : null;
    if (!target || typeof target.id !== "string" || target.id.includes("{{") || scope.allows(target.id)) continue;
    throw new ForbiddenError(
      `${target.path} names workflow "${target.id}", outside this token's scope (${scope.patterns.join(", ")}): a run may start only workflows of the scope that started it; name a workflow in scope, or register with a token whose scope covers "${target.id}"`,
    );
  }
}
