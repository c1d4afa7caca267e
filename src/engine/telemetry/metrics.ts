/**
 * The engine's metrics (DESIGN §9) through the OpenTelemetry metrics API: one set of
 * instruments, which `skein serve` exports as Prometheus text at `GET /metrics` and a host's own
 * MeterProvider exports wherever it sends them (OTLP, ...). Instrument names are the Prometheus
 * names (less the `_total` a counter gets there), so both exports name a series alike.
 *
 * Counters and histograms are fed by committed transactions (the dispatcher's `published`
 * hook): runs and attempts are counted from their events, with the workflow and agent type
 * from the run states the transaction wrote. Gauges are read from the database when a reader
 * collects, one Store.readGauges at most per GAUGE_CACHE_MS however many scrapes come.
 * Labels are workflow ids, agent types, statuses and outcomes: never run ids.
 */
import type {
  Attributes,
  BatchObservableCallback,
  Counter,
  Histogram,
  Meter,
  MeterProvider,
  ObservableGauge,
} from "@opentelemetry/api";
import type { Logger } from "pino";
import type { Clock } from "../../clock.js";
import type { RunState } from "../../core/scheduler.js";
import type { EventType, RunEvent } from "../../core/types.js";
import type { Store, StoreGauges } from "../../store/store.js";
import { type RateLimitState, rateLimitStates } from "../rate-states.js";
import { readyByType } from "../served-types.js";
import { waitingCounts } from "../waiting.js";
import type { TypeRate } from "../writer/rates.js";
import type { SlotOutcome } from "../writer/schedules.js";

/** How long gauges read from the database are reused, ms: a scrape storm costs one read a second. */
export const GAUGE_CACHE_MS = 1000;

/** The most runs whose attempts' start times are kept (a run another engine finished is never told here). */
const MAX_RUNS_TRACKED = 10_000;

/** An attempt's end events, with the outcome they give it. */
const ATTEMPT_OUTCOMES: Partial<Record<EventType, string>> = {
  "node.succeeded": "succeeded",
  "node.retrying": "retrying",
  "node.failed": "failed",
  "node.interrupted": "interrupted",
  "node.cancelled": "cancelled",
};

/** A run's end events, with its status. */
const RUN_ENDS: Partial<Record<EventType, string>> = {
  "run.succeeded": "succeeded",
  "run.failed": "failed",
  "run.cancelled": "cancelled",
};

/** Agents take from milliseconds (a lookup) to an hour (a model, a child workflow): seconds. */
const ATTEMPT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];
/** A transaction takes a millisecond on a local file, more on a busy network database: seconds. */
const TRANSACTION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface MetricsContext {
  meterProvider: MeterProvider;
  store: Store;
  engineId: string;
  clock: Clock;
  logger: Logger;
  /** Agent types this engine runs in process: their queue depth is shown as 0 when none wait. */
  agentTypes: () => string[];
  /** The `rateLimits` option, checked: the rate gauges show its types and the held ones. */
  rateLimits: ReadonlyMap<string, TypeRate>;
  /** The agent types any engine or recent worker serves (served-types.ts): ready work of others waits for `no_agent`. */
  servedTypes: () => Promise<ReadonlySet<string>>;
}

export class EngineMetrics {
  private readonly runsStarted: Counter;
  private readonly runsEnded: Counter;
  private readonly scheduleSlots: Counter;
  private readonly attempts: Counter;
  private readonly attemptDuration: Histogram;
  private readonly transactionDuration: Histogram;
  private readonly readyVisits: ObservableGauge;
  private readonly oldestReady: ObservableGauge;
  private readonly pendingReviews: ObservableGauge;
  private readonly pendingWaits: ObservableGauge;
  private readonly pausedRuns: ObservableGauge;
  private readonly heartbeatAge: ObservableGauge;
  private readonly rateHolds: Counter;
  private readonly rateTokensLeft: ObservableGauge;
  private readonly rateHeld: ObservableGauge;
  private readonly waiting: ObservableGauge;
  private readonly gauges: ObservableGauge[];
  private readonly meter: Meter;
  /** When each attempt this engine committed the start of began (event time), by run, then `node#visit`. */
  private readonly starts = new Map<string, Map<string, { attempt: number; at: number }>>();
  private cached: { at: number; read: Promise<StoreGauges | null> } | null = null;
  private cachedRates: { at: number; read: Promise<RateLimitState[] | null> } | null = null;
  private readonly observe: BatchObservableCallback;

