/**
 * The engine's OpenTelemetry instruments (engine/telemetry/metrics.ts) as Prometheus text, for
 * `GET /metrics`. `prometheusMetrics()` makes the pair `skein serve` wires: a MeterProvider to
 * give the engine (`meterProvider`) and its reader to give the server (`metrics`). The reader is
 * the OpenTelemetry Prometheus exporter without its own HTTP server: the API's port and tokens
 * serve the text, and the series are exactly the OTel instruments (no second definition).
 *
 * @example
 * const { meterProvider, reader } = prometheusMetrics();
 * const engine = await createEngine({ database, agents, meterProvider });
 * const app = await createServer({ engine, tokens, metrics: reader });
 */
import { PrometheusExporter, PrometheusSerializer } from "@opentelemetry/exporter-prometheus";
import { MeterProvider, type MetricReader } from "@opentelemetry/sdk-metrics";

/** The Prometheus text exposition format's content type (version 0.0.4, what every scraper reads). */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** A MeterProvider for the engine and the reader that `createServer({ metrics })` serves at `GET /metrics`. */
export function prometheusMetrics(): { meterProvider: MeterProvider; reader: MetricReader } {
  const reader = new PrometheusExporter({ preventServerStart: true });
  return { meterProvider: new MeterProvider({ readers: [reader] }), reader };
}

// No target_info (the process's resource) nor otel_scope_* labels: every series is the engine's own.
const serializer = new PrometheusSerializer(undefined, false, undefined, true, true);

/** Collects the reader's metrics now (the gauges read the database) as Prometheus text. */
export async function prometheusText(reader: MetricReader): Promise<string> {
  const { resourceMetrics } = await reader.collect();
  return serializer.serialize(resourceMetrics);
}
