/** What the Dispatcher is given: the store and registry, limits and timings, and the hooks it calls after a commit. */
import type { Logger } from "pino";
import type { Clock } from "../../clock.js";
import type { RunState } from "../../core/scheduler.js";
import type { Run, RunEvent } from "../../core/types.js";
import type { Store, VisitKey } from "../../store/store.js";
import type { WorkflowRegistry } from "../registry.js";
import type { RunSpans } from "../telemetry/run-spans.js";
import type { ClaimedTask } from "./inputs.js";
import type { HeldTypes, TypeRate } from "./rates.js";

/** What resolving a visit's payload needs of its run (none of it changes while the run lives). */
export type RunRef = Pick<Run, "run_id" | "workflow_id" | "workflow_version" | "trace_id" | "input" | "parent">;

/**
 * What became of a schedule's slot (engine/writer/schedules.ts): `started` a run (or found the one
 * it started), `skipped` by overlap while a run of the schedule was unfinished, `not_started`
 * (its workflow or input refused, logged).
 */
export interface SlotOutcome {
  schedule_id: string;
  outcome: "started" | "skipped" | "not_started";
}

export interface DispatcherHooks {
  /** Starts an attempt of a committed claim. */
  dispatch(task: ClaimedTask): void;
  /** Resolves the payload templates of a ready visit (then queues a `payload` input); `run` when the flush had it. */
  resolvePayload(key: VisitKey, run?: RunRef): void;
  /** Aborts the in-process attempt of a visit that was cancelled or expired. */
  abort(executionId: string, reason: string): void;
  /**
   * A transaction committed: its events in order (perhaps none), the states of the runs it read
   * or wrote (a run's workflow, traceparent, nodes' agent types; sent events' runs may be
   * missing) and how long it took in seconds. Called first after every commit.
   */
  published(events: RunEvent[], runs: ReadonlyMap<string, RunState>, seconds: number): void;
  /** Schedule slots a committed sweep handled (started, skipped, not started). */
  slots?(slots: readonly SlotOutcome[]): void;
  /** Agent types a committed flush held after a provider's 429, and until when. */
  held?(holds: readonly { agent_type: string; until: number }[]): void;
  /** Agent types with ready visits a flush left unclaimed (external workers may be waiting). */
  readyWaiting(agentTypes: string[]): void;
  /** In-process attempts now held, per agent type (for the limits). */
  inFlight(): { total: number; byType: ReadonlyMap<string, number> };
}

export interface DispatcherOptions {
  store: Store;
  registry: WorkflowRegistry;
  clock: Clock;
  engineId: string;
  logger: Logger;
  hooks: DispatcherHooks;
  /** The engine's run spans: a child run's span starts in the transaction that writes the child (its traceparent). */
  spans: RunSpans;
  /** Agent types this engine runs in process. */
  agentTypes: () => string[];
  maxConcurrency: number;
  agentConcurrency: Readonly<Record<string, number>>;
  /** Rate limits per agent type, checked (`rateLimitsOf`): of requests, of tokens, or both. */
  rateLimits: ReadonlyMap<string, TypeRate>;
  /** The agent types a provider's Retry-After holds, as this engine knows them (rates.ts). */
  holds: HeldTypes;
  sweepIntervalMs: number;
  random: () => number;
  /** How many in-progress runs to keep in memory between transactions (run-cache.ts). */
  runCacheSize: number;
  /** After how long without a heartbeat another engine counts as dead (shared stores), ms. */
  engineTimeoutMs: number;
  /** The largest output a visit may have, in bytes (a map's assembled output is held to it). */
  maxOutputBytes: number;
  /** The most runs one root run's tree may hold (DESIGN §13.1, bounded-work.ts). */
  maxRunsPerTree: number;
}
