/**
 * The public engine: `createEngine` opens the database, recovers what a dead engine left, and
 * serves runs. The methods here validate and delegate: state changes go through the Dispatcher.
 */

import { hostname } from "node:os";
import { createNoopMeter, metrics } from "@opentelemetry/api";
import { type Logger, pino } from "pino";
import { Egress, egressProblems } from "../calls/egress.js";
import { type Clock, systemClock } from "../clock.js";
import type { Json, Run, RunEvent, Schedule, ScheduleInput, Visit } from "../core/types.js";
import type { WorkflowInput } from "../definition/workflow-input.js";
import { EngineClosedError, NotFoundError, type UnavailableError, ValidationError } from "../errors.js";
import { randomHex } from "../ids.js";
import { MIN_SEARCH_CHARS, type RunFilter, type ScheduleFilter, type Store } from "../store/store.js";
import { untilDeadline } from "./attempts/deadline.js";
import type { ExternalWorkers } from "./attempts/external.js";
import type {
  ClaimRequest,
  CompleteRequest,
  ExternalTask,
  FailRequest,
  HeartbeatRequest,
  ProgressRequest,
} from "./attempts/external-requests.js";
import type { ProgressStreams } from "./attempts/progress.js";
import type { AttemptRunner } from "./attempts/runner.js";
import { Secrets } from "./attempts/secrets.js";
import type {
  EngineOptions,
  EventListener,
  PendingReview,
  PruneOptions,
  PutScheduleOptions,
  ReviewOptions,
  RunWithNodes,
  StartRunOptions,
  SubscribeFilter,
} from "./engine-options.js";
import { createParts } from "./engine-parts.js";
import { newEvent, type PublishEventOptions, type SendEventOptions } from "./events.js";
import { refuseNul } from "./identifiers.js";
import { type ListMapItemsOptions, listMapItems, type MapItemPage } from "./map-items.js";
import { openStore } from "./open-store.js";
import { ITEM_SEPARATOR, type RegisteredWorkflow, type WorkflowCheck, type WorkflowRegistry } from "./registry.js";
import { PRUNE_BATCH, parseDuration, pruneOnce, Retention, type RetentionAges, retentionAges } from "./retention.js";
import { pendingReviews, reviewInput } from "./reviews.js";
import { readRunWithNodes, waitForRun } from "./run-read.js";
import { newRun } from "./run-start.js";
import * as schedules from "./schedules.js";
import { scopeProblem } from "./scope.js";
import type { ServedTypes } from "./served-types.js";
import { type ReadEvents, Subscribers } from "./subscribers.js";
import { EngineMetrics } from "./telemetry/metrics.js";
import type { Notifier } from "./telemetry/notifier.js";
import { inRunStartSpan } from "./telemetry/tracing.js";

import type { Dispatcher } from "./writer/dispatcher.js";
import type { PublishEventAnswer, ReportAnswer, SendEventAnswer } from "./writer/inputs.js";

/** The events that end a run (a redrive starts it again, with run.retried). */
const RUN_END_EVENTS: ReadonlySet<string> = new Set(["run.succeeded", "run.failed", "run.cancelled"]);

export type {
  EngineOptions,
  EventListener,
  NodeVisit,
  PendingReview,
  PruneOptions,
  PutScheduleOptions,
  RateLimit,
  ReviewOptions,
  RunWithNodes,
  StartRunOptions,
  SubscribeFilter,
} from "./engine-options.js";
export type { PublishEventOptions, SendEventOptions } from "./events.js";
export type { ListMapItemsOptions, MapItemPage, MapProgress } from "./map-items.js";
export type { ScheduleWithTimes } from "./schedules.js";
export type { PublishEventAnswer, ReportAnswer, SendEventAnswer } from "./writer/inputs.js";

/**
 * Opens the database and starts an engine.
 * @example
 * const engine = await createEngine({ database: "sqlite:./skein.db", agents: { summarize: async (t) => ({ ok: true }) } });
 * await engine.registerWorkflow(definition);
 * const run = await engine.startRun("content-publish", { input: { topic: "x" } });
 * const done = await engine.waitForRun(run.run_id);
 */
export function createEngine(options: EngineOptions = {}): Promise<Engine> {
  return open(options, true);
}

/**
 * Opens the database without running an engine: registers workflows, starts runs and reads
 * them while an engine (in this process or another, like `skein engine`) runs them. Any number
 * of clients may open a SQLite file beside its one engine. `subscribe` sees only what this
 * client itself wrote; `waitForRun` too on SQLite (poll `getRun` to follow a run an engine
 * elsewhere runs), while on PostgreSQL it also polls.
 * @example const client = await createClient({ database: "sqlite:./skein.db" });
 */
