/**
 * How an Engine's parts are wired together (the constructor's work): its identity, clock and
 * logger, the agent handlers, the registry, the attempt runner, the dispatcher, external workers,
 * the notifier, metrics and retention. Each part gets only what it needs; the Engine's methods
 * validate and delegate to them.
 */
import { hostname } from "node:os";
import { createNoopMeter, metrics } from "@opentelemetry/api";
import { type Logger, pino } from "pino";
import type { AgentHandler } from "../agents/task.js";
import { agentLoopHandler } from "../calls/agent/loop.js";
import { aggregatorHandler } from "../calls/aggregator.js";
import { Egress, egressProblems } from "../calls/egress.js";
import { httpAgent } from "../calls/http.js";
import { llmHandler } from "../calls/llm/handler.js";
import { McpClients, mcpOptionProblems } from "../calls/mcp.js";
import { type Clock, systemClock } from "../clock.js";
import { budgetReached } from "../core/budget.js";
import type { VisitError } from "../core/types.js";
import { ValidationError } from "../errors.js";
import { randomHex } from "../ids.js";
import type { Store } from "../store/store.js";
import { ExternalWorkers } from "./attempts/external.js";
import { ProgressStreams } from "./attempts/progress.js";
import { AttemptRunner } from "./attempts/runner.js";
import { secretOwnerProblems } from "./attempts/secret-owners.js";
import { Secrets } from "./attempts/secrets.js";
import { toolRuns } from "./attempts/tool-runs.js";
import type { EngineOptions } from "./engine-options.js";
import { WorkflowRegistry } from "./registry.js";
import { Retention, retentionAges } from "./retention.js";
import type { ScheduleDeps } from "./schedules.js";
import { ServedTypes } from "./served-types.js";
import { type ReadEvents, Subscribers } from "./subscribers.js";
import { EngineMetrics } from "./telemetry/metrics.js";
import { Notifier } from "./telemetry/notifier.js";
import { DEFAULT_MAX_RUNS_PER_TREE } from "./writer/bounded-work.js";
import { Dispatcher } from "./writer/dispatcher.js";
import type { Submit } from "./writer/inputs.js";
import { HeldTypes, rateLimitsOf, type TypeRate } from "./writer/rates.js";

/** What an Engine is made of: its methods and its lifecycle (lifecycle.ts) use these. */
export interface EngineParts extends PartsContext {
  /** False for a client: no engine registration, no claims, no sweeps. */
  serve: boolean;
  /** The retention option's pruning, when it has one and the engine serves. */
  retention: Retention | null;
  /** What the schedule methods use (schedules.ts). */
  schedules: ScheduleDeps;
  /** How a replaying subscription reads the log; nothing once closed (the replay then ends quietly). */
  readEvents: ReadEvents;
  registry: WorkflowRegistry;
  attempts: AttemptRunner;
  dispatcher: Dispatcher;
  external: ExternalWorkers;
  notifier: Notifier | null;
  progress: ProgressStreams;
  served: ServedTypes;
}

export interface PartsContext {
  store: Store;
  options: EngineOptions;
  engineId: string;
  clock: Clock;
  logger: Logger;
  subscribers: Subscribers;
  /** The engine's metrics, fed by committed transactions (null for a client). */
  metrics: EngineMetrics | null;
  maxPayloadBytes: number;
  /** The engine's secrets (the `secrets` option), which the attempt runner fills in and redacts. */
  secrets: Secrets;
  /** Where the http node may connect. */
  egress: Egress;
  /** The MCP servers agent nodes' tools call (the `mcp` option); null without one. */
  mcp: McpClients | null;
  /** Whether the engine was closed (waiting external claims then return empty). */
  closed: () => boolean;
  /** The `rateLimits` option, checked. */
  rateLimits: ReadonlyMap<string, TypeRate>;
}

/**
 * An engine's parts over an open store. `closed`: whether the engine was closed.
 * @throws ValidationError for a bad `egress`, `mcp` or `maxRunsPerTree` option
 */