  constructor(private readonly c: MetricsContext) {
    const meter = c.meterProvider.getMeter("skein");
    this.meter = meter;
    this.runsStarted = meter.createCounter("skein_runs_started", { description: "Runs started, by workflow" });
    this.runsEnded = meter.createCounter("skein_runs_ended", {
      description: "Runs ended, by workflow and status (succeeded, failed, cancelled)",
    });
    this.scheduleSlots = meter.createCounter("skein_schedule_slots", {
      description:
        "Schedule slots this engine handled, by schedule and outcome (started: a run; skipped: overlap, a run still unfinished; not_started: its workflow or input refused)",
    });
    this.attempts = meter.createCounter("skein_attempts", {
      description:
        "Attempts ended, by agent_type and outcome (succeeded, retrying, failed, interrupted, cancelled); attempts this engine started",
    });
    this.attemptDuration = meter.createHistogram("skein_attempt_duration_seconds", {
      description: "From an attempt's claim to its recorded end, by agent_type and outcome",
      unit: "s",
      advice: { explicitBucketBoundaries: ATTEMPT_BUCKETS },
    });
    this.transactionDuration = meter.createHistogram("skein_transaction_duration_seconds", {
      description: "Committed write transactions of the engine (one flush each)",
      unit: "s",
      advice: { explicitBucketBoundaries: TRANSACTION_BUCKETS },
    });
    this.readyVisits = meter.createObservableGauge("skein_ready_visits", {
      description:
        "Visits ready to claim (payload resolved), and map items of an agent ready to claim, that nobody claimed, by agent_type: the queue depth",
    });
    this.oldestReady = meter.createObservableGauge("skein_oldest_ready_seconds", {
      description: "Age of the oldest ready, unclaimed visit, by agent_type",
      unit: "s",
    });
    this.pendingReviews = meter.createObservableGauge("skein_pending_reviews", {
      description: "Visits waiting for a person's review decision",
    });
    this.pendingWaits = meter.createObservableGauge("skein_pending_waits", {
      description: "Visits waiting for an event or a wake-up time",
    });
    this.pausedRuns = meter.createObservableGauge("skein_paused_runs", {
      description:
        "Runs paused (by an operator, or a node out of retries with on_exhausted: pause): none of their attempts starts",
    });
    this.heartbeatAge = meter.createObservableGauge("skein_engine_heartbeat_age_seconds", {
      description: "Time since this engine's last heartbeat as the database holds it",
      unit: "s",
    });
    this.rateHolds = meter.createCounter("skein_rate_limit_holds", {
      description:
        "Holds this engine wrote after a provider's 429 with Retry-After, by agent_type: no attempt of the type starts on any engine meanwhile",
    });
    this.rateTokensLeft = meter.createObservableGauge("skein_rate_limit_tokens_left", {
      description:
        "Tokens left in the tokens_per_minute window of each agent type with one, across the database (below 0 after attempts used more than they expected)",
    });
    this.rateHeld = meter.createObservableGauge("skein_rate_limit_held_seconds", {
      description:
        "Time until a held agent type's hold (a provider's Retry-After) ends, by agent_type; 0 when not held",
      unit: "s",
    });
    this.waiting = meter.createObservableGauge("skein_waiting", {
      description:
        "Work waiting, by reason (waiting.ts): runs QUEUED behind an active run of their key (key) or in a debounce window (debounce); ready visits and map items of an agent type nothing serves (no_agent), rate-limited or held (rate_limited), or behind more urgent ready work of their type (priority)",
    });
    this.gauges = [
      this.waiting,
      this.readyVisits,
      this.oldestReady,
      this.pendingReviews,
      this.pendingWaits,
      this.pausedRuns,
      this.heartbeatAge,
      this.rateTokensLeft,
      this.rateHeld,
    ];
    this.observe = async (result) => {
      const now = this.c.clock.now();
      const g = await this.readGauges(now);
      if (!g) return;
      const seen = new Set<string>();
      for (const r of readyByType(g.ready)) {
        seen.add(r.agent_type);
        result.observe(this.readyVisits, r.visits, { agent_type: r.agent_type });
        result.observe(this.oldestReady, Math.max(0, r.oldest_age_ms) / 1000, { agent_type: r.agent_type });
      }
      for (const type of this.c.agentTypes()) {
        if (seen.has(type)) continue;
        result.observe(this.readyVisits, 0, { agent_type: type });
        result.observe(this.oldestReady, 0, { agent_type: type });
      }
      result.observe(this.pendingReviews, g.pending_reviews);
      result.observe(this.pendingWaits, g.pending_waits);
      result.observe(this.pausedRuns, g.paused_runs);
      if (g.heartbeat_age_ms !== null) result.observe(this.heartbeatAge, Math.max(0, g.heartbeat_age_ms) / 1000);
      const rates = await this.readRates(now);
      for (const r of rates ?? []) {
        const labels = { agent_type: r.agent_type };
        if (r.tokens_left !== null) result.observe(this.rateTokensLeft, Math.floor(r.tokens_left), labels);
        result.observe(this.rateHeld, r.held_until === null ? 0 : Math.max(0, r.held_until - now) / 1000, labels);
      }
      const served = await this.c.servedTypes().catch(() => null);
      if (rates && served) {
        for (const [reason, n] of waitingCounts(g, served, rates, now)) result.observe(this.waiting, n, { reason });
      }
    };
    meter.addBatchObservableCallback(this.observe, this.gauges);
  }

