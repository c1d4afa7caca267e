/**
 * What route modules get from the server that registers them (the fields it adds to fastify's
 * routes and requests, `config.access` and `request.principal`, are declared in server.ts, which
 * ships them to the API's users). Its own file, so that routes/ and server.ts do not import each other.
 */
import type { ServerResponse } from "node:http";
import type { MetricReader } from "@opentelemetry/sdk-metrics";
import type { RouteOptions } from "fastify";
import type { Slots } from "../engine/attempts/slots.js";
import type { TokenRate } from "../engine/attempts/token-rate.js";
import type { Engine } from "../engine/engine.js";

/** @internal What route modules get besides the app. */
export interface RouteContext {
  engine: Engine;
  /** The SSE heartbeat interval, ms. */
  heartbeatMs: number;
  /** Open SSE responses: ended when the server closes. */
  streams: Set<ServerResponse>;
  /** The caps on open SSE responses, per token and in total. */
  streamSlots: Slots<object>;
  /** Rates per token (DESIGN §13.1): run starts and retries, events sent or published, progress posts. */
  rates: { starts: TokenRate; events: TokenRate; progress: TokenRate };
  /** Every route registered, for the OpenAPI document. */
  routes: readonly RouteOptions[];
  publicUrl: string | undefined;
  /** The reader `GET /metrics` serves (none: the route is not there). */
  metrics: MetricReader | undefined;
  /** False once the server is closing: /v1/ready answers 503. */
  accepting(): boolean;
}
