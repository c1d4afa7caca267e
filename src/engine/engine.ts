/**
 * The public engine: `createEngine` opens the database, recovers what a dead engine left, and
 * serves runs. The methods here validate and delegate: state changes go through the Dispatcher.
 */

import { pino } from "pino";
import type { Json, Run, RunEvent, Schedule, ScheduleInput, Visit } from "../core/types.js";
import type { WorkflowInput } from "../definition/workflow-input.js";
import { EngineClosedError, type UnavailableError } from "../errors.js";
import type { RunFilter, ScheduleFilter, StepRow, Store } from "../store/store.js";
import type {
  ClaimRequest,
  CompleteRequest,
  ExternalTask,
  FailRequest,
  HeartbeatRequest,
  ProgressRequest,
  StepAnswer,
  StepRequest,
} from "./attempts/external-requests.js";
import { type BulkAnswer, type BulkOptions, bulkRuns } from "./bulk.js";
import type {
  ClientOptions,
  EngineOptions,
  EventListener,
  ForkRunOptions,
  OperatorOptions,
  PendingReview,
  PruneOptions,
  PutScheduleOptions,
  ReviewOptions,
  RunWithNodes,
  StartRunOptions,
  SubscribeFilter,
} from "./engine-options.js";
import { createParts, type EngineParts } from "./engine-parts.js";
import type { PublishEventOptions, SendEventOptions } from "./events.js";
import { forkRun } from "./fork-run.js";
import { refuseNul } from "./identifiers.js";
import { closeEngine, Heartbeat, startEngine } from "./lifecycle.js";
import { type ListMapItemsOptions, listMapItems, type MapItemPage } from "./map-items.js";
import { type ListMessagesOptions, listMessages, type MessagePage } from "./messages.js";
import { type MigrateRunsAnswer, type MigrateRunsOptions, migrateRuns, upgradable } from "./migrate.js";
import { openStore } from "./open-store.js";
import { listProgress, type ProgressStream } from "./progress-read.js";
import { type RateLimitState, rateLimitStates } from "./rate-states.js";
import type { RegisteredWorkflow, WorkflowCheck } from "./registry.js";
import { pruneRuns, type Retention } from "./retention.js";
import { pendingReviews } from "./reviews.js";
import { listRuns, readRunWithNodes, waitForRun } from "./run-read.js";
import * as schedules from "./schedules.js";
import { listSteps } from "./steps.js";
import type { ReportAnswer } from "./writer/inputs.js";
import * as writes from "./writes.js";

/**
 * Opens the database and starts an engine.
 * @example
 * const engine = await createEngine({ database: "sqlite:./skein.db", agents: { summarize: async (t) => ({ ok: true }) } });
 * await engine.registerWorkflow(definition);
 * const run = await engine.startRun("content-publish", { input: { topic: "x" } });
 * const done = await engine.waitForRun(run.run_id);
 */
export function createEngine(options: EngineOptions = {}): Promise<Engine> {
  return Engine.open(options, true);
}

/**
 * Opens the database without running an engine: registers workflows, starts runs and reads
 * them while an engine (in this process or another, like `skein engine`) runs them. Any number
 * of clients may open a SQLite file beside its one engine. `subscribe` sees only what this
 * client itself wrote; `waitForRun` too on SQLite (poll `getRun` to follow a run an engine
 * elsewhere runs), while on PostgreSQL it also polls.
 * @example const client = await createClient({ database: "sqlite:./skein.db" });
 */
export function createClient(options: ClientOptions = {}): Promise<Engine> {
  return Engine.open(options, false);
}

export class Engine {
  readonly engineId: string;
  /** @internal the retention option's pruning, when it has one (tests wait for its batches) */
  readonly retention: Retention | null;
  /** What the engine is made of (engine-parts.ts): the methods below validate and delegate to them. */
  private readonly p: EngineParts;
  private readonly heartbeat: Heartbeat;
  private closed = false;

  /** @internal createEngine's and createClient's: opens the store, then registers, recovers and dispatches (lifecycle.ts). */
  static async open(options: EngineOptions, serve: boolean): Promise<Engine> {
    const logger = options.logger ?? pino({ level: process.env.SKEIN_LOG_LEVEL ?? "warn" }, pino.destination(2));
    const store = await openStore(options.database ?? "sqlite:./skein.db", { ...options, logger });
    try {
      const engine = new Engine(store, { ...options, logger }, serve);
      await startEngine(engine.p, engine.heartbeat);
      return engine;
    } catch (e) {
      await store.close();
      throw e;
    }
  }