export function createClient(
  options: Pick<
    EngineOptions,
    "database" | "listenDatabase" | "synchronous" | "busyTimeoutMs" | "maxPayloadBytes" | "clock" | "logger"
  > = {},
): Promise<Engine> {
  return open(options, false);
}

async function open(options: EngineOptions, serve: boolean): Promise<Engine> {
  const logger = options.logger ?? pino({ level: process.env.SKEIN_LOG_LEVEL ?? "warn" }, pino.destination(2));
  const store = await openStore(options.database ?? "sqlite:./skein.db", { ...options, logger });
  try {
    const engine = Engine.over(store, { ...options, logger }, serve);
    await engine.start();
    return engine;
  } catch (e) {
    await store.close();
    throw e;
  }
}

export class Engine {
  readonly engineId: string;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly registry: WorkflowRegistry;
  private readonly attempts: AttemptRunner;
  private readonly dispatcher: Dispatcher;
  private readonly notifier: Notifier | null;
  private readonly external: ExternalWorkers;
  private readonly progress: ProgressStreams;
  private readonly served: ServedTypes;
  /** @internal the last heartbeat's write and check of unserved agent types (tests wait for it) */
  lastBeat: Promise<void> = Promise.resolve();
  /** Listeners of every event, and of one run's events (keyed by run_id, so many waiters stay cheap). */
  private readonly subscribers: Subscribers;
  /** Null for a client: its gauges would repeat the engines'. */
  private readonly metrics: EngineMetrics | null;
  private readonly maxPayloadBytes: number;
  /** Where the http node may connect (the `egress` option; the API's own address once served). */
  private readonly egress: Egress;
  private heartbeatTimer: ReturnType<Clock["setTimeout"]> | null = null;
  /** What the schedule methods use (schedules.ts). */
  private readonly schedules: schedules.ScheduleDeps;
  /** @internal the retention option's pruning, when it has one (tests wait for its batches) */
  readonly retention: Retention | null;
  private closed = false;
  /** How a replaying subscription reads the log; nothing once closed (the replay then ends quietly). */
  private readonly readEvents: ReadEvents = (id, page) =>
    this.closed ? Promise.resolve([]) : this.store.listEvents(id, page);

  /** @internal createEngine's and createClient's: an engine over an open store, not started yet. */
  static over(store: Store, options: EngineOptions, serve: boolean): Engine {
    return new Engine(store, options, serve);
  }

  /** Use createEngine or createClient (the declarations ship it private, so `new Engine()` does not compile). */
  private constructor(
    private readonly store: Store,
    private readonly options: EngineOptions,
    /** False for a client: no engine registration, no claims, no sweeps. */
    private readonly serve = true,
  ) {
    this.engineId = options.engineId ?? `${hostname()}-${process.pid}-${randomHex(3)}`;
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? pino({ level: "silent" });
    this.subscribers = new Subscribers(this.logger);
    this.maxPayloadBytes = options.maxPayloadBytes ?? 1024 * 1024;
    const egressRefused = egressProblems(options.egress);
    if (egressRefused.length > 0) throw new ValidationError("The egress option is invalid", egressRefused);
    this.egress = new Egress(options.egress);
    const ages = retentionAges(options.retention);
    this.retention =
      ages && serve
        ? new Retention({
            store,
            clock: this.clock,
            ages,
            intervalMs: options.sweepIntervalMs ?? 1000,
            logger: this.logger,
          })
        : null;
    const agentTypes = Object.keys(options.agents ?? {});
    const meterProvider = options.meterProvider ?? metrics.getMeterProvider();
    // No SDK registered and none given: every instrument would be a no-op, so nothing is counted
    // (counting walks each commit's events; a metrics SDK registered later is not seen).
    const counting = meterProvider.getMeter("skein") !== createNoopMeter();
    this.metrics =
      serve && counting
        ? new EngineMetrics({
            meterProvider,
            store,
            engineId: this.engineId,
            clock: this.clock,
            logger: this.logger,
            agentTypes: () => agentTypes,
          })
        : null;
    const parts = createParts({
      store,
      options,
      secrets: new Secrets(options.secrets ?? {}),
      egress: this.egress,
      engineId: this.engineId,
      clock: this.clock,
      logger: this.logger,
      subscribers: this.subscribers,
      metrics: this.metrics,
      maxPayloadBytes: this.maxPayloadBytes,
      closed: () => this.closed,
    });
    this.registry = parts.registry;
    this.attempts = parts.attempts;
    this.dispatcher = parts.dispatcher;
    this.external = parts.external;
    this.notifier = parts.notifier;
    this.progress = parts.progress;
    this.served = parts.served;
    this.schedules = {
      store,
      registry: this.registry,
      clock: this.clock,
      maxPayloadBytes: this.maxPayloadBytes,
      moved: () => this.dispatcher.sweepSoon(),
    };
  }