  /** What the dispatcher's `published` hook hands on, before anyone else hears of the commit. Never throws: a metric must not fail the engine. */
  committed(events: readonly RunEvent[], runs: ReadonlyMap<string, RunState>, seconds: number): void {
    try {
      this.transactionDuration.record(seconds);
      for (const e of events) this.count(e, runs.get(e.run_id));
    } catch (err) {
      this.c.logger.error({ err }, "skein: metrics: a committed transaction could not be counted");
    }
  }

  /** Schedule slots a committed sweep handled. Never throws. */
  slots(slots: readonly SlotOutcome[]): void {
    try {
      for (const s of slots) this.scheduleSlots.add(1, { schedule: s.schedule_id, outcome: s.outcome });
    } catch (err) {
      this.c.logger.error({ err }, "skein: metrics: schedule slots could not be counted");
    }
  }

  /** Holds a committed flush wrote (a provider's 429). Never throws. */
  held(holds: readonly { agent_type: string }[]): void {
    try {
      for (const h of holds) this.rateHolds.add(1, { agent_type: h.agent_type });
    } catch (err) {
      this.c.logger.error({ err }, "skein: metrics: holds could not be counted");
    }
  }

  /** Stops reading gauges (the engine closed; its store with it). */
  stop(): void {
    this.meter.removeBatchObservableCallback(this.observe, this.gauges);
    this.starts.clear();
  }

  private count(e: RunEvent, rs: RunState | undefined): void {
    const workflow = rs?.run.workflow_id ?? String(e.data.workflow_id ?? "unknown");
    if (e.type === "run.started") {
      this.runsStarted.add(1, { workflow });
      return;
    }
    const status = RUN_ENDS[e.type];
    if (status !== undefined) {
      this.runsEnded.add(1, { workflow, status });
      this.starts.delete(e.run_id);
      return;
    }
    if (e.node_id === null || e.visit === null) return;
    const key = `${e.node_id}#${e.visit}`;
    const attempt = typeof e.data.attempt === "number" ? e.data.attempt : null;
    if (e.type === "node.started" && attempt !== null) {
      this.startsOf(e.run_id).set(key, { attempt, at: e.at });
      return;
    }
    const outcome = ATTEMPT_OUTCOMES[e.type];
    if (outcome === undefined) return;
    // Only an attempt whose start this engine committed ended: a review timing out, a cancelled
    // visit that never ran, a failure before any attempt are not attempts.
    const runStarts = this.starts.get(e.run_id);
    const start = runStarts?.get(key);
    if (!start || start.attempt !== attempt) return;
    runStarts?.delete(key);
    const labels: Attributes = { agent_type: rs?.graph.nodes.get(e.node_id)?.agent_type ?? "unknown", outcome };
    this.attempts.add(1, labels);
    this.attemptDuration.record(Math.max(0, e.at - start.at) / 1000, labels);
  }

  private startsOf(runId: string): Map<string, { attempt: number; at: number }> {
    let found = this.starts.get(runId);
    if (!found) {
      // A run taken over by another engine (PostgreSQL) ends there: forget the oldest beyond the cap.
      if (this.starts.size >= MAX_RUNS_TRACKED) {
        const oldest = this.starts.keys().next().value;
        if (oldest !== undefined) this.starts.delete(oldest);
      }
      found = new Map();
      this.starts.set(runId, found);
    }
    return found;
  }

  /** The rate limits' states (rate-states.ts), shared by scrapes as the gauges are; null when the read fails (logged). */
  private readRates(now: number): Promise<RateLimitState[] | null> {
    const c = this.cachedRates;
    if (c && now >= c.at && now - c.at < GAUGE_CACHE_MS) return c.read;
    const read = rateLimitStates(this.c.store, this.c.rateLimits, now).catch((err: unknown) => {
      this.c.logger.warn({ err }, "skein: metrics: the rate limits could not be read from the database");
      return null;
    });
    this.cachedRates = { at: now, read };
    return read;
  }

  /** The gauges from the database, shared by scrapes within GAUGE_CACHE_MS; null when it fails (logged). */
  private readGauges(now: number): Promise<StoreGauges | null> {
    const c = this.cached;
    if (c && now >= c.at && now - c.at < GAUGE_CACHE_MS) return c.read;
    const read = this.c.store.readGauges(this.c.engineId, now).catch((err: unknown) => {
      this.c.logger.warn({ err }, "skein: metrics: the gauges could not be read from the database");
      return null;
    });
    this.cached = { at: now, read };
    return read;
  }
}