  /** Use createEngine or createClient (private: `new Engine()` does not compile). A test and a bench read `store`. */
  private constructor(
    private readonly store: Store,
    options: EngineOptions,
    serve: boolean,
  ) {
    this.p = createParts(store, options, serve, () => this.closed);
    this.engineId = this.p.engineId;
    this.retention = this.p.retention;
    this.heartbeat = new Heartbeat(this.p);
  }

  /** @internal the last heartbeat's write and check of unserved agent types (tests wait for it) */
  get lastBeat(): Promise<void> {
    return this.heartbeat.lastBeat;
  }

  /**
   * Why this engine cannot record anything now (its last transaction failed for a reason that
   * passes: a full disk, a lost database connection), or null when it can. Meanwhile requests
   * are refused with this UnavailableError and results are kept and retried; `skein serve`'s
   * `/v1/ready` answers 503.
   */
  get unavailable(): UnavailableError | null {
    return this.p.dispatcher.unavailable;
  }

  /** @internal the HTTP server serving this engine listens at this address: the http node never calls it (DESIGN §13.1). */
  noteListening(address: string, port: number): void {
    this.p.egress.addOwnAddress(address, port);
  }

  /**
   * Validates a definition and stores it as a new version (the same content keeps its version).
   * Takes a `defineWorkflow` result (whose literal is checked node by node, built-in kinds'
   * payloads included), any WorkflowInput, or a document read from JSON (`JSON.parse` gives
   * `any`); either way every rule is checked here. The answer's `upgradable` says how many
   * active runs of older versions there are and how many could move to this one (migrateRuns):
   * counted up to 10 000, the newest 1000 checked.
   * @throws ValidationError listing every problem; nothing is stored.
   */
  async registerWorkflow(definition: WorkflowInput): Promise<RegisteredWorkflow> {
    this.assertOpen();
    const registered = await this.p.registry.register(definition, this.p.clock.now());
    return { ...registered, upgradable: await upgradable(this.p, registered.id, registered.version) };
  }

  /**
   * Moves active (RUNNING) top-level runs of older versions of a workflow to `to_version`
   * (DESIGN §16): each whose every visited node exists in the new version with the same
   * agent_type, whose decided visits keep the edges they fired, and with no attempt running
   * (docs/concepts.md, "Upgrading runs in flight"). A moved run's nodes new in that version get
   * visits, and it records `run.migrated`; the others are left unchanged, each with every reason.
   * With `dry_run`, moves nothing and answers what would move.
   * @throws ValidationError for bad options, NotFoundError for an unknown version or a named run
   * that is not one of the workflow's.
   * @example
   * const { moved, incompatible } = await engine.migrateRuns({ workflow_id: "publish", to_version: 2 });
   */
  async migrateRuns(options: MigrateRunsOptions): Promise<MigrateRunsAnswer> {
    this.assertOpen();
    return migrateRuns(this.p, options);
  }

  /**
   * Checks a definition as registerWorkflow would (this engine's agent types and decide hooks
   * included), without storing anything: for editors that validate as the user types.
   * @example const { ok, errors } = await engine.checkWorkflow(JSON.parse(text));
   */
  async checkWorkflow(definition: unknown): Promise<WorkflowCheck> {
    this.assertOpen();
    return this.p.registry.check(definition);
  }

  /**
   * Starts a run of the latest (or given) version of a workflow.
   * @throws NotFoundError for an unknown workflow, ValidationError for a bad input,
   * ConflictError for an idempotency key reused with another input.
   */
  async startRun(workflowId: string, options: StartRunOptions = {}): Promise<Run> {
    this.assertOpen();
    return writes.startRun(this.p, workflowId, options);
  }

  /**
   * The run with its current visits as `nodes` (a map node's with its item counts, `items`;
   * its items themselves are read a page at a time with listMapItems). `O`: the output's type,
   * as the caller knows it (not checked). @throws NotFoundError
   * @example const run = await engine.getRun<{ summary: string }>(runId); run.output?.summary;
   */
  async getRun<O = Json>(runId: string): Promise<RunWithNodes<O>> {
    return readRunWithNodes(this.p, runId) as Promise<RunWithNodes<O>>;
  }