export function createParts(store: Store, options: EngineOptions, serve: boolean, closed: () => boolean): EngineParts {
  const engineId = options.engineId ?? `${hostname()}-${process.pid}-${randomHex(3)}`;
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? pino({ level: "silent" });
  const maxPayloadBytes = options.maxPayloadBytes ?? 1024 * 1024;
  const mcpRefused = mcpOptionProblems(options.mcp);
  if (mcpRefused.length > 0) throw new ValidationError("The mcp option is invalid", mcpRefused);
  const egressRefused = egressProblems(options.egress);
  if (egressRefused.length > 0) throw new ValidationError("The egress option is invalid", egressRefused);
  const ages = retentionAges(options.retention);
  const retention =
    ages && serve ? new Retention({ store, clock, ages, intervalMs: options.sweepIntervalMs ?? 1000, logger }) : null;
  const agentTypes = Object.keys(options.agents ?? {});
  const meterProvider = options.meterProvider ?? metrics.getMeterProvider();
  // No SDK registered and none given: every instrument would be a no-op, so nothing is counted
  // (counting walks each commit's events; a metrics SDK registered later is not seen).
  const counting = meterProvider.getMeter("skein") !== createNoopMeter();
  const secrets = new Secrets(options.secrets ?? {});
  const rateLimits = rateLimitsOf(options.rateLimits ?? {});
  const c: PartsContext = {
    store,
    options,
    engineId,
    clock,
    logger,
    subscribers: new Subscribers(logger),
    metrics:
      serve && counting
        ? new EngineMetrics({
            meterProvider,
            store,
            engineId,
            clock,
            logger,
            agentTypes: () => agentTypes,
            rateLimits,
            // Made with the parts below; a scrape comes after.
            servedTypes: () => (wired ? wired.served.all() : Promise.resolve(new Set<string>())),
          })
        : null,
    maxPayloadBytes,
    secrets,
    mcp: options.mcp ? new McpClients(options.mcp, { secrets }) : null,
    egress: new Egress(options.egress),
    closed,
    rateLimits,
  };
  let wired: ReturnType<typeof wireParts> | null = null;
  wired = wireParts(c);
  return {
    ...c,
    ...wired,
    serve,
    retention,
    schedules: {
      store,
      registry: wired.registry,
      clock,
      maxPayloadBytes,
      moved: () => wired.dispatcher.sweepSoon(),
    },
    readEvents: (id, page) => (closed() ? Promise.resolve([]) : store.listEvents(id, page)),
  };
}

/**
 * Why no further work may start under the budget of `runId` or of a run above it, or null (read
 * now). A run's budgets never change, so a run with none above it is remembered and not read again.
 */
function budgetReader(store: Store): (runId: string) => Promise<VisitError | null> {
  const unbudgeted = new Set<string>();
  return async (runId) => {
    if (unbudgeted.has(runId)) return null;
    const run = await store.getRun(runId);
    if (!run) return null;
    if (!run.budget && !run.parent?.budgeted?.length) {
      if (unbudgeted.size >= 10_000) unbudgeted.clear();
      unbudgeted.add(runId);
      return null;
    }
    const reached = budgetReached(run, "this run");
    if (reached) return reached;
    for (const id of run.parent?.budgeted ?? []) {
      const above = await store.getRun(id);
      const over = above && budgetReached(above, "an ancestor");
      if (over) return over;
    }
    return null;
  };
}

