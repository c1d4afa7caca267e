import { Ajv2020 } from "ajv/dist/2020.js";
import type { RouteOptions } from "fastify";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { PUBLIC } from "../../src/http/auth.js";
import { assertDocumented, openApiDocument } from "../../src/http/openapi.js";
import { testApi } from "./helpers.js";

type Operation = {
  operationId: string;
  tags: string[];
  summary?: string;
  security: unknown[];
  parameters?: { name: string; in: string; required: boolean; schema: object }[];
  requestBody?: { content: Record<string, { schema: object }> };
  responses: Record<string, { content?: Record<string, { schema: object }> }>;
};
type Document = {
  openapi: string;
  servers?: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
  tags: { name: string }[];
  components: { schemas: Record<string, object>; securitySchemes: Record<string, object> };
};

async function document(publicUrl?: string): Promise<Document> {
  const { app } = await testApi({ server: publicUrl ? { publicUrl } : {} });
  const res = await app.inject({ url: "/v1/openapi.json" });
  expect(res.statusCode).toBe(200);
  return res.json() as Document;
}

describe("GET /v1/openapi.json", () => {
  it("lists every route with its summary and access", async () => {
    const doc = await document("https://skein.example.com/");
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.servers).toEqual([{ url: "https://skein.example.com" }]);
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(operations.sort()).toEqual(
      [
        "GET /v1/health",
        "GET /v1/me",
        "GET /v1/ready",
        "GET /v1/openapi.json",
        "GET /v1/workflows",
        "GET /v1/workflows/{id}",
        "PUT /v1/workflows/{id}",
        "POST /v1/workflows/validate",
        "POST /v1/workflows/{id}/migrate",
        "POST /v1/runs",
        "GET /v1/runs",
        "POST /v1/runs/bulk",
        "GET /v1/runs/{run_id}",
        "POST /v1/runs/{run_id}/cancel",
        "POST /v1/runs/{run_id}/retry",
        "POST /v1/runs/{run_id}/pause",
        "POST /v1/runs/{run_id}/resume",
        "POST /v1/runs/{run_id}/nodes/{node_id}/fail",
        "POST /v1/runs/{run_id}/fork",
        "GET /v1/runs/{run_id}/events",
        "GET /v1/runs/{run_id}/graph",
        "GET /v1/runs/{run_id}/progress",
        "GET /v1/runs/{run_id}/nodes/{node_id}/items",
        "GET /v1/runs/{run_id}/nodes/{node_id}/messages",
        "GET /v1/runs/{run_id}/nodes/{node_id}/steps",
        "GET /v1/schedules",
        "GET /v1/schedules/{schedule_id}",
        "PUT /v1/schedules/{schedule_id}",
        "DELETE /v1/schedules/{schedule_id}",
        "POST /v1/schedules/{schedule_id}/pause",
        "POST /v1/schedules/{schedule_id}/resume",
        "GET /v1/reviews",
        "POST /v1/runs/{run_id}/nodes/{node_id}/review",
        "POST /v1/runs/{run_id}/events",
        "POST /v1/events",
        "GET /v1/stream",
        "POST /v1/tasks/claim",
        "POST /v1/tasks/{execution_id}/heartbeat",
        "POST /v1/tasks/{execution_id}/progress",
        "POST /v1/tasks/{execution_id}/steps",
        "POST /v1/tasks/{execution_id}/complete",
        "POST /v1/tasks/{execution_id}/fail",
      ].sort(),
    );
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        expect(op.summary, `${method} ${path}`).toEqual(expect.any(String));
      }
    }
    expect(doc.paths["/v1/health"]?.get?.security).toEqual([]);
    expect(doc.paths["/v1/runs"]?.post?.security).toEqual([{ bearer: [] }]);
    expect(doc.components.securitySchemes).toEqual({
      bearer: expect.objectContaining({ type: "http", scheme: "bearer" }),
    });
    expect(doc.paths["/v1/runs"]?.post?.responses).toHaveProperty("403");
  });

  it("names every operation and groups it by tag, for generated clients' method names", async () => {
    const doc = await document();
    const operations = Object.values(doc.paths).flatMap((ops) => Object.values(ops));
    const ids = operations.map((op) => op.operationId);
    expect(ids.every((id) => /^[a-z][A-Za-z]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(
      expect.arrayContaining([
        "listRuns",
        "getRun",
        "startRun",
        "cancelRun",
        "claimTasks",
        "completeTask",
        "getHealth",
        "putSchedule",
        "pauseSchedule",
        "resumeSchedule",
      ]),
    );
    expect(doc.paths["/v1/tasks/{execution_id}/heartbeat"]?.post?.operationId).toBe("heartbeatTask");
    const tags = doc.tags.map((t) => t.name);
    expect(tags).toEqual(["health", "tokens", "workflows", "runs", "schedules", "reviews", "events", "tasks"]);
    for (const op of operations) expect(tags).toEqual(expect.arrayContaining(op.tags));
    expect(doc.paths["/v1/reviews"]?.get?.tags).toEqual(["reviews"]);
    // Without a public URL, the document is relative to where it was fetched from.
    expect(doc.servers).toEqual([{ url: "/" }]);
  });

  it("lists every status a route answers, each error with the Error schema", async () => {
    const doc = await document();
    const statuses = (path: string, method: string) => Object.keys(doc.paths[path]?.[method]?.responses ?? {});
    expect(statuses("/v1/runs", "post")).toEqual([
      "201",
      "400",
      "401",
      "403",
      "404",
      "409",
      "413",
      "415",
      "429",
      "503",
      "default",
    ]);
    // Rates per token (DESIGN §13.1): starting runs, sending and publishing events, posting progress.
    for (const [path, method] of [
      ["/v1/runs/{run_id}/retry", "post"],
      ["/v1/runs/{run_id}/fork", "post"],
      ["/v1/runs/{run_id}/events", "post"],
      ["/v1/events", "post"],
      ["/v1/tasks/{execution_id}/progress", "post"],
    ] as const) {
      expect(statuses(path, method), `${method} ${path}`).toContain("429");
    }
    const tooMany = (doc.paths["/v1/runs"]?.post?.responses["429"] ?? {}) as { headers?: object };
    expect(tooMany.headers).toHaveProperty("Retry-After");
    expect(statuses("/v1/tasks/claim", "post")).toEqual([
      "200",
      "400",
      "401",
      "403",
      "413",
      "415",
      "429",
      "503",
      "default",
    ]);
    expect(statuses("/v1/tasks/{execution_id}/heartbeat", "post")).toContain("409");
    expect(statuses("/v1/tasks/{execution_id}/progress", "post")).toEqual(
      expect.arrayContaining(["202", "403", "409"]),
    );
    expect(statuses("/v1/stream", "get")).toEqual(["200", "400", "401", "403", "404", "429", "503", "default"]);
    expect(statuses("/v1/health", "get")).toEqual(["200", "400", "403", "default"]);
    expect(statuses("/v1/ready", "get")).toEqual(["200", "400", "403", "503", "default"]);
    for (const ops of Object.values(doc.paths)) {
      for (const op of Object.values(ops)) {
        for (const [status, response] of Object.entries(op.responses)) {
          if (status.startsWith("2")) continue;
          expect(response.content?.["application/json"]?.schema, `${op.operationId} ${status}`).toEqual({
            $ref: "#/components/schemas/Error",
          });
        }
      }
    }
    const unavailable = doc.paths["/v1/runs"]?.post?.responses["503"] as { headers?: object };
    expect(unavailable.headers).toHaveProperty("Retry-After");
  });

  it("describes parameters, bodies and responses with JSON Schemas that compile", async () => {
    const doc = await document();
    const start = doc.paths["/v1/runs"]?.post;
    expect(start?.requestBody?.content["application/json"]?.schema).toMatchObject({
      type: "object",
      required: ["workflow_id"],
      properties: { workflow_id: { type: "string" }, idempotency_key: { type: "string" } },
    });
    // Shared shapes are components, referenced where they are used.
    expect(start?.responses["201"]?.content?.["application/json"]?.schema).toEqual({
      $ref: "#/components/schemas/Run",
    });
    expect(doc.components.schemas.Run).toMatchObject({
      properties: { run_id: { type: "string" }, status: { enum: expect.arrayContaining(["RUNNING"]) } },
    });
    expect(Object.keys(doc.components.schemas)).toEqual(
      expect.arrayContaining([
        "Run",
        "RunWithNodes",
        "Visit",
        "RunEvent",
        "Review",
        "Task",
        "Error",
        "WorkflowDefinition",
      ]),
    );
    expect(doc.paths["/v1/runs/{run_id}"]?.get?.responses["200"]?.content?.["application/json"]?.schema).toEqual({
      $ref: "#/components/schemas/RunWithNodes",
    });
    expect(JSON.stringify(doc.components.schemas.RunWithNodes)).toContain('"#/components/schemas/Visit"');
    expect(JSON.stringify(doc.paths["/v1/tasks/claim"]?.post?.responses["200"])).toContain(
      '"#/components/schemas/Task"',
    );
    expect(doc.paths["/v1/runs"]?.get?.parameters?.map((p) => [p.name, p.in, p.required])).toEqual([
      ["status", "query", false],
      ["workflow_id", "query", false],
      ["schedule_id", "query", false],
      ["id_prefix", "query", false],
      ["id_contains", "query", false],
      ["created_after", "query", false],
      ["created_before", "query", false],
      ["q", "query", false],
      ["tag", "query", false],
      ["paused", "query", false],
      ["limit", "query", false],
      ["cursor", "query", false],
    ]);
    // A schedule's body and answers are named models; runs name the schedule that started them.
    expect(doc.paths["/v1/schedules/{schedule_id}"]?.put?.requestBody?.content["application/json"]?.schema).toEqual({
      $ref: "#/components/schemas/ScheduleInput",
    });
    expect(JSON.stringify(doc.components.schemas.Run)).toContain('"schedule_id"');
    // A run names its parent attempt; a run with its nodes lists its child runs (DESIGN §11.1).
    const runSchema = JSON.stringify([doc.components.schemas.Run, doc.components.schemas.RunWithNodes]);
    expect(runSchema).toContain('"parent"');
    expect(runSchema).toContain('"children"');
    expect(doc.paths["/v1/runs/{run_id}/graph"]?.get?.responses["200"]?.content).toHaveProperty("text/plain");
    // A map visit has its item counts; its items are a route of their own, a page at a time.
    expect(JSON.stringify(doc.components.schemas.MapCounts)).toContain('"pending"');
    const items = doc.paths["/v1/runs/{run_id}/nodes/{node_id}/items"]?.get;
    expect(items?.parameters?.map((p) => [p.name, p.in, p.required])).toEqual([
      ["run_id", "path", true],
      ["node_id", "path", true],
      ["visit", "query", false],
      ["after", "query", false],
      ["limit", "query", false],
    ]);
    expect(JSON.stringify(items?.responses["200"]?.content)).toContain('"#/components/schemas/MapItem"');
    expect(JSON.stringify(doc.components.schemas.MapItem)).toContain('"child_run_id"');
    // An agent node's conversation is paged the same way (DESIGN §14.2).
    const messages = doc.paths["/v1/runs/{run_id}/nodes/{node_id}/messages"]?.get;
    expect(messages?.parameters?.map((p) => [p.name, p.in, p.required])).toEqual([
      ["run_id", "path", true],
      ["node_id", "path", true],
      ["visit", "query", false],
      ["after", "query", false],
      ["limit", "query", false],
    ]);
    expect(JSON.stringify(messages?.responses["200"]?.content)).toContain('"#/components/schemas/Message"');
    expect(JSON.stringify(doc.components.schemas.Message)).toContain('"tool_calls"');
    expect(doc.paths["/v1/workflows/{id}"]?.put?.requestBody?.content["application/json"]?.schema).toEqual({
      $ref: "#/components/schemas/WorkflowDefinition",
    });

    // Every schema in the document is valid JSON Schema 2020-12 (references resolved within it).
    const ajv = new Ajv2020({ strict: false });
    ajv.addSchema({ components: doc.components }, "doc");
    const resolve = (schema: object) =>
      JSON.parse(JSON.stringify(schema).replaceAll('"#/components', '"doc#/components'));
    let compiled = 0;
    for (const ops of Object.values(doc.paths)) {
      for (const op of Object.values(ops)) {
        const schemas = [
          ...(op.parameters ?? []).map((p) => p.schema),
          ...Object.values(op.requestBody?.content ?? {}).map((c) => c.schema),
          ...Object.values(op.responses).flatMap((r) => Object.values(r.content ?? {}).map((c) => c.schema)),
        ];
        for (const schema of schemas) {
          ajv.compile(resolve(schema));
          compiled += 1;
        }
      }
    }
    expect(compiled).toBeGreaterThan(50);
  });
});