  /**
   * A page of a `map` node's items by index (DESIGN §11.1), each with its state, child run,
   * output and error. `visit`: default the current one; `after`: an index, exclusive (default
   * -1); `limit`: default 100, at most 1000. Pass `next_after` as `after` for the next page.
   * @example const { items, next_after } = await engine.listMapItems(runId, "answer", { limit: 50 });
   * @throws ValidationError for bad options, NotFoundError for an unknown run or a node that is not a map node
   */
  async listMapItems(runId: string, nodeId: string, options: ListMapItemsOptions = {}): Promise<MapItemPage> {
    return listMapItems(this.store, this.p.registry, runId, nodeId, options);
  }

  /**
   * The durable steps a run's attempts recorded (`task.step`, DESIGN §14.1), of one node when
   * given, over its visits: each with its name, the attempt that recorded it, its output, size and time.
   * @throws NotFoundError for an unknown run or node
   * @example const steps = await engine.listSteps(runId, "research");
   */
  async listSteps(runId: string, nodeId?: string): Promise<StepRow[]> {
    return listSteps(this.store, this.p.registry, runId, nodeId);
  }

  /**
   * A page of an `agent` node's conversation in one visit (default: its current one, DESIGN
   * §14.2): its instructions and input, then each model turn (content, tool calls, usage) and
   * each tool call's result as the loop recorded it, by `seq`.
   * @throws ValidationError for a bad visit, after or limit; NotFoundError for an unknown run or a node that is not an agent node
   * @example const { messages, next_after } = await engine.listMessages(runId, "assist", { limit: 50 });
   */
  async listMessages(runId: string, nodeId: string, options: ListMessagesOptions = {}): Promise<MessagePage> {
    return listMessages(this.store, this.p.registry, runId, nodeId, options);
  }

  /**
   * A run's kept progress (DESIGN §15), one stream per attempt in the order they began: its text
   * deltas joined, its last other value, and whether it was superseded (the attempt was retried,
   * or a later one started). What a page opened after the run ended shows as each node's text.
   * @throws NotFoundError for an unknown run
   * @example const [first] = await engine.listProgress(runId); console.log(first?.text);
   */
  async listProgress(runId: string): Promise<ProgressStream[]> {
    return listProgress(this.store, runId);
  }

  /**
   * Decides a `human_review` node: approve succeeds it with `{ decision, by, comment, output }`,
   * reject fails it (`rejected`, routed by next_on_failure). Exactly one decision wins.
   * @throws ConflictError when the node is not waiting (already decided, timed out, an older
   * round), ForbiddenError when `by` is not an assignee, NotFoundError for an unknown run or node.
   */
  async review(runId: string, nodeId: string, options: ReviewOptions): Promise<Visit> {
    this.assertOpen();
    return writes.review(this.p, runId, nodeId, options);
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
    return this.p.external.claim(request);
  }

  /**
   * Renews a claimed task's lease. @throws ConflictError when the caller does not hold the
   * attempt; ForbiddenError for an agent type its token may not claim; LimitError over `taskLimits`
   */
  heartbeatTask(executionId: string, request: HeartbeatRequest): Promise<ReportAnswer> {
    this.assertOpen();
    return this.p.external.heartbeat(executionId, request);
  }

  /**
   * Partial output of a claimed task (DESIGN §11.6, §15): kept as the run's `node.progress`
   * event (throttled per attempt, text deltas joined) and delivered once committed;
   * `delivered: false` when the attempt no longer runs.
   * @throws ConflictError when the caller does not hold the attempt; ForbiddenError for an agent
   *   type its token may not claim; NotFoundError; ValidationError for progress that is not JSON
   */
  progressTask(executionId: string, request: ProgressRequest): Promise<{ delivered: boolean }> {
    this.assertOpen();
    return this.p.external.progress(executionId, request);
  }