  /**
   * Why this engine cannot record anything now (its last transaction failed for a reason that
   * passes: a full disk, a lost database connection), or null when it can. Meanwhile requests
   * are refused with this UnavailableError and results are kept and retried; `skein serve`'s
   * `/v1/ready` answers 503.
   */
  get unavailable(): UnavailableError | null {
    return this.dispatcher.unavailable;
  }

  /** @internal the HTTP server serving this engine listens at this address: the http node never calls it (DESIGN §13.1). */
  noteListening(address: string, port: number): void {
    this.egress.addOwnAddress(address, port);
  }

  /** @internal registers the engine, then recovers attempts of dead engines and starts dispatching. */
  async start(): Promise<void> {
    if (!this.serve) {
      this.dispatcher.startClient();
      return;
    }
    const now = this.clock.now();
    const dead = await this.store.registerEngine(
      {
        engine_id: this.engineId,
        host: hostname(),
        pid: process.pid,
        started_at: now,
        heartbeat_at: now,
        served_types: this.served.own(),
      },
      now - (this.options.engineTimeoutMs ?? 30_000),
    );
    this.dispatcher.start(dead);
    this.armHeartbeat();
    this.retention?.start();
  }

  /**
   * Validates a definition and stores it as a new version (the same content keeps its version).
   * Takes a `defineWorkflow` result (whose literal is checked node by node, built-in kinds'
   * payloads included), any WorkflowInput, or a document read from JSON (`JSON.parse` gives
   * `any`); either way every rule is checked here.
   * @throws ValidationError listing every problem; nothing is stored.
   */
  async registerWorkflow(definition: WorkflowInput): Promise<RegisteredWorkflow> {
    this.assertOpen();
    return this.registry.register(definition, this.clock.now());
  }

  /**
   * Checks a definition as registerWorkflow would (this engine's agent types and decide hooks
   * included), without storing anything: for editors that validate as the user types.
   * @example const { ok, errors } = await engine.checkWorkflow(JSON.parse(text));
   */
  async checkWorkflow(definition: unknown): Promise<WorkflowCheck> {
    this.assertOpen();
    return this.registry.check(definition);
  }

  /**
   * Starts a run of the latest (or given) version of a workflow.
   * @throws NotFoundError for an unknown workflow, ValidationError for a bad input,
   * ConflictError for an idempotency key reused with another input.
   */
  async startRun(workflowId: string, options: StartRunOptions = {}): Promise<Run> {
    this.assertOpen();
    const { idempotency_key, traceparent, scope } = options;
    refuseNul({ workflow_id: workflowId, idempotency_key, traceparent, scope });
    if (workflowId.includes(ITEM_SEPARATOR)) {
      throw new NotFoundError(
        `workflow "${workflowId}" is the item workflow of a map node: its runs are started by the map; start "${workflowId.split(ITEM_SEPARATOR)[0]}" instead`,
      );
    }
    const workflow = await this.registry.get(workflowId, options.version);
    const { onEvent, ...start } = options;
    // Set inside the span's callback (a holder, as TypeScript does not track closure assignments).
    const listening: { stop?: () => void; runId?: string } = {};
    let answer: Run;
    try {
      answer = await inRunStartSpan(workflow.id, start.traceparent, (traceparent) => {
        const run = newRun(workflow, start, this.clock.now(), this.maxPayloadBytes, traceparent);
        // Listening before the run exists: none of its events can be published unheard.
        if (onEvent) Object.assign(listening, { stop: this.followRun(run.run_id, onEvent), runId: run.run_id });
        return new Promise<Run>((resolve, reject) =>
          this.dispatcher.push({ kind: "start", run, done: { resolve, reject } }),
        );
      });
    } catch (e) {
      listening.stop?.();
      throw e;
    }
    if (onEvent && answer.run_id !== listening.runId) {
      // An idempotency key returned an existing run: its own history, from its first event.
      listening.stop?.();
      this.followRun(answer.run_id, onEvent);
    }
    return answer;
  }

