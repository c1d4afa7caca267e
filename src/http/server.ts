/**
 * The HTTP API (DESIGN §10): a thin fastify layer over the Engine's public methods. Each route
 * group lives in `routes/`; this file wires what they share: request validation with the zod
 * schemas the routes declare (the OpenAPI document is generated from the same schemas), bearer
 * token checks by each route's `access`, strict JSON bodies (json-text.ts) and their limits (size, depth), trace
 * ids in the logs, and the one error shape. It also serves the admin page (ui.ts) at `/`.
 *
 * @example
 * const engine = await createEngine({ database: "sqlite:./skein.db", agents });
 * const app = await createServer({ engine, tokens: [{ token, role: "admin", name: "ops" }] });
 * await app.listen({ host: "127.0.0.1", port: 8080 });
 * (With `meterProvider` and `metrics` from `prometheusMetrics()`, `GET /metrics` too.)
 */
import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import type { MetricReader } from "@opentelemetry/sdk-metrics";
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController, type RouteOptions } from "fastify";
import { type Logger, pino } from "pino";
import type { z } from "zod";
import { issuesToProblems } from "../definition/zod-issues.js";
import { TokenRate } from "../engine/attempts/token-rate.js";
import type { Engine } from "../engine/engine.js";
import { refuseNul } from "../engine/identifiers.js";
import { ValidationError } from "../errors.js";
import { parseJsonText } from "../json-text.js";
import { type Access, type TokenEntry, Tokens } from "./auth.js";
import type { RouteContext } from "./context.js";
import { clientErrorHandler, errorBody, HttpError, handleError, hasCode, MAX_PARAM_LENGTH } from "./errors.js";
import { hostChecker } from "./host-check.js";
import { DEFAULT_LIMITS, type ServerLimits, streamSlots } from "./limits.js";
import { assertDocumented } from "./openapi.js";
import type { Principal } from "./principal.js";
import { registerEventRoutes } from "./routes/events.js";
import { registerHealthRoutes } from "./routes/health.js";
import { registerMeRoutes } from "./routes/me.js";
import { registerMetricsRoutes } from "./routes/metrics.js";
import { registerReviewRoutes } from "./routes/reviews.js";
import { registerRunRoutes } from "./routes/runs.js";
import { registerBulkRoutes } from "./routes/runs-bulk.js";
import { registerScheduleRoutes } from "./routes/schedules.js";
import { registerStreamRoutes } from "./routes/stream.js";
import { registerTaskRoutes } from "./routes/tasks.js";
import { registerWorkflowRoutes } from "./routes/workflows.js";
import { BUILT_UI_DIR, registerUiRoutes } from "./ui.js";

declare module "fastify" {
  interface FastifyContextConfig {
    /** Who may call the route (auth.ts). Every route declares it; a route without it is refused. */
    access?: Access;
    /** The route keeps a token scoped to workflows to its runs (scope.ts); scoped tokens may call no other. */
    scoped?: boolean;
  }
  interface FastifySchema {
    /** One line for the OpenAPI document. */
    summary?: string;
    /** The operation's stable name in the OpenAPI document (generated clients' method names): every API route has one. */
    operationId?: string;
    /** The OpenAPI document's groups the route belongs to (openapi.ts lists them). */
    tags?: readonly string[];
  }
  interface FastifyRequest {
    /** The caller's token (null when the route is public or the API is open). */
    principal: Principal | null;
  }
}

export interface ServerOptions {
  /** The engine (or client) the API serves. The server never closes it. */
  engine: Engine;
  /** Bearer tokens with roles; none (the default) leaves the API open: bind it to loopback only. */
  tokens?: readonly TokenEntry[];
  /** Largest request body, bytes; larger ones are answered 413. @defaultValue 1 MiB */
  bodyLimit?: number;
  /** Request logs (one trace id per request; no headers). @defaultValue silent */
  logger?: Logger;
  /** The API's address as clients reach it, listed in the OpenAPI document's `servers`. */
  publicUrl?: string;
  /**
   * The admin page at `/`: the directory of its build, or false for the API alone.
   * @defaultValue this package's dist/web (made by npm run build)
   */
  ui?: string | false;
  /** Event streams per token and in total, request and idle timeouts (limits.ts has the defaults). */
  limits?: ServerLimits;
  /** @internal the SSE heartbeat interval, ms. @defaultValue 15000 */
  heartbeatMs?: number;
  /**
   * The reader of the engine's MeterProvider, served as Prometheus text at `GET /metrics` (admin
   * and metrics tokens); `prometheusMetrics()` makes the pair. @defaultValue none: no /metrics
   */
  metrics?: MetricReader;
}

