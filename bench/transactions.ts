/** The engine's committed write transactions, read from its metrics (skein_transaction_duration_seconds). */
import { AggregationTemporality, type HistogramMetricData, MetricReader } from "@opentelemetry/sdk-metrics";

/** A reader collected on demand (no export timer), cumulative: each window reads the change. */
export class OnDemandReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

/** The transactions committed so far and their total time, seconds. */
export async function transactions(reader: OnDemandReader): Promise<{ count: number; sum: number }> {
  const { resourceMetrics } = await reader.collect();
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      if (metric.descriptor.name !== "skein_transaction_duration_seconds") continue;
      const points = (metric as HistogramMetricData).dataPoints;
      return {
        count: points.reduce((n, p) => n + p.value.count, 0),
        sum: points.reduce((n, p) => n + (p.value.sum ?? 0), 0),
      };
    }
  }
  return { count: 0, sum: 0 };
}