  /**
   * startRun's onEvent: the run's events from its first, until it ends. An end in the history
   * may have been redriven since (run.retried), so only a live end, or the history's last
   * event being an end, stops it.
   */
  private followRun(runId: string, onEvent: (event: RunEvent) => void): () => void {
    let live = false;
    let ended = false;
    const stop = this.subscribers.replay(
      (e) => {
        if (e.type === "node.progress") return; // onEvent hears the stored history only
        if (RUN_END_EVENTS.has(e.type)) ended = true;
        else if (e.type === "run.retried") ended = false;
        onEvent(e);
        if (live && ended) stop();
      },
      runId,
      {
        from: 0,
        readEvents: this.readEvents,
        onLive: () => {
          live = true;
          if (ended) stop();
        },
      },
    );
    return stop;
  }

  /**
   * The run with its current visits as `nodes` (a map node's with its item counts, `items`;
   * its items themselves are read a page at a time with listMapItems). `O`: the output's type,
   * as the caller knows it (not checked). @throws NotFoundError
   * @example const run = await engine.getRun<{ summary: string }>(runId); run.output?.summary;
   */
  async getRun<O = Json>(runId: string): Promise<RunWithNodes<O>> {
    refuseNul({ run_id: runId });
    return readRunWithNodes(this.store, this.registry, this.served, runId) as Promise<RunWithNodes<O>>;
  }

  /**
   * A page of a `map` node's items by index (DESIGN §11.1), each with its state, child run,
   * output and error. `visit`: default the current one; `after`: an index, exclusive (default
   * -1); `limit`: default 100, at most 1000. Pass `next_after` as `after` for the next page.
   * @example const { items, next_after } = await engine.listMapItems(runId, "answer", { limit: 50 });
   * @throws ValidationError for bad options, NotFoundError for an unknown run or a node that is not a map node
   */
  async listMapItems(runId: string, nodeId: string, options: ListMapItemsOptions = {}): Promise<MapItemPage> {
    refuseNul({ run_id: runId, node_id: nodeId });
    return listMapItems(this.store, this.registry, runId, nodeId, options);
  }

  /**
   * Decides a `human_review` node: approve succeeds it with `{ decision, by, comment, output }`,
   * reject fails it (`rejected`, routed by next_on_failure). Exactly one decision wins.
   * @throws ConflictError when the node is not waiting (already decided, timed out, an older
   * round), ForbiddenError when `by` is not an assignee, NotFoundError for an unknown run or node.
   */
  async review(runId: string, nodeId: string, options: ReviewOptions): Promise<Visit> {
    this.assertOpen();
    refuseNul({
      run_id: runId,
      node_id: nodeId,
      by: options.by,
      admin: options.admin,
      execution_id: options.execution_id,
    });
    const input = await reviewInput(this.store, this.attempts, runId, nodeId, options);
    return new Promise<Visit>((resolve, reject) => this.dispatcher.push({ ...input, done: { resolve, reject } }));
  }

  /**
   * External agents (DESIGN §5; the HTTP API's /v1/tasks): claims up to `max_tasks` ready visits
   * of these agent types for a worker, with a lease; with `wait_seconds`, waits for some.
   * Visits whose agent_type has no in-process handler wait for such claims. The attempts are
   * held by `worker:<token name>/<worker_id>` (`worker:<worker_id>` without a token): only the
   * same worker may heartbeat and report them (DESIGN §13).
   * @throws ValidationError for a bad request; ForbiddenError for agent types the token may not
   *   claim; LimitError over `taskLimits`
   */
  async claimTasks(request: ClaimRequest): Promise<ExternalTask[]> {
    this.assertOpen();
    refuseNul({ agent_types: request.agent_types, worker_id: request.worker_id });
    return this.external.claim(request);
  }

  /**
   * Renews a claimed task's lease. @throws ConflictError when the caller does not hold the
   * attempt; ForbiddenError for an agent type its token may not claim; LimitError over `taskLimits`
   */
  heartbeatTask(executionId: string, request: HeartbeatRequest): Promise<ReportAnswer> {
    this.assertOpen();
    return this.external.heartbeat(executionId, request);
  }

  /**
   * Partial output of a claimed task (DESIGN §11.6): delivered live to subscribers as
   * `node.progress` (throttled per attempt, never stored); `delivered: false` when the attempt
   * no longer runs.
   * @throws ConflictError when the caller does not hold the attempt; ForbiddenError for an agent
   *   type its token may not claim; NotFoundError; ValidationError for progress that is not JSON
   */
  progressTask(executionId: string, request: ProgressRequest): Promise<{ delivered: boolean }> {
    this.assertOpen();
    return this.external.progress(executionId, request);
  }