  /**
   * Reports a claimed task's success (`next`: the agent's route). The identical report sent
   * again is answered `duplicate` and changes nothing.
   * @throws ConflictError when the caller does not hold the attempt; ForbiddenError for an agent
   *   type its token may not claim; NotFoundError; ValidationError for bad output
   */
  completeTask(executionId: string, request: CompleteRequest): Promise<ReportAnswer> {
    this.assertOpen();
    return this.p.external.complete(executionId, request);
  }

  /** Reports a claimed task's failure; retried unless `retryable` is false. @throws ConflictError */
  failTask(executionId: string, request: FailRequest): Promise<ReportAnswer> {
    this.assertOpen();
    return this.p.external.fail(executionId, request);
  }

  /**
   * Records a durable step of a claimed task (DESIGN §14.1) before the worker uses its output:
   * a later attempt of the visit gets it with its claim. A name recorded before answers that
   * record (`duplicate`) and changes nothing.
   * @throws ConflictError when the caller does not hold the attempt; ForbiddenError for an agent
   *   type its token may not claim; NotFoundError; ValidationError for a bad name or output
   */
  recordTaskStep(executionId: string, request: StepRequest): Promise<StepAnswer> {
    this.assertOpen();
    return this.p.external.step(executionId, request);
  }

  /** What waits for people, oldest first; only in the runs `runIds` names, when given (a page of runs). */
  async listReviews(filter: { status?: "pending"; runIds?: readonly string[] } = {}): Promise<PendingReview[]> {
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
    return writes.sendEvent(this.p, runId, name, payload, options);
  }

  /**
   * Publishes an event by key (DESIGN §11.3): every run WAITING in a `wait_event` on (`name`,
   * `key`) receives it, and waits on that key that start within their `buffer_seconds` too. Each
   * workflow whose latest version's `triggers` declare the event (and its key) starts a run
   * (DESIGN §17), once per event idempotency key: the answer's `started`, and in `not_started`
   * the triggers whose input was refused.
   * @example
   * const { started } = await engine.publishEvent("order.paid", "A-1", { total: 12 }, { idempotency_key: "pay-771" });
   * @throws ValidationError for a bad name, key or payload
   */
  async publishEvent(name: string, key: string, payload: Json = null, options: PublishEventOptions = {}) {
    this.assertOpen();
    return writes.publishEvent(this.p, name, key, payload, options);
  }

  /**
   * Cancels a run: its active nodes become CANCELLED (their signals abort, late results are
   * fenced), pending ones SKIPPED, the run CANCELLED. With `compensate`, what the run did is
   * undone first (COMPENSATING, then CANCELLED).
   * @throws ConflictError for a run that already ended or is compensating, NotFoundError for an unknown run.
   */
  async cancelRun(runId: string, options: { reason?: string; compensate?: boolean } = {}): Promise<Run> {
    this.assertOpen();
    return writes.cancelRun(this.p, runId, options);
  }

  /**
   * Pauses a running run (DESIGN §16): no attempt of it starts until `resumeRun`. Attempts
   * running now finish and are recorded; sleeps and retry times keep counting, and what became
   * due meanwhile starts on resume. The run shows `paused: { by, at, reason }`; pausing a paused
   * run changes nothing. A node with `on_exhausted: "pause"` pauses its run the same way when its
   * retries run out (`paused.node_id` names it).
   * @throws ConflictError for a run that ended or is compensating, NotFoundError for an unknown run.
   * @example await engine.pauseRun(runId, { reason: "provider outage", by: "ops@acme.com" });
   */
  async pauseRun(runId: string, options: OperatorOptions = {}): Promise<Run> {
    this.assertOpen();
    return writes.operate(this.p, "pause", runId, options);
  }

  /**
   * Resumes a paused run: its ready visits start (a node paused by `on_exhausted` gets one more
   * attempt), those whose due time has not come at that time. Resuming a run that is not paused
   * changes nothing.
   * @throws ConflictError for a run that ended or is compensating, NotFoundError for an unknown run.
   */
  async resumeRun(runId: string, options: OperatorOptions = {}): Promise<Run> {
    this.assertOpen();
    return writes.operate(this.p, "resume", runId, options);
  }

