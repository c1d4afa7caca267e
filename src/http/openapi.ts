/**
 * The OpenAPI 3.1 document of the API, generated from the routes as registered: their zod
 * schemas (converted with `z.toJSONSchema`, JSON Schema 2020-12 as OpenAPI 3.1 uses), their
 * operationIds, tags, summaries, access rules and the error statuses they declare. Nothing is
 * written by hand, so it cannot drift. A zod schema with an `id` (`.meta({ id })`, schemas.ts)
 * becomes one component, referenced with `$ref` wherever it is used: clients generated from the
 * document get named models (Run, Visit, Task, ...) and method names from the operationIds.
 */
import { STATUS_CODES } from "node:http";
import type { RouteOptions } from "fastify";
import { z } from "zod";
import { workflowJsonSchema } from "../definition/json-schema.js";
import { ErrorSchema } from "./schemas.js";

type JsonSchema = Record<string, unknown>;

/** The document's groups of operations; every API route names one or more (`schema.tags`). */
const TAGS = [
  { name: "health", description: "Liveness, readiness and this document: public, no token" },
  { name: "tokens", description: "The caller's token" },
  {
    name: "workflows",
    description:
      'Workflow definitions by id and version; moving running runs of older versions to a newer one (migrate, see concepts.md "Upgrading runs in flight"); PUT answers `upgradable`: how many could move',
  },
  { name: "runs", description: "Runs: start, read, list, cancel, retry, pause, resume, fork, bulk actions" },
  { name: "schedules", description: "Workflows started on a cron expression, each slot once" },
  { name: "reviews", description: "Nodes waiting for a person's decision" },
  { name: "events", description: "Events sent to runs, and the event log (history and live stream)" },
  { name: "tasks", description: "The external-agent protocol: claim, heartbeat, complete, fail" },
] as const;

const OPERATION_ID = /^[a-z][A-Za-z0-9]*$/;

const RETRY_AFTER = {
  "Retry-After": { description: "seconds to wait before trying again", schema: { type: "integer", minimum: 0 } },
};

/** What each error status means, the same on every route that answers it. */
const ERROR_STATUSES: Record<number, string> = {
  400: "invalid request: details.problems lists every problem with its path",
  401: "missing or unknown bearer token",
  403: "the token's role or workflow scope does not allow this (startRun: also a scoped token's budget that would raise the workflow's, naming the field); on an API without tokens: a Host or Origin that is not loopback",
  404: "no such run, workflow, node or task",
  409: "the current state refuses it (the summary says when)",
  413: "the request body is over the server's limit (details.limit_bytes)",
  415: "the request body is not application/json",
  429: "too many requests or streams for this token: retry after Retry-After seconds",
  503: "unavailable: storage is failing, the engine is stopping or a server-wide limit is reached; retry after Retry-After seconds",
};

function isApiRoute(route: RouteOptions): boolean {
  // The admin page's files are not part of the API.
  return route.url.startsWith("/v1/");
}

/**
 * Throws when an API route lacks what the document needs: a unique camelCase operationId and
 * known tags. createServer calls it, so a route added without them fails at once, not in a client.
 */
export function assertDocumented(routes: readonly RouteOptions[]): void {
  const problems: string[] = [];
  const seen = new Set<string>();
  const tags = new Set<string>(TAGS.map((t) => t.name));
  for (const route of routes.filter(isApiRoute)) {
    const name = `${[route.method].flat().join(",")} ${route.url}`;
    const { operationId, tags: routeTags } = route.schema ?? {};
    if (operationId === undefined || !OPERATION_ID.test(operationId)) {
      problems.push(`${name}: needs a camelCase schema.operationId`);
    } else if (seen.has(operationId)) {
      problems.push(`${name}: operationId ${operationId} is already used`);
    } else {
      seen.add(operationId);
    }
    if (!routeTags?.length || routeTags.some((t) => !tags.has(t))) {
      problems.push(`${name}: schema.tags must list some of ${[...tags].join(", ")}`);
    }
  }
  if (problems.length > 0) throw new Error(`routes the OpenAPI document cannot describe:\n${problems.join("\n")}`);
}

export function openApiDocument(routes: readonly RouteOptions[], publicUrl: string | undefined): JsonSchema {
  const { $schema: _, $id: __, ...workflow } = workflowJsonSchema();
  const components = new Components({ WorkflowDefinition: workflow });
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes.filter(isApiRoute)) {
    const path = route.url.replace(/:([A-Za-z0-9_]+)/g, "{$1}");
    for (const method of [route.method].flat()) {
      paths[path] = { ...paths[path], [method.toLowerCase()]: operation(route, components) };
    }
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Skein HTTP API",
      version: "1",
      description:
        "Durable workflows for AI-agent task chains. Errors are { error: { code, message, details } }; validation errors list every problem with its path in details.problems.",
      license: { name: "MIT", identifier: "MIT" },
    },
    // Without a public URL the document is relative to where it was fetched from.
    servers: [{ url: publicUrl ? publicUrl.replace(/\/+$/, "") : "/" }],
    tags: TAGS,
    paths,
    components: {
      schemas: components.schemas,
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description:
            "A token from the server's tokens file; its role (admin, reviewer, agent) decides which operations it may call. An API started without tokens takes none.",
        },
      },
    },
  };
}