  /**
   * Reports a claimed task's success (`next`: the agent's route). The identical report sent
   * again is answered `duplicate` and changes nothing.
   * @throws ConflictError when the caller does not hold the attempt; ForbiddenError for an agent
   *   type its token may not claim; NotFoundError; ValidationError for bad output
   */
  completeTask(executionId: string, request: CompleteRequest): Promise<ReportAnswer> {
    this.assertOpen();
    return this.external.complete(executionId, request);
  }

  /** Reports a claimed task's failure; retried unless `retryable` is false. @throws ConflictError */
  failTask(executionId: string, request: FailRequest): Promise<ReportAnswer> {
    this.assertOpen();
    return this.external.fail(executionId, request);
  }

  /** What waits for people, oldest first; only in the runs `runIds` names, when given (a page of runs). */
  async listReviews(filter: { status?: "pending"; runIds?: readonly string[] } = {}): Promise<PendingReview[]> {
    refuseNul({ run_ids: filter.runIds });
    return pendingReviews(this.store, filter.runIds);
  }

  /**
   * Sends an event to a run (DESIGN §11.2): delivered to its oldest WAITING `wait_event` for
   * `name`, else kept in the run's inbox for the next one. The same `idempotency_key` again is
   * answered as the first time (`duplicate: true`) and delivered once.
   * @throws ConflictError for a run that has ended; NotFoundError for an unknown run;
   *   ValidationError for a bad name, payload or key
   */
  async sendEvent(runId: string, name: string, payload: Json = null, options: SendEventOptions = {}) {
    this.assertOpen();
    refuseNul({ run_id: runId, name, idempotency_key: options.idempotency_key });
    const event = newEvent(
      { run_id: runId, name, payload, idempotency_key: options.idempotency_key },
      { maxPayloadBytes: this.maxPayloadBytes, now: this.clock.now() },
    );
    return new Promise<SendEventAnswer>((resolve, reject) =>
      this.dispatcher.push({ kind: "send_event", run_id: runId, event, done: { resolve, reject } }),
    );
  }

  /**
   * Publishes an event by key (DESIGN §11.3): every run WAITING in a `wait_event` on (`name`,
   * `key`) receives it, and waits on that key that start within their `buffer_seconds` too.
   * @throws ValidationError for a bad name, key or payload
   */
  async publishEvent(name: string, key: string, payload: Json = null, options: PublishEventOptions = {}) {
    this.assertOpen();
    refuseNul({ name, key, idempotency_key: options.idempotency_key, scope: options.scope });
    const bad = options.scope === undefined ? null : scopeProblem(options.scope);
    if (bad) throw new ValidationError("The event's scope is not valid", [{ path: "scope", message: bad }]);
    const event = newEvent(
      { run_id: null, name, key, payload, idempotency_key: options.idempotency_key },
      { maxPayloadBytes: this.maxPayloadBytes, now: this.clock.now() },
    );
    // The waiting runs are found first, so that the flush locks them as it begins (in order).
    const run_ids = await this.store.runsWaitingOnKey(name, key, 10_000);
    return new Promise<PublishEventAnswer>((resolve, reject) =>
      this.dispatcher.push({
        kind: "publish_event",
        run_ids,
        event,
        scope: options.scope ? [...options.scope] : null,
        done: { resolve, reject },
      }),
    );
  }

  /**
   * Cancels a run: its active nodes become CANCELLED (their signals abort, late results are
   * fenced), pending ones SKIPPED, the run CANCELLED. With `compensate`, what the run did is
   * undone first (COMPENSATING, then CANCELLED).
   * @throws ConflictError for a run that already ended or is compensating, NotFoundError for an unknown run.
   */
  async cancelRun(runId: string, options: { reason?: string; compensate?: boolean } = {}): Promise<Run> {
    this.assertOpen();
    refuseNul({ run_id: runId });
    return new Promise<Run>((resolve, reject) =>
      this.dispatcher.push({
        kind: "cancel",
        run_id: runId,
        ...(options.reason !== undefined ? { reason: options.reason } : {}),
        compensate: options.compensate === true,
        done: { resolve, reject },
      }),
    );
  }