/** Deeper request JSON is refused (400): deep nesting is a denial-of-service vector, never a workflow. */
export const MAX_JSON_DEPTH = 64;
export const DEFAULT_BODY_LIMIT = 1024 * 1024;

/** The route modules, in registration order. */
const ROUTE_MODULES: ((app: FastifyInstance, ctx: RouteContext) => void)[] = [
  registerHealthRoutes,
  registerMeRoutes,
  registerWorkflowRoutes,
  registerRunRoutes,
  registerBulkRoutes,
  registerScheduleRoutes,
  registerReviewRoutes,
  registerEventRoutes,
  registerStreamRoutes,
  registerTaskRoutes,
  registerMetricsRoutes,
];

/** Builds the API (routes registered, not listening): use `app.inject` or `app.listen`. */
export async function createServer(options: ServerOptions): Promise<FastifyInstance> {
  const tokens = new Tokens(options.tokens ?? []);
  const logger = (options.logger ?? pino({ level: "silent" })).child(
    {},
    // Requests are logged without their headers: the Authorization header never reaches a log.
    { serializers: { req: (req: { method: string; url: string }) => ({ method: req.method, url: req.url }) } },
  );
  const bodyLimit = options.bodyLimit ?? DEFAULT_BODY_LIMIT;
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const app = Fastify({
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionTimeout: limits.idleTimeoutMs,
    // node checks the request and headers timeouts this often (default 30 s): a tenth of the shorter.
    http: {
      connectionsCheckingInterval: Math.max(10, Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) / 10),
      // node's own refusal of an HTTP/1.1 request without Host is an empty 400: answered below in the error shape.
      requireHostHeader: false,
    },
    clientErrorHandler,
    frameworkErrors: (err, request, reply) => handleError(err, request, reply, bodyLimit),
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit,
    requestIdHeader: false,
    logController: new LogController({ requestIdLogLabel: "trace_id" }),
    genReqId: (req) => traceIdOf(req.headers.traceparent),
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
  });
  app.server.headersTimeout = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  const routes: RouteOptions[] = [];
  const streams = new Set<ServerResponse>();
  let accepting = true;
  const ctx: RouteContext = {
    engine: options.engine,
    heartbeatMs: options.heartbeatMs ?? 15_000,
    streams,
    streamSlots: streamSlots(limits.streamsPerToken, limits.streams),
    rates: {
      starts: new TokenRate(limits.startRate, "run starts and retries"),
      events: new TokenRate(limits.eventRate, "events"),
      progress: new TokenRate(limits.progressRate, "progress posts"),
    },
    routes,
    publicUrl: options.publicUrl,
    metrics: options.metrics,
    accepting: () => accepting,
  };

  // A JSON API: other bodies are answered 415 rather than parsed as text.
  app.removeContentTypeParser("text/plain");
  // JSON bodies are stored as received or refused (DESIGN §13): not UTF-8, integers beyond 2^53
  // and __proto__ keys are 400s with the path. This replaces fastify's parser (secure-json-parse),
  // whose prototype-poisoning checks json-text.ts keeps.
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (_request, body, done) => {
    try {
      done(null, parseJsonText(body as Buffer, { what: "The request body", base: "body" }));
    } catch (e) {
      done(hasCode(e, "validation") ? unparsableBody(e) : (e as Error), undefined);
    }
  });
  app.decorateRequest("principal", null);
  app.addHook("onRoute", (route) => {
    if (route.method !== "HEAD") routes.push(route);
  });
  // Hooks with callbacks, not async: every request passes them, and a promise each is measurable.
  // An open API answers only requests for its own names, from no page of another site (DNS rebinding, DESIGN §13).
  const checkHost = tokens.open ? hostChecker(options.publicUrl) : null;
  app.addHook("onRequest", (request, _reply, done) => {
    const { access, scoped } = request.routeOptions.config;
    // Unknown URLs (the 404 handler) have no access: they answer 404 to anyone.
    try {
      if (request.headers.host === undefined && request.raw.httpVersion === "1.1") {
        throw new HttpError(400, "bad_request", "an HTTP/1.1 request must have a Host header");
      }
      checkHost?.(request.headers.host, request.headers.origin);
      if (access !== undefined) request.principal = tokens.authorize(request, access, scoped === true);
    } catch (e) {
      return done(e as Error);
    }
    done();
  });
  app.addHook("preValidation", (request, _reply, done) => {
    if (request.body !== undefined && depthOver(request.body, MAX_JSON_DEPTH)) {
      return done(
        new ValidationError(`The request body nests deeper than ${MAX_JSON_DEPTH} levels`, [
          { path: "body", message: `must nest at most ${MAX_JSON_DEPTH} levels of objects and arrays` },
        ]),
      );
    }
    // Every path segment and query value is an id, a name or a filter: a NUL in one (%00) is
    // refused here, before a route reads anything with it (ids in bodies: the Engine's methods).
    try {
      refuseNul({ ...prefixed("params", request.params), ...prefixed("query", request.query) });
    } catch (e) {
      return done(e as Error);
    }
    done();
  });
  // Route schemas are zod: parsed here (defaults applied, types trusted after), every problem with its path.
  app.setValidatorCompiler(({ schema, httpPart }) => {
    const part = httpPart === "querystring" ? "query" : (httpPart ?? "body");
    const zod = schema as unknown as z.ZodType;
    return (data: unknown) => {
      const parsed = zod.safeParse(data ?? {}, { reportInput: true });
      if (parsed.success) return { value: parsed.data };
      return {
        error: new ValidationError(`Invalid request ${part}`, issuesToProblems(parsed.error.issues, part, zod)),
      };
    };
  });
  // Responses are plain JSON; their schemas are for the OpenAPI document.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  app.setErrorHandler((err, request, reply) => handleError(err, request, reply, bodyLimit));
  app.setNotFoundHandler((request, reply) => {
    void reply
      .code(404)
      .send(
        errorBody(
          "not_found",
          `no route ${request.method} ${request.url.split("?")[0]}; GET /v1/openapi.json lists them`,
        ),
      );
  });
  // The http node never calls the API it is served by (DESIGN §13.1): its address, once known.
  app.addHook("onListen", (done) => {
    const address = app.server.address();
    if (address !== null && typeof address === "object") options.engine.noteListening(address.address, address.port);
    done();
  });
  // A connection kept alive after the server started closing would hold app.close() for the
  // keep-alive timeout (72 s): answers from then on close theirs (server.close() ends the idle ones).
  app.addHook("onSend", (_request, reply, payload, done) => {
    if (!accepting) void reply.header("connection", "close");
    done(null, payload);
  });
  app.addHook("preClose", async () => {
    accepting = false;
    // Open event streams would keep the server from closing: end them (clients reconnect elsewhere).
    for (const res of streams) res.end();
    streams.clear();
  });

  for (const register of ROUTE_MODULES) register(app, ctx);
  if (options.ui !== false) registerUiRoutes(app, options.ui ?? BUILT_UI_DIR);
  const unguarded = routes.filter((r) => r.config?.access === undefined).map((r) => `${r.method} ${r.url}`);
  if (unguarded.length > 0) throw new Error(`routes without an access rule: ${unguarded.join(", ")}`);
  assertDocumented(routes);
  await app.ready();
  return app;
}

