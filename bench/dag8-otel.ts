/**
 * dag8_runs_per_s_otel: dag8's throughput (dag8.ts's closed loop, the same windows) with an
 * OpenTelemetry SDK registered as a host would register one: a BasicTracerProvider whose batch
 * processor hands every span to an exporter that drops it, and the AsyncLocalStorage context
 * manager. What it costs is the engine's spans (run start and end, one per attempt) and the
 * context kept across awaits. Target: at least 0.85 of `dag8_runs_per_s`; `dag8_cpu_us_per_run_otel`
 * is what a run costs in CPU with it (dag8.ts's c32 loop).
 */
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { benchDag8 } from "./dag8.js";
import type { Measured } from "./lib.js";

/** Takes every span and sends it nowhere. */
const dropping: SpanExporter = {
  export: (_spans, done) => done({ code: 0 }),
  shutdown: async () => undefined,
};

export async function benchDag8Otel(): Promise<Measured> {
  const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  try {
    const measured = await benchDag8();
    return {
      metrics: {
        dag8_runs_per_s_otel: measured.metrics.dag8_runs_per_s ?? 0,
        dag8_cpu_us_per_run_otel: measured.metrics.dag8_cpu_us_per_run ?? 0,
      },
      meta: { dag8_otel: { ...(measured.meta?.dag8 as object), processor: "BatchSpanProcessor, exporter dropping" } },
    };
  } finally {
    trace.disable();
    context.disable();
    await provider.shutdown();
  }
}