  /**
   * Redrives a FAILED or CANCELLED run (DESIGN §6): new visits for what failed or was cancelled
   * (and for `from`, an earlier node to run again), for everything downstream, and for every
   * success a compensation undid; other successes are kept. The run gets a fresh TTL.
   * @throws ConflictError for a run that is not FAILED or CANCELLED, or that needs attention
   * without `force`; NotFoundError for an unknown run or `from` node.
   */
  async retryRun(runId: string, options: { from?: string; force?: boolean } = {}): Promise<Run> {
    this.assertOpen();
    refuseNul({ run_id: runId, from: options.from });
    return new Promise<Run>((resolve, reject) =>
      this.dispatcher.push({
        kind: "retry",
        run_id: runId,
        from: options.from ?? null,
        force: options.force === true,
        done: { resolve, reject },
      }),
    );
  }

  /**
   * Deletes finished top-level runs (SUCCEEDED, FAILED, CANCELLED; or `statuses`) that ended
   * longer ago than `olderThan`, with everything that belongs to them and their child runs
   * (DESIGN §8), in transactions of about 500 runs, until none is left; a run not finished, or
   * whose child is not, is kept. Their idempotency keys are forgotten: a start with the same key
   * makes a new run. With `dryRun`, counts what would go and deletes nothing.
   * @returns how many runs were (or would be) deleted
   * @throws ValidationError for a bad duration or status
   * @example await engine.pruneRuns({ olderThan: "30d", statuses: ["SUCCEEDED"] });
   */
  async pruneRuns(options: PruneOptions): Promise<number> {
    this.assertOpen();
    const age = parseDuration(options.olderThan, "olderThan");
    const statuses = options.statuses ?? ["SUCCEEDED", "FAILED", "CANCELLED"];
    const ages: RetentionAges = {};
    for (const status of statuses) {
      if (status !== "SUCCEEDED" && status !== "FAILED" && status !== "CANCELLED") {
        throw new ValidationError(`statuses: ${JSON.stringify(status)} is not SUCCEEDED, FAILED or CANCELLED`);
      }
      ages[status] = age;
    }
    const limit = options.batchSize ?? PRUNE_BATCH;
    if (!Number.isInteger(limit) || limit < 1) {
      throw new ValidationError(`batchSize must be a whole number of runs >= 1; got ${String(options.batchSize)}`);
    }
    if (options.dryRun) return pruneOnce(this.store, this.clock, ages, { dryRun: true });
    let total = 0;
    for (;;) {
      const pruned = await pruneOnce(this.store, this.clock, ages, { limit });
      if (pruned === 0) return total;
      total += pruned;
    }
  }

  /**
   * Creates or replaces a schedule (DESIGN §11.5): runs of `workflow_id` started on a cron
   * expression in a time zone, each slot once across every engine (idempotency key
   * `skein:schedule:<schedule_id>:<slot as ISO 8601 UTC>`). Defaults: timezone "UTC", input {},
   * overlap "skip", catchup "latest", catchup_limit 100, paused false, the latest version at
   * each firing. Replacing keeps the schedule's history; next_fire_at moves to the next slot of
   * the new cron (it stays when cron and timezone are unchanged and the schedule was unpaused).
   * @example await engine.putSchedule({ schedule_id: "nightly", workflow_id: "digest", cron: "0 3 * * *", timezone: "Europe/Berlin" });
   * @throws ValidationError listing every problem: the cron (`cron`, croner's reason), the time
   *   zone (`timezone`), an unknown workflow or version, an input not of its input_schema
   */
  async putSchedule(
    input: ScheduleInput,
    options: PutScheduleOptions = {},
  ): Promise<{ schedule: Schedule; created: boolean }> {
    this.assertOpen();
    const { schedule_id, workflow_id, timezone } = (input ?? {}) as Partial<ScheduleInput>;
    refuseNul({ schedule_id, workflow_id, timezone });
    return schedules.putSchedule(this.schedules, input, options);
  }

  /** Schedules by schedule_id; of one workflow with `workflow_id`. */
  async listSchedules(options: ScheduleFilter = {}): Promise<Schedule[]> {
    refuseNul({ workflow_id: options.workflow_id, workflow_ids: options.workflow_ids });
    return schedules.listSchedules(this.schedules, options);
  }

  /** A schedule with its next 5 fire times (epoch ms; none while paused). @throws NotFoundError */
  async getSchedule(scheduleId: string): Promise<schedules.ScheduleWithTimes> {
    refuseNul({ schedule_id: scheduleId });
    return schedules.getSchedule(this.schedules, scheduleId);
  }

  /** Stops a schedule firing (next_fire_at null); a paused one is left as it is. @throws NotFoundError */
  async pauseSchedule(scheduleId: string): Promise<Schedule> {
    refuseNul({ schedule_id: scheduleId });
    this.assertOpen();
    return schedules.pauseSchedule(this.schedules, scheduleId);
  }