  /**
   * Fails a node's visit that waits for an attempt (RETRYING, or ready: a node paused by
   * `on_exhausted: "pause"` among them) for good, taking its failure path: its `next_on_failure`
   * edges fire, or the run fails. The run's pause ends when it was that node's; an operator's
   * pause holds (the failure path starts on resume).
   * @throws ConflictError for a node that is running, done or not reached, or a run that ended;
   * NotFoundError for an unknown run or node.
   */
  async failVisit(runId: string, nodeId: string, options: OperatorOptions = {}): Promise<Run> {
    this.assertOpen();
    return writes.failNode(this.p, runId, nodeId, options);
  }

  /**
   * Redrives a FAILED or CANCELLED run (DESIGN §6): new visits for what failed or was cancelled
   * (and for `from`, an earlier node to run again), for everything downstream, and for every
   * success a compensation undid; other successes are kept. The run gets a fresh TTL. A new
   * visit of a node whose visit did not succeed starts with that visit's durable steps
   * (DESIGN §14.1) unless `fresh_steps`; a node that succeeded and runs again starts with none.
   * @throws ConflictError for a run that is not FAILED or CANCELLED, that needs attention
   * without `force`, or whose key (DESIGN §17) another run is running or queued under;
   * NotFoundError for an unknown run or `from` node.
   */
  async retryRun(runId: string, options: { from?: string; force?: boolean; fresh_steps?: boolean } = {}): Promise<Run> {
    this.assertOpen();
    return writes.retryRun(this.p, runId, options);
  }

  /**
   * One action on every run a filter matches (DESIGN §16), at most `cap` (default 1000, at most
   * 10 000) a call: `cancel` applies to RUNNING runs, `retry` to FAILED and CANCELLED ones, both
   * to top-level runs only (a child follows its parent); `pause` to RUNNING runs not paused and
   * `resume` to paused ones, child runs included (a pause holds one run). Each run's action is
   * its own call (cancelRun, retryRun, pauseRun, resumeRun), so a run is wholly done or untouched; a run that changed since it was read is
   * listed in `refused` with the reason. With `dry_run`, counts them and changes nothing. Call
   * again while the answer says `more` (runs already done no longer match).
   * @example
   * const { matched, applied, more } = await engine.bulkRuns({
   *   filter: { workflow_id: "content-publish", tags: { customer: "acme" } },
   *   action: { kind: "cancel", reason: "customer left" },
   * });
   * @throws ValidationError for a bad filter, action or cap (nothing is done)
   */
  async bulkRuns(options: BulkOptions): Promise<BulkAnswer> {
    this.assertOpen();
    return bulkRuns(this, options);
  }