describe("openApiDocument and assertDocumented", () => {
  const route = (schema: RouteOptions["schema"], url = "/v1/things/:id"): RouteOptions =>
    ({ method: "POST", url, config: { access: PUBLIC }, schema, handler: () => undefined }) as RouteOptions;

  it("refuses an API route without a camelCase operationId or known tags, or an operationId used twice", () => {
    expect(() => assertDocumented([route({ summary: "x", tags: ["runs"] })])).toThrow(
      "POST /v1/things/:id: needs a camelCase schema.operationId",
    );
    expect(() => assertDocumented([route({ operationId: "GetThing", tags: ["runs"] })])).toThrow("camelCase");
    expect(() => assertDocumented([route({ operationId: "getThing", tags: ["things"] })])).toThrow(
      "schema.tags must list some of health, tokens, workflows, runs, schedules, reviews, events, tasks",
    );
    const twice = [
      route({ operationId: "getThing", tags: ["runs"] }),
      route({ operationId: "getThing", tags: ["runs"] }),
    ];
    expect(() => assertDocumented(twice)).toThrow("operationId getThing is already used");
    // The admin page's files are not API routes.
    expect(() => assertDocumented([route({}, "/assets/*")])).not.toThrow();
  });

  it("refuses one component id for two different shapes (an input with a default, the same schema as output)", () => {
    const Thing = z.object({ n: z.number().default(1) }).meta({ id: "TestThing" });
    const both = route({ operationId: "putThing", tags: ["runs"], body: Thing, response: { 200: Thing } });
    expect(() => openApiDocument([both], undefined)).toThrow('the schema with id "TestThing" converts differently');
    const once = route({ operationId: "getThing", tags: ["runs"], response: { 200: Thing } });
    expect(openApiDocument([once], undefined)).toMatchObject({
      paths: {
        "/v1/things/{id}": {
          post: {
            responses: {
              200: { content: { "application/json": { schema: { $ref: "#/components/schemas/TestThing" } } } },
            },
          },
        },
      },
      components: { schemas: { TestThing: { properties: { n: { type: "number" } }, required: ["n"] } } },
    });
  });
});