  /**
   * Fires a paused schedule again from its next slot after now: what passed while it was paused
   * is not caught up. An unpaused one is left as it is. @throws NotFoundError
   */
  async resumeSchedule(scheduleId: string): Promise<Schedule> {
    refuseNul({ schedule_id: scheduleId });
    this.assertOpen();
    return schedules.resumeSchedule(this.schedules, scheduleId);
  }

  /** Deletes a schedule; the runs it started keep their schedule_id. @throws NotFoundError */
  async deleteSchedule(scheduleId: string): Promise<void> {
    refuseNul({ schedule_id: scheduleId });
    this.assertOpen();
    return schedules.deleteSchedule(this.schedules, scheduleId);
  }

  /**
   * Newest first. `before` pages: pass the last run_id of the previous page.
   * @throws ValidationError for a `q` shorter than 3 characters (the text index is of trigrams).
   */
  async listRuns(filter: RunFilter = {}): Promise<Run[]> {
    const { workflow_id, workflow_ids, before, schedule_id, id_prefix, q } = filter;
    refuseNul({ workflow_id, workflow_ids, before, schedule_id, id_prefix, q });
    if (filter.q !== undefined && [...filter.q].length < MIN_SEARCH_CHARS) {
      throw new ValidationError(
        `listRuns: q must be at least ${MIN_SEARCH_CHARS} characters (the search index is of trigrams), got ${JSON.stringify(filter.q)}`,
      );
    }
    return this.store.listRuns(filter);
  }

  /**
   * @internal runs whose id starts or ends with `part`, at most `limit` of each (the CLI's
   * abbreviated run ids): a prefix is an index range, a suffix a scan of the ids.
   */
  async findRunsByIdPart(part: string, limit: number): Promise<{ prefix: Run[]; suffix: Run[] }> {
    refuseNul({ run_id: part });
    return this.store.findRunsByIdPart(part, limit);
  }

  /** Every visit of a run, superseded ones included (the loop and retry history). */
  async listVisits(runId: string): Promise<Visit[]> {
    refuseNul({ run_id: runId });
    return this.store.listVisits(runId);
  }

  /** The run's history, oldest first. */
  async listEvents(runId: string, options: { afterSeq?: number; limit?: number } = {}): Promise<RunEvent[]> {
    refuseNul({ run_id: runId });
    return this.store.listEvents(runId, options);
  }

  listWorkflows(): Promise<{ id: string; version: number; created_at: number }[]> {
    return this.store.listWorkflows();
  }

  /**
   * The stored definition of a workflow version (latest by default): the document as registered
   * (it passed every check then), with its version. @throws NotFoundError
   */
  async getWorkflow(id: string, version?: number): Promise<{ id: string; version: number; definition: WorkflowInput }> {
    refuseNul({ workflow_id: id });
    const w = await this.registry.get(id, version);
    return { id, version: w.version, definition: w.document as WorkflowInput };
  }

  /**
   * Calls `listener` with every event this engine (or client) commits, of one run if `run_id` is
   * given, in order. With `from` (needs `run_id`): first every stored event of the run with
   * `seq >= from`, in seq order, then the live ones, with no gap and no event twice (by seq);
   * `from: 0` is the whole history. The replay reads the database, so it includes what other
   * processes wrote; live events are only this process's (on SQLite another process's engine
   * publishes its own: poll `listEvents` by seq to follow it). A listener that throws is logged.
   * Listeners also hear running attempts' progress (`node.progress`, DESIGN §11.6: no `seq`,
   * never stored, so a replay delivers it only once live): `if (e.type === "node.progress") ...`.
   * @example const stop = engine.subscribe((e) => console.log(e.seq, e.type), { run_id: run.run_id, from: 0 });
   * @returns a function that unsubscribes (and stops a replay in progress)
   * @throws ValidationError for `from` without `run_id`, or a `from` that is not an integer >= 0
   */
  subscribe(listener: EventListener, filter: SubscribeFilter = {}): () => void {
    const { run_id, from } = filter;
    refuseNul({ run_id });
    if (from === undefined) return this.subscribers.add(listener, run_id);
    if (!Number.isSafeInteger(from) || from < 0) {
      throw new ValidationError("Invalid subscription", [
        { path: "from", message: `must be an integer >= 0 (a seq of the run's events), got ${String(from)}` },
      ]);
    }
    if (typeof run_id !== "string" || run_id === "") {
      throw new ValidationError("Invalid subscription", [
        { path: "from", message: "needs run_id: only one run's history can be replayed; pass { run_id, from }" },
      ]);
    }
    return this.subscribers.replay(listener, run_id, { from, readEvents: this.readEvents, onError: filter.onError });
  }