  /**
   * Forks a run (DESIGN §16): starts a new run of its workflow (`forked_from: { run_id, node_id }`)
   * that keeps, without running them again, the outputs of the source's visits before `from`
   * (and their durable steps), and runs `from` and everything downstream of it with the fork's
   * input and `payloads`. The source, finished or still running, is not changed. Its history
   * starts with `run.started` and `run.forked`, which names what was kept.
   * @example const fork = await engine.forkRun(run.run_id, { from: "draft", payloads: { draft: { tone: "formal" } } });
   * @throws NotFoundError for an unknown run; ConflictError for a child run or a map item run
   * (fork its root); ValidationError for a `from` the workflow has not, an input not of its
   * input_schema, a payload of a node kept or unknown, or kept nodes `version` has not.
   */
  async forkRun(runId: string, options: ForkRunOptions): Promise<Run> {
    this.assertOpen();
    return forkRun(this.p, runId, options);
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
    return pruneRuns(this.store, this.p.clock, options);
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
  async putSchedule(input: ScheduleInput, options: PutScheduleOptions = {}) {
    this.assertOpen();
    return schedules.putSchedule(this.p.schedules, input, options);
  }

  /** Schedules by schedule_id; of one workflow with `workflow_id`. */
  async listSchedules(options: ScheduleFilter = {}): Promise<Schedule[]> {
    return schedules.listSchedules(this.p.schedules, options);
  }

  /** A schedule with its next 5 fire times (epoch ms; none while paused). @throws NotFoundError */
  async getSchedule(scheduleId: string): Promise<schedules.ScheduleWithTimes> {
    return schedules.getSchedule(this.p.schedules, scheduleId);
  }

  /** Stops a schedule firing (next_fire_at null); a paused one is left as it is. @throws NotFoundError */
  async pauseSchedule(scheduleId: string): Promise<Schedule> {
    refuseNul({ schedule_id: scheduleId });
    this.assertOpen();
    return schedules.pauseSchedule(this.p.schedules, scheduleId);
  }

  /**
   * Fires a paused schedule again from its next slot after now: what passed while it was paused
   * is not caught up. An unpaused one is left as it is. @throws NotFoundError
   */
  async resumeSchedule(scheduleId: string): Promise<Schedule> {
    refuseNul({ schedule_id: scheduleId });
    this.assertOpen();
    return schedules.resumeSchedule(this.p.schedules, scheduleId);
  }

  /** Deletes a schedule; the runs it started keep their schedule_id. @throws NotFoundError */
  async deleteSchedule(scheduleId: string): Promise<void> {
    refuseNul({ schedule_id: scheduleId });
    this.assertOpen();
    return schedules.deleteSchedule(this.p.schedules, scheduleId);
  }

  /**
   * Newest first. `before` pages: pass the last run_id of the previous page.
   * @throws ValidationError for a `q` shorter than 3 characters (the text index is of trigrams).
   */
  async listRuns(filter: RunFilter = {}): Promise<Run[]> {
    return listRuns(this.store, filter);
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

  /**
   * Where each agent type stands against its rate limits and provider holds (DESIGN §17) across
   * the database: every type of this engine's `rateLimits`, and every type a provider's 429 holds.
   * `limited_until` is when a ready visit of the type may start at the earliest (null: now).
   */
  async rateLimitStates(): Promise<RateLimitState[]> {
    return rateLimitStates(this.store, this.p.rateLimits, this.p.clock.now());
  }

  listWorkflows(): Promise<{ id: string; version: number; created_at: number }[]> {
    return this.store.listWorkflows();
  }

  /**
   * The stored definition of a workflow version (latest by default): the document as registered
   * (it passed every check then), with its version. @throws NotFoundError
   */
  async getWorkflow(id: string, version?: number): Promise<{ id: string; version: number; definition: WorkflowInput }> {
    return this.p.registry.stored(id, version);
  }

  /**
   * Calls `listener` with every event this engine (or client) commits, of one run if `run_id` is
   * given, in order. With `from` (needs `run_id`): first every stored event of the run with
   * `seq >= from`, in seq order, then the live ones, with no gap and no event twice (by seq);
   * `from: 0` is the whole history. The replay reads the database, so it includes what other
   * processes wrote; live events are only this process's (on SQLite another process's engine
   * publishes its own: poll `listEvents` by seq to follow it). A listener that throws is logged.
   * Attempts' progress is among the events (`node.progress`, DESIGN §15: kept, with its `seq`,
   * replayed like the rest): `if (e.type === "node.progress") ...`.
   * @example const stop = engine.subscribe((e) => console.log(e.seq, e.type), { run_id: run.run_id, from: 0 });
   * @returns a function that unsubscribes (and stops a replay in progress)
   * @throws ValidationError for `from` without `run_id`, or a `from` that is not an integer >= 0
   */
  subscribe(listener: EventListener, filter: SubscribeFilter = {}): () => void {
    return this.p.subscribers.subscribe(listener, filter, this.p.readEvents);
  }

  /**
   * Resolves with the run once it has ended (SUCCEEDED, FAILED or CANCELLED). On a shared
   * database another engine may end it: the run is then also polled at the sweep interval.
   * `O`: the output's type, as the caller knows it (not checked).
   * @example const done = await engine.waitForRun<{ summary: string }>(run.run_id);
   */
  async waitForRun<O = Json>(runId: string): Promise<RunWithNodes<O>> {
    return (await waitForRun(this.p, runId)) as RunWithNodes<O>;
  }

  /**
   * @internal for createTestEngine's idle rule: `working` while a flush is queued or running or payloads
   * are resolving; `held` the attempts in flight here (a handler running, or its result being checked).
   */
  activity(): { working: boolean; held: { execution_id: string; attempt: number }[] } {
    const attempts = this.p.attempts.activity();
    return { working: this.p.dispatcher.working() || attempts.resolving, held: attempts.held };
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
    await closeEngine(this.p, this.heartbeat, Date.now() + (options.timeoutMs ?? 10_000));
  }

  private assertOpen(): void {
    if (this.closed) throw new EngineClosedError("the engine is closed; create a new engine with createEngine()");
  }
}