/** The trace id of a valid W3C traceparent header, else a new one: the request's id in the logs. */
export function traceIdOf(traceparent: string | string[] | undefined): string {
  const header = Array.isArray(traceparent) ? traceparent[0] : traceparent;
  const m = header === undefined ? null : /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(header.trim());
  if (m?.[1] && !/^0+$/.test(m[1])) return m[1];
  // randomUUID draws from a cached entropy pool: a fraction of randomBytes' cost per request.
  return randomUUID().replaceAll("-", "");
}

/** A body refused as text: `bad_request` (as fastify's own refusals), the first problem in the message. */
function unparsableBody(e: ValidationError): HttpError {
  const head = (e.message.split("\n")[0] ?? "").replace(/:$/, "");
  const first = e.problems[0];
  const message = first ? `${head}: ${first.path}: ${first.message}` : head;
  return new HttpError(400, "bad_request", message, { problems: e.problems });
}

/** True when `value` nests objects and arrays deeper than `max` (iterative: no stack to overflow). */
function depthOver(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const [v, depth] = item;
    if (v === null || typeof v !== "object") continue;
    if (depth > max) return true;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}

export type { Rate } from "../engine/attempts/token-rate.js";
export type { TokenEntry } from "./auth.js";
export type { ServerLimits } from "./limits.js";
export { prometheusMetrics } from "./metrics.js";

/** An object's fields under `part.` (params, query), for problems' paths. */
function prefixed(part: string, values: unknown): Record<string, unknown> {
  if (values === null || typeof values !== "object") return {};
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [`${part}.${k}`, v]));
}
