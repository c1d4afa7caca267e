/**
 * The OpenAPI 3.1 document of the API, generated from the routes as registered: their zod
 * schemas (converted with `z.toJSONSchema`, JSON Schema 2020-12 as OpenAPI 3.1 uses), their
 * summaries and their access rules. Nothing is written by hand, so it cannot drift.
 */
import type { RouteOptions } from "fastify";
import { z } from "zod";
import { workflowJsonSchema } from "../definition/json-schema.js";
import { ErrorSchema } from "./schemas.js";

type JsonSchema = Record<string, unknown>;

const ERROR_REF = { $ref: "#/components/schemas/Error" };
const errorResponse = (description: string) => ({
  description,
  content: { "application/json": { schema: ERROR_REF } },
});

function jsonSchema(schema: unknown, io: "input" | "output"): JsonSchema {
  const { $schema: _, ...rest } = z.toJSONSchema(schema as z.ZodType, {
    io,
    target: "draft-2020-12",
    unrepresentable: "any",
  }) as JsonSchema;
  return rest;
}

function isZod(value: unknown): value is z.ZodType {
  return value instanceof z.ZodType;
}

export function openApiDocument(routes: readonly RouteOptions[], publicUrl: string | undefined): JsonSchema {
  const paths: Record<string, Record<string, unknown>> = {};
  // The API's routes only: the admin page's files are not part of it.
  for (const route of routes.filter((r) => r.url.startsWith("/v1/"))) {
    const path = route.url.replace(/:([A-Za-z0-9_]+)/g, "{$1}");
    for (const method of [route.method].flat()) {
      paths[path] = { ...paths[path], [method.toLowerCase()]: operation(route) };
    }
  }
  const { $schema: _, $id: __, ...workflow } = workflowJsonSchema();
  return {
    openapi: "3.1.0",
    info: {
      title: "Skein HTTP API",
      version: "1",
      description:
        "Durable workflows for AI-agent task chains. Errors are { error: { code, message, details } }; validation errors list every problem with its path in details.problems.",
    },
    ...(publicUrl ? { servers: [{ url: publicUrl.replace(/\/+$/, "") }] } : {}),
    paths,
    components: {
      schemas: { Error: jsonSchema(ErrorSchema, "output"), WorkflowDefinition: workflow },
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
    },
  };
}

function operation(route: RouteOptions): JsonSchema {
  const schema = (route.schema ?? {}) as Record<string, unknown>;
  const access = route.config?.access;
  const guarded = access !== undefined && access !== "public";
  const parameters = [...parametersOf(schema.params, "path"), ...parametersOf(schema.querystring, "query")];
  const responses: Record<string, unknown> = {};
  for (const [status, response] of Object.entries((schema.response ?? {}) as Record<string, unknown>)) {
    responses[status] = response === ErrorSchema ? errorResponse("error") : responseOf(response);
  }
  if (Object.keys(responses).length === 0) responses["200"] = { description: "OK" };
  if (parameters.length > 0 || schema.body !== undefined)
    responses["400"] = errorResponse("invalid request: details.problems lists every problem with its path");
  if (guarded) {
    responses["401"] = errorResponse("missing or unknown bearer token");
    responses["403"] = errorResponse("the token's role may not call this");
  }
  if (route.url.includes(":")) responses["404"] = errorResponse("no such resource");
  responses.default = errorResponse("error: 409 conflict, 413 body too large, 503 unavailable, 500 internal");
  return {
    ...(typeof schema.summary === "string" ? { summary: schema.summary } : {}),
    ...(guarded ? { description: `Roles: ${access.join(", ")}.`, security: [{ bearer: [] }] } : { security: [] }),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(isZod(schema.body)
      ? {
          requestBody: {
            required: true,
            content: { "application/json": { schema: jsonSchema(schema.body, "input") } },
          },
        }
      : {}),
    responses,
  };
}

function parametersOf(schema: unknown, where: "path" | "query"): JsonSchema[] {
  if (!isZod(schema)) return [];
  const object = jsonSchema(schema, "input") as { properties?: Record<string, JsonSchema>; required?: string[] };
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

function responseOf(response: unknown): JsonSchema {
  if (isZod(response)) {
    return { description: "OK", content: { "application/json": { schema: jsonSchema(response, "output") } } };
  }
  const content = (response as { content?: Record<string, { schema: unknown }> }).content ?? {};
  return {
    description: "OK",
    content: Object.fromEntries(
      Object.entries(content).map(([type, c]) => [type, { schema: jsonSchema(c.schema, "output") }]),
    ),
  };
}