/** The named schemas, collected as the operations' schemas are converted. */
class Components {
  constructor(readonly schemas: Record<string, JsonSchema>) {}

  /** `schema` as JSON Schema, its named parts moved to the components and referenced there. */
  convert(schema: z.ZodType, io: "input" | "output"): JsonSchema {
    const {
      $schema: _,
      $defs,
      ...rest
    } = z.toJSONSchema(schema, { io, target: "draft-2020-12", unrepresentable: "any" }) as JsonSchema & {
      $defs?: Record<string, JsonSchema>;
    };
    for (const [id, def] of Object.entries($defs ?? {})) {
      const named = toComponentRefs(def);
      const known = this.schemas[id];
      // An input and an output view of one schema can differ (defaults): one name must mean one shape.
      if (known !== undefined && JSON.stringify(known) !== JSON.stringify(named)) {
        throw new Error(`the schema with id "${id}" converts differently where it is used (as ${io}); give it two ids`);
      }
      this.schemas[id] = named;
    }
    return toComponentRefs(rest);
  }
}

function toComponentRefs(schema: JsonSchema): JsonSchema {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/$defs/', '"#/components/schemas/')) as JsonSchema;
}

function isZod(value: unknown): value is z.ZodType {
  return value instanceof z.ZodType;
}

function operation(route: RouteOptions, components: Components): JsonSchema {
  const schema = route.schema ?? {};
  const access = route.config?.access;
  const guarded = access !== undefined && access !== "public";
  const hasBody = isZod(schema.body);
  const parameters = [
    ...parametersOf(schema.params, "path", components),
    ...parametersOf(schema.querystring, "query", components),
  ];
  const responses: Record<string, unknown> = {};
  for (const [status, response] of Object.entries((schema.response ?? {}) as Record<string, unknown>)) {
    responses[status] =
      response === ErrorSchema ? errorResponse(Number(status), components) : responseOf(status, response, components);
  }
  if (!Object.keys(responses).some((s) => s.startsWith("2"))) responses["200"] = { description: "OK" };
  // What any route may answer: a bad request (its parameters, body, URL or Host) and a Host or
  // Origin refused; what guarded routes and routes with a body may.
  const common = [400, 403, ...(guarded ? [401] : []), ...(hasBody ? [413, 415] : [])];
  for (const status of common) responses[status] = errorResponse(status, components);
  responses.default = {
    ...errorResponse(500, components),
    description:
      "any other error: 500 internal (the server log has it); 408, 414 or 431 for a request refused before any route saw it",
  };
  return {
    operationId: schema.operationId,
    tags: schema.tags,
    ...(typeof schema.summary === "string" ? { summary: schema.summary } : {}),
    ...(guarded ? { description: `Roles: ${access.join(", ")}.`, security: [{ bearer: [] }] } : { security: [] }),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(hasBody
      ? {
          requestBody: {
            required: true,
            content: { "application/json": { schema: components.convert(schema.body as z.ZodType, "input") } },
          },
        }
      : {}),
    responses: sortedByStatus(responses),
  };
}

function errorResponse(status: number, components: Components): JsonSchema {
  return {
    description: ERROR_STATUSES[status] ?? STATUS_CODES[status] ?? "error",
    ...(status === 429 || status === 503 ? { headers: RETRY_AFTER } : {}),
    content: { "application/json": { schema: components.convert(ErrorSchema, "output") } },
  };
}

function sortedByStatus(responses: Record<string, unknown>): Record<string, unknown> {
  const rank = (status: string) => (status === "default" ? 1000 : Number(status));
  return Object.fromEntries(Object.entries(responses).sort(([a], [b]) => rank(a) - rank(b)));
}

function parametersOf(schema: unknown, where: "path" | "query", components: Components): JsonSchema[] {
  if (!isZod(schema)) return [];
  const object = components.convert(schema, "input") as {
    properties?: Record<string, JsonSchema>;
    required?: string[];
  };
  return Object.entries(object.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property;
    return {
      name,
      in: where,
      required: where === "path" || (object.required ?? []).includes(name),
      ...(typeof description === "string" ? { description } : {}),
      schema: rest,
    };
  });
}

function responseOf(status: string, response: unknown, components: Components): JsonSchema {
  const description = STATUS_CODES[Number(status)] ?? "OK";
  if (isZod(response)) {
    return { description, content: { "application/json": { schema: components.convert(response, "output") } } };
  }
  const content = (response as { content?: Record<string, { schema: z.ZodType }> }).content ?? {};
  return {
    description,
    content: Object.fromEntries(
      Object.entries(content).map(([type, c]) => [type, { schema: components.convert(c.schema, "output") }]),
    ),
  };
}