  /**
   * Resolves with the run once it has ended (SUCCEEDED, FAILED or CANCELLED). On a shared
   * database another engine may end it: the run is then also polled at the sweep interval.
   * `O`: the output's type, as the caller knows it (not checked).
   * @example const done = await engine.waitForRun<{ summary: string }>(run.run_id);
   */
  async waitForRun<O = Json>(runId: string): Promise<RunWithNodes<O>> {
    refuseNul({ run_id: runId });
    return (await waitForRun(
      {
        store: this.store,
        clock: this.clock,
        pollMs: this.options.sweepIntervalMs ?? 1000,
        closed: () => this.closed,
        subscribe: (listener, id) => this.subscribers.add(listener, id),
        read: (id) => this.getRun(id),
      },
      runId,
    )) as RunWithNodes<O>;
  }

  /**
   * @internal what this engine is doing now, for createTestEngine's idle rule: `working` while
   * a flush is queued or running or payloads are resolving; `held` the attempts in flight in
   * this process (a handler running, or its result being checked).
   */
  activity(): { working: boolean; held: { execution_id: string; attempt: number }[] } {
    const attempts = this.attempts.activity();
    return { working: this.dispatcher.working() || attempts.resolving, held: attempts.held };
  }

  /**
   * Stops gracefully: no new claims, waits up to `timeoutMs` (default 10 000) for attempts in
   * flight, records their results, and releases the database. It always ends, within
   * `timeoutMs` plus a few seconds to record and release, even while the database fails:
   * attempts still running then, or whose results could not be recorded, are recovered by the
   * next engine.
   */
  async close(options: { timeoutMs?: number } = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const deadline = Date.now() + (options.timeoutMs ?? 10_000);
    this.external.readyWaiting(["*"]); // waiting claims return empty
    if (this.heartbeatTimer) this.clock.clearTimeout(this.heartbeatTimer);
    this.dispatcher.stopClaiming();
    const retentionStopped = this.retention?.stop();
    const pending = this.attempts.pending();
    if (pending.length > 0) await untilDeadline(Promise.all(pending), deadline);
    // Recording what returned gets a moment of its own, even when the attempts used up the timeout.
    const recordBy = Math.max(deadline, Date.now() + CLOSE_GRACE_MS);
    await this.dispatcher.drain(recordBy);
    this.attempts.abortAll("stopped with the engine");
    this.progress.clear(); // workers' pending progress too: nothing is delivered after close
    await this.dispatcher.stop(recordBy);
    this.attempts.spans.endAll(); // attempts whose end this engine did not see
    if (retentionStopped) await untilDeadline(retentionStopped, recordBy);
    this.notifier?.stop();
    try {
      if (this.serve) await untilDeadline(this.store.stopEngine(this.engineId, this.clock.now()), recordBy);
    } catch (err) {
      // Left to look alive until its heartbeat goes stale: the next engine then recovers its attempts.
      this.logger.warn({ err }, "skein: could not record that the engine stopped");
    }
    this.metrics?.stop();
    const released = await untilDeadline(this.store.close(), Date.now() + CLOSE_GRACE_MS);
    if (!released) this.logger.warn("skein: the database connection did not close in time; left to the process's exit");
    this.subscribers.clear();
  }

  private armHeartbeat(): void {
    const interval = this.options.heartbeatIntervalMs ?? 5000;
    this.heartbeatTimer = this.clock.setTimeout(() => {
      if (this.closed) return;
      this.lastBeat = this.beat();
      this.armHeartbeat();
    }, interval);
  }

  /** One heartbeat: the engine's row (with what it serves now), then the warning about agent types nothing serves. */
  private async beat(): Promise<void> {
    try {
      await this.store.heartbeat(this.engineId, this.clock.now(), this.served.own());
    } catch (err) {
      this.logger.error({ err }, "skein: engine heartbeat failed");
      return;
    }
    this.served.stale(); // the rows are read again with this engine's new one
    if (this.closed) return;
    await this.served.check(this.engineId).catch((err: unknown) => {
      if (this.closed) return; // the store closed under it: nothing to say
      this.logger.error({ err }, "skein: could not check which agent types are served");
    });
  }

  private assertOpen(): void {
    if (this.closed) throw new EngineClosedError("the engine is closed; create a new engine with createEngine()");
  }
}

/** How long `close` may take, past its timeout, to record results and release the database, ms. */
const CLOSE_GRACE_MS = 2000;