/** The parts that work runs through, wired to each other. */
function wireParts(c: PartsContext) {
  const { store, options, clock, logger } = c;
  const handlers = new Map<string, AgentHandler>(Object.entries(options.agents ?? {}));
  // Built-in kinds that run as in-process agents (the aggregator), unless the caller brought one.
  if (!handlers.has("aggregator")) handlers.set("aggregator", aggregatorHandler({ maxOutputBytes: c.maxPayloadBytes }));
  // Built-in agents that do I/O (DESIGN §12) live outside the pure core: src/calls/.
  if (!handlers.has("http"))
    handlers.set(
      "http",
      httpAgent({ maxResponseBytes: c.maxPayloadBytes, clock, egress: c.egress, secrets: c.secrets }),
    );
  if (!handlers.has("llm")) {
    handlers.set(
      "llm",
      llmHandler({ llm: options.llm, maxOutputBytes: c.maxPayloadBytes, now: () => clock.now(), secrets: c.secrets }),
    );
    // A provider's key never shows in an output, error or progress (a server that echoes it back).
    for (const [name, provider] of Object.entries(options.llm?.providers ?? {})) {
      if (typeof provider.api_key === "string") c.secrets.add(`llm.providers.${name}.api_key`, provider.api_key);
    }
  }
  // The agent node's loop calls the llm handler for its turns and the engine's agents as tools.
  if (!handlers.has("agent")) {
    const llm = handlers.get("llm") as AgentHandler;
    const budgetOf = budgetReader(store);
    handlers.set(
      "agent",
      agentLoopHandler({
        llm,
        // A tool is an agent that takes a payload: not the loop itself, not the aggregator (it reads nodes).
        handler: (type) => (type === "agent" || type === "aggregator" ? undefined : handlers.get(type)),
        mcp: c.mcp,
        budgetReached: (task) => budgetOf(task.run_id),
        steps: store,
        childRun: toolRuns({
          store,
          registry: { storeDerived: (id, version) => registry.storeDerived(id, version) },
          submit: (input) => submit(input),
          reads: () => ({
            store,
            registry,
            served,
            clock,
            options,
            closed: c.closed,
            subscribers: c.subscribers,
            rateLimits: c.rateLimits,
          }),
        }),
        // A call's record holds its result and a few fields more.
        maxResultBytes: Math.max(0, c.maxPayloadBytes - 1024),
      }),
    );
  }
  // The test harness waits for these handlers' I/O (createTestEngine), never skipping time past it.
  if (options.wrapHandler) {
    for (const [type, handler] of handlers) handlers.set(type, options.wrapHandler(type, handler));
  }
  const decideHooks = options.decideHooks ?? {};
  const served = new ServedTypes({
    store,
    clock,
    logger,
    handlerTypes: [...handlers.keys()],
    freshMs: options.engineTimeoutMs ?? 30_000,
    refreshMs: options.heartbeatIntervalMs ?? 5000,
  });
  const registry = new WorkflowRegistry(store, {
    // What any engine or recent worker serves: a type only a worker serves warns nobody.
    knownAgentTypes: () => served.all(),
    decideHooks: () => Object.keys(decideHooks),
    maxOutputBytes: c.maxPayloadBytes,
    now: () => clock.now(),
    engineProblems: (workflow, graph) => secretOwnerProblems(c.secrets, options.llm, workflow, graph),
  });
  const progress = new ProgressStreams({
    clock,
    intervalMs: options.progressIntervalMs ?? 50,
    submit: (input) => submit(input),
    logger,
    maxBytes: c.maxPayloadBytes,
  });
  // The runner and the external workers hand the writer their inputs through this port; the
  // dispatcher, made after the runner (its hooks call the runner), is there before any is sent.
  const submit: Submit = (input) => dispatcher.push(input);
  const attempts = new AttemptRunner({
    handlers,
    secrets: c.secrets,
    decideHooks,
    registry,
    store,
    logger,
    maxOutputBytes: c.maxPayloadBytes,
    progress,
    submit,
  });
  // The dispatcher's hooks reach parts made after it (external, notifier) only once it runs.
  let external: ExternalWorkers | null = null;
  let notifier: Notifier | null = null;
  const dispatcher = new Dispatcher({
    store,
    registry,
    clock,
    engineId: c.engineId,
    logger,
    agentTypes: () => [...handlers.keys()],
    maxConcurrency: options.maxConcurrency ?? 100,
    maxOutputBytes: c.maxPayloadBytes,
    agentConcurrency: options.agentConcurrency ?? {},
    rateLimits: c.rateLimits,
    holds: new HeldTypes(),
    // Shared databases sweep twice as often: the sweep is where a dead engine is found, one
    // cheap statement in it, and a killed engine's attempts should run again within a second.
    sweepIntervalMs: options.sweepIntervalMs ?? (store.exclusive ? 1000 : 500),
    random: options.random ?? Math.random,
    runCacheSize: 2000,
    maxRunsPerTree: maxRunsPerTreeOf(options.maxRunsPerTree),
    engineTimeoutMs: options.engineTimeoutMs ?? 30_000,
    spans: attempts.spans,
    hooks: {
      dispatch: (task) => attempts.dispatch(task),
      resolvePayload: (key, run) => attempts.payloads.resolve(key, run),
      abort: (id, reason) => attempts.abort(id, reason),
      published: (events, runs, seconds) => {
        // Counted before anyone hears of the commit: a listener that then reads the metrics sees it.
        c.metrics?.committed(events, runs, seconds);
        if (events.length === 0) return;
        attempts.spans.published(events, runs);
        notifier?.notify(events);
        progress.ended(events); // a worker's attempt that ended streams no more, before its end is heard
        c.subscribers.publish(events);
      },
      slots: (slots) => c.metrics?.slots(slots),
      held: (holds) => c.metrics?.held(holds),
      inFlight: () => attempts.inFlight(),
      readyWaiting: (types) => external?.readyWaiting(types),
    },
  });
  external = new ExternalWorkers({
    submit,
    attempts,
    registry,
    store,
    clock,
    progress,
    maxOutputBytes: c.maxPayloadBytes,
    limits: options.taskLimits ?? {},
    pollMs: options.sweepIntervalMs ?? 1000,
    closed: c.closed,
    workerSeen: (types) => served.workerSeen(types),
  });
  notifier = options.notify
    ? new Notifier({
        options: options.notify,
        clock,
        ...(options.publicUrl === undefined ? {} : { publicUrl: options.publicUrl }),
        logger,
        recordFailure: async (runId, traceId, data) => {
          const at = clock.now();
          const event = {
            run_id: runId,
            type: "notify.failed" as const,
            node_id: null,
            visit: null,
            trace_id: traceId,
            at,
            data,
          };
          dispatcher.push({ kind: "event", event });
        },
      })
    : null;
  return { registry, attempts, dispatcher, external, notifier, progress, served };
}

/** The `maxRunsPerTree` option, checked: a whole number of runs >= 1 (a tree holds its root). */
function maxRunsPerTreeOf(value: number | undefined): number {
  if (value === undefined) return DEFAULT_MAX_RUNS_PER_TREE;
  if (!Number.isInteger(value) || value < 1) {
    throw new ValidationError(
      `maxRunsPerTree must be a whole number of runs >= 1 (a tree holds its root); got ${String(value)}`,
    );
  }
  return value;
}
