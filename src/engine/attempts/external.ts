/**
 * The external-agent protocol (DESIGN §5): workers in any language, over the HTTP API, claim
 * ready visits of their agent types with a lease, heartbeat, and report success or failure.
 * Claims and reports are inputs submitted to the writer like any other, applied and fenced in a
 * flush (a report's result by the same call as an in-process one, writer/results.ts); a
 * report for an attempt the worker no longer holds is a ConflictError (409). A claim that finds
 * nothing waits (long poll) until a flush leaves visits of its types ready, another engine says
 * so, or the poll interval passes (a retry falling due announces nothing).
 *
 * A claimed attempt is bound to its holder (DESIGN §13): `worker:<token name>/<worker_id>`
 * (`worker:<worker_id>` without a token). Heartbeats and reports must come from that holder,
 * for an agent type its token may claim; anything else is refused and changes nothing. A
 * report's `when` is evaluated only once its sender is known to hold the running attempt.
 */
import { route } from "../../agents/task.js";
import type { Clock } from "../../clock.js";
import { itemKeyOf, notHeldBy, parseExecutionId } from "../../core/attempt.js";
import { isEmptyUsage, usageProblem } from "../../core/budget.js";
import { undoneExecutionId } from "../../core/compensation.js";
import type { Json, Usage } from "../../core/types.js";
import { kindOf } from "../../definition/kinds/index.js";
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from "../../errors.js";
import type { StepRow, Store, VisitKey } from "../../store/store.js";
import type { WorkflowRegistry } from "../registry.js";
import type { AttemptResult, ClaimedTask, ReportAnswer, Submit } from "../writer/inputs.js";
import { RATE_LIMITED } from "../writer/rates.js";
import { AttemptHolders } from "./attempt-holders.js";
import { ClaimWaiters } from "./claim-waiters.js";
import {
  badNumber,
  badWorkerId,
  type ClaimRequest,
  type CompleteRequest,
  checkReport,
  type ExternalTask,
  type FailRequest,
  type HeartbeatRequest,
  holderOf,
  MAX_TASKS,
  MAX_WAIT_SECONDS,
  type ProgressRequest,
  type RecordedStep,
  type StepAnswer,
  type StepRequest,
  type WorkerIdentity,
} from "./external-requests.js";
import { refuseRoute } from "./outcomes.js";
import type { ProgressStreams } from "./progress.js";
import type { AttemptRunner } from "./runner.js";
import { stepNameProblem, stepOutput } from "./steps.js";
import { TaskFacts } from "./task-facts.js";
import { TaskLimiter, type TaskLimits } from "./task-limits.js";

export class ExternalWorkers {
  private readonly waiters: ClaimWaiters;
  private readonly facts: TaskFacts;
  private readonly holders: AttemptHolders;
  private readonly limiter: TaskLimiter;

  constructor(
    private readonly o: {
      /** Where claims, reports and heartbeats go: the writer's queue. */
      submit: Submit;
      attempts: AttemptRunner;
      registry: WorkflowRegistry;
      store: Store;
      clock: Clock;
      progress: ProgressStreams;
      /** Largest step output, in bytes of JSON (the engine's maxPayloadBytes). */
      maxOutputBytes: number;
      limits: TaskLimits;
      /** How often a waiting claim looks again by itself, ms. */
      pollMs: number;
      /** True once the engine closes: waiting claims return empty. */
      closed: () => boolean;
      /** A worker claimed, heartbeated or reported these agent types: they are served (served-types.ts). */
      workerSeen?: (agentTypes: readonly string[]) => void;
    },
  ) {
    this.waiters = new ClaimWaiters(o.clock);
    this.facts = new TaskFacts(o.store);
    o.store.onReady(({ agentType }) => this.readyWaiting([agentType]));
    this.holders = new AttemptHolders(o.store);
    this.limiter = new TaskLimiter(o.limits, o.clock);
  }

  /** Wakes the claims waiting for any of these agent types (`*`: all). */
  readyWaiting(agentTypes: string[]): void {
    this.waiters.readyWaiting(agentTypes);
  }

  /**
   * Claims up to `max_tasks` ready visits of the agent types; with `wait_seconds`, waits for
   * some when none is ready.
   * @throws ValidationError for a bad request; ForbiddenError for agent types the token may not
   *   claim; LimitError over its token's rate or the long-poll caps
   */
  async claim(request: ClaimRequest): Promise<ExternalTask[]> {
    const types = request.agent_types;
    if (!Array.isArray(types) || types.length === 0 || types.some((t) => typeof t !== "string" || t === "")) {
      throw new ValidationError("Claim is invalid", [
        { path: "agent_types", message: "must be a non-empty list of agent types" },
      ]);
    }
    // Engine-started kinds, and built-in agents that run only in the engine (http).
    const engineOnly = types.map(kindOf).find((k) => k.notClaimable !== undefined);
    if (engineOnly) {
      throw new ValidationError("Claim is invalid", [
        { path: "agent_types", message: `${engineOnly.name} nodes ${engineOnly.notClaimable}, not for a worker` },
      ]);
    }
    const max = request.max_tasks ?? 1;
    const leaseSeconds = request.lease_seconds ?? 60;
    const waitSeconds = request.wait_seconds ?? 0;
    const problems = [
      badWorkerId(request.worker_id),
      badNumber(max, 1, MAX_TASKS, "max_tasks", true),
      badNumber(leaseSeconds, 1, 24 * 3600, "lease_seconds", false),
      badNumber(waitSeconds, 0, MAX_WAIT_SECONDS, "wait_seconds", false),
    ].filter((p) => p !== null);
    if (problems.length > 0) throw new ValidationError("Claim is invalid", problems);
    const allowed = request.token?.agent_types;
    const refused = allowed ? types.filter((t) => !allowed.includes(t)) : [];
    if (allowed && refused.length > 0) {
      throw new ForbiddenError(
        `this token may claim ${allowed.join(", ")}, not ${refused.join(", ")}; ask for a token that lists them`,
      );
    }
    this.limiter.take(request.token?.name);
    this.o.workerSeen?.(types);
    const release = waitSeconds > 0 ? this.limiter.wait(request.token?.name) : null;
    try {
      return await this.claimWaiting(request, types, holderOf(request), max, leaseSeconds, waitSeconds);
    } finally {
      release?.();
    }
  }

  private async claimWaiting(
    request: ClaimRequest,
    types: string[],
    holder: string,
    max: number,
    leaseSeconds: number,
    waitSeconds: number,
  ): Promise<ExternalTask[]> {
    const giveUpAt = this.o.clock.now() + waitSeconds * 1000;
    const gone = () => this.o.closed() || request.signal?.aborted === true;
    request.signal?.addEventListener("abort", () => this.readyWaiting(types), { once: true });
    for (;;) {
      if (gone()) return [];
      // Listening before claiming: a wake-up between the claim's commit and the wait is not lost.
      const waiting =
        waitSeconds > 0
          ? this.waiters.waitFor(new Set(types), Math.min(this.o.pollMs, giveUpAt - this.o.clock.now()))
          : null;
      const tasks = await new Promise<ClaimedTask[]>((resolve, reject) =>
        this.o.submit({
          kind: "claim",
          agent_types: types,
          holder,
          max,
          lease_ms: leaseSeconds * 1000,
          done: { resolve, reject },
        }),
      );
      if (!waiting || tasks.length > 0 || this.o.clock.now() >= giveUpAt || gone()) {
        waiting?.cancel();
        for (const t of tasks) this.remember(t, holder);
        const ready = (await Promise.all(tasks.map((t) => this.withPayload(t, holder)))).filter((t) => t !== null);
        return this.withSteps(await Promise.all(ready.map((t) => this.handedOut(t, holder))));
      }
      await waiting.done;
    }
  }

  /** The tasks with the steps their visits recorded (DESIGN §14.1), read together. */
  private async withSteps(tasks: ExternalTask[]): Promise<ExternalTask[]> {
    if (tasks.length === 0) return tasks;
    const byExecution = new Map<string, RecordedStep[]>();
    for (const { execution_id, name, output, attempt } of await this.o.store.stepsOf(
      tasks.map((t) => t.execution_id),
    )) {
      const list = byExecution.get(execution_id) ?? [];
      list.push({ name, output, attempt });
      byExecution.set(execution_id, list);
    }
    return tasks.map((t) => {
      const steps = byExecution.get(t.execution_id);
      return steps ? { ...t, steps } : t;
    });
  }

  /**
   * Records a durable step of an attempt the worker holds (DESIGN §14.1), checked like a report;
   * a name recorded before answers that record (`duplicate`), unchanged.
   * @throws ConflictError when it does not hold the attempt; ForbiddenError for an agent type
   *   its token may not claim; NotFoundError; ValidationError for a bad name or output
   */
  async step(executionId: string, request: StepRequest): Promise<StepAnswer> {
    this.checked(executionId, request, "Step is invalid");
    const badName = stepNameProblem(request.name);
    if (badName !== null) throw new ValidationError("Step is invalid", [{ path: "name", message: badName }]);
    const checked = stepOutput(request.name, request.output, this.o.maxOutputBytes);
    if ("problem" in checked)
      throw new ValidationError("Step is invalid", [{ path: "output", message: checked.problem }]);
    const { output, text } = checked;
    const row = await new Promise<StepRow>((resolve, reject) =>
      this.o.submit({
        kind: "step",
        execution_id: executionId,
        attempt: request.attempt,
        name: request.name,
        output,
        size: Buffer.byteLength(text),
        sender: { holder: holderOf(request), agent_types: request.token?.agent_types ?? null },
        done: { resolve, reject },
      }),
    );
    const status = row.attempt === request.attempt && JSON.stringify(row.output) === text ? "recorded" : "duplicate";
    return { status, output: row.output, attempt: row.attempt };
  }

  /** A claimed task as the worker gets it: its attempt span starts here, and its traceparent is that span's. */
  private async handedOut(claimed: ClaimedTask, holder: string): Promise<ExternalTask> {
    // The worker fills secrets in from its own: it is told where they go, never their values.
    const { graph } = await this.o.registry.get(claimed.workflow_id, claimed.workflow_version);
    const uses = claimed.compensates ? [] : (graph.nodes.get(claimed.node_id)?.secretUses ?? []);
    const { traceparent } = this.o.attempts.spans.startAttempt(claimed, holder);
    const { run_traceparent: _, usage_runs: __, expected_tokens: ___, ...task } = claimed;
    return {
      ...task,
      traceparent,
      lease_expires_at: task.lease_expires_at ?? task.deadline_at,
      ...(uses.length > 0 ? { secrets: uses.map((u) => ({ at: [...u.at], names: [...u.names] })) } : {}),
    };
  }

  /**
   * Renews the lease of an attempt the worker holds.
   * @throws ConflictError when it does not hold it; ForbiddenError for an agent type its token
   *   may not claim; LimitError over its token's rate
   */
  async heartbeat(executionId: string, request: HeartbeatRequest): Promise<ReportAnswer> {
    const leaseSeconds = request.lease_seconds ?? 60;
    const problems = [
      ...checkReport(executionId, request),
      badNumber(leaseSeconds, 1, 24 * 3600, "lease_seconds", false),
    ].filter((p) => p !== null);
    if (problems.length > 0) throw new ValidationError("Heartbeat is invalid", problems);
    this.limiter.take(request.token?.name);
    // Only a running attempt's lease is renewed, and the flush checks its holder: nothing to verify first.
    const answer = await new Promise<ReportAnswer>((resolve, reject) =>
      this.o.submit({
        kind: "worker_heartbeat",
        execution_id: executionId,
        attempt: request.attempt,
        lease_ms: leaseSeconds * 1000,
        holder: holderOf(request),
        agent_types: request.token?.agent_types ?? null,
        done: { resolve, reject },
      }),
    );
    // A busy worker claims nothing, but still serves its types (a task handed out here: its type is known).
    const type = this.holders.agentTypeOf(executionId, request.attempt);
    if (type !== undefined) this.o.workerSeen?.([type]);
    return answer;
  }

  /**
   * Partial output of an attempt the worker holds (DESIGN §11.6), delivered live and throttled
   * per attempt like an in-process agent's: checked like a heartbeat (holder, token), but read
   * only, never a write. `delivered: false` when the attempt no longer runs (its value dropped).
   * @throws ConflictError when another holds (or held) it; ForbiddenError for an agent type its
   *   token may not claim; NotFoundError; LimitError over its token's rate
   */
  async progress(executionId: string, request: ProgressRequest): Promise<{ delivered: boolean }> {
    const key = this.checked(executionId, request, "Progress is invalid");
    const holder = holderOf(request);
    // The holder's stream, checked a moment ago, costs no read and no share of the token's rate
    // (a worker streaming many tasks must not starve its own heartbeats); anything else is checked.
    let checkedNow: string | undefined;
    if (!this.o.progress.heldBy(executionId, request.attempt, holder)) {
      this.limiter.take(request.token?.name);
      if (!(await this.verify(executionId, key, request, true))) {
        this.o.progress.end(executionId, request.attempt);
        return { delivered: false };
      }
      checkedNow = holder;
    }
    const run = await this.facts.runOf(executionId, key.run_id);
    if (!run) throw new NotFoundError(`no task ${executionId}; check the execution_id`);
    const source = { ...key, attempt: request.attempt, execution_id: executionId, trace_id: run.trace_id };
    if (!this.o.progress.offer(source, request.progress, checkedNow)) {
      throw new ValidationError("Progress is invalid", [
        { path: "progress", message: "must be JSON within the engine's payload size limit" },
      ]);
    }
    return { delivered: true };
  }

  /**
   * Reports success: `output`, and optionally the route `next` (DESIGN §4's precedence: an
   * agent's route first). The output is checked like an in-process agent's; the edges are
   * decided the same way, only once the sender is known to hold the running attempt.
   * @throws ConflictError, ForbiddenError, NotFoundError, ValidationError (output not JSON or too large)
   */
  async complete(executionId: string, request: CompleteRequest): Promise<ReportAnswer> {
    const key = this.checked(executionId, request, "Report is invalid");
    const at = { execution_id: executionId, attempt: request.attempt };
    let result: AttemptResult;
    if (undoneExecutionId(executionId) !== null) {
      if (request.next !== undefined) {
        throw new ValidationError("Report is invalid", [
          { path: "next", message: "a compensation has no edges to route" },
        ]);
      }
      await this.verify(executionId, key, request, false);
      result = this.o.attempts.outcomes.compensationOutcome(at, request.output);
    } else {
      const task = await this.facts.taskOf(executionId, key, request.attempt);
      const { graph } = await this.o.registry.get(task.workflow_id, task.workflow_version);
      const node = graph.nodes.get(key.node_id);
      if (!node) {
        throw new NotFoundError(`no task ${executionId}: its run has no node "${key.node_id}"; check the execution_id`);
      }
      // Deciding runs code (a decide hook, `when` expressions): only for the holder of a running attempt.
      const runsCode =
        request.next === undefined &&
        (node.def.decide !== undefined || (node.successCases ?? []).some((c) => c.when !== null));
      const running = await this.verify(executionId, key, request, runsCode);
      if (request.next !== undefined) refuseRoute(graph, node, request.next);
      if (!running) {
        // Ended: this can only be the same report again (duplicate) or a late one (409); its usage is not applied.
        const late: AttemptResult = { kind: "success", ...at, output: jsonOf(request.output), decision: null };
        return this.push(late, holderOf(request), request.token?.agent_types ?? null);
      }
      const value = request.next === undefined ? (request.output ?? null) : route(request.next, request.output ?? null);
      result = await this.o.attempts.outcomes.outcome(task, value);
    }
    if (result.kind === "failure")
      throw new ValidationError("Output is invalid", [{ path: "output", message: result.error.message }]);
    return this.report(request, result);
  }

  /**
   * Reports failure; `retryable: false` fails the visit without retries.
   * @throws ConflictError, ForbiddenError, NotFoundError
   */
  async fail(executionId: string, request: FailRequest): Promise<ReportAnswer> {
    const key = this.checked(executionId, request, "Report is invalid");
    await this.verify(executionId, key, request, false);
    const { message, retry_after_ms, rate_limited, ...details } = request.error;
    if (retry_after_ms !== undefined && !(Number.isSafeInteger(retry_after_ms) && (retry_after_ms as number) >= 0)) {
      throw new ValidationError("Report is invalid", [
        {
          path: "error.retry_after_ms",
          message: `must be a non-negative integer of milliseconds (when to retry), got ${JSON.stringify(retry_after_ms)}`,
        },
      ]);
    }
    if (rate_limited !== undefined && typeof rate_limited !== "boolean") {
      throw new ValidationError("Report is invalid", [
        {
          path: "error.rate_limited",
          message: `must be true (the service answered 429) or false, got ${JSON.stringify(rate_limited)}`,
        },
      ]);
    }
    return this.report(request, {
      kind: "failure",
      execution_id: executionId,
      attempt: request.attempt,
      error: {
        message,
        // A service's 429: with retry_after_ms it holds the agent type (writer/rates.ts).
        reason: rate_limited === true ? RATE_LIMITED : "error",
        ...(Object.keys(details).length > 0 ? { details: details as Json } : {}),
        ...(retry_after_ms === undefined ? {} : { retry_after_ms: retry_after_ms as number }),
      },
      retryable: request.retryable ?? true,
    });
  }

  /** The visit an execution id names. @throws ValidationError for a malformed id, worker_id or attempt */
  private checked(
    executionId: string,
    request: WorkerIdentity & { attempt: number; usage?: unknown },
    what: string,
  ): VisitKey {
    const problems = checkReport(executionId, request);
    const badUsage = request.usage === undefined ? null : usageProblem(request.usage);
    if (badUsage) problems.push({ path: "usage", message: badUsage });
    // A map item's execution_id is its map visit's and `~<index>`: its visit is the map's.
    const key = itemKeyOf(executionId) ?? parseExecutionId(undoneExecutionId(executionId) ?? executionId);
    if (problems.length > 0 || !key) throw new ValidationError(what, problems);
    return key;
  }

  /**
   * Checks that the sender held the attempt it reports (DESIGN §13) before anything is
   * evaluated or queued. Refusals record nothing. With `needRunning`, answers whether the
   * attempt still runs (else true: the flush fences it either way).
   * @throws NotFoundError, ForbiddenError (an agent type its token may not claim), ConflictError
   */
  private async verify(
    executionId: string,
    key: VisitKey,
    request: WorkerIdentity & { attempt: number },
    needRunning: boolean,
  ): Promise<boolean> {
    // The engine's clock judges leases on SQLite; on PostgreSQL the database's does, in the flush.
    const now = this.o.store.exclusive ? this.o.clock.now() : null;
    const facts = await this.holders.find(executionId, key, request.attempt, needRunning, now);
    if (!facts) throw new NotFoundError(`no task ${executionId}; check the execution_id`);
    const allowed = request.token?.agent_types;
    if (allowed && !allowed.includes(facts.agent_type)) {
      throw new ForbiddenError(
        `this token may report tasks of ${allowed.join(", ")}, not ${facts.agent_type} (${executionId})`,
      );
    }
    // After the agent type: a token that may not report this task never makes the engine read its history.
    const holder =
      facts.holder === undefined ? await this.holders.startedBy(executionId, key, request.attempt) : facts.holder;
    if (holder === null) {
      throw new ConflictError(`attempt ${request.attempt} of ${executionId} was never claimed; check the attempt`);
    }
    if (holder !== holderOf(request)) {
      throw new ConflictError(notHeldBy(executionId, request.attempt, holder));
    }
    this.o.workerSeen?.([facts.agent_type]); // a report: its worker serves the type
    return facts.running !== false;
  }

  /** Queues a worker's result, with the usage it sent (DESIGN §12): applied only if the result is. */
  private async report(
    who: WorkerIdentity & { attempt: number; usage?: Usage },
    result: AttemptResult,
  ): Promise<ReportAnswer> {
    const usage = who.usage !== undefined && !isEmptyUsage(who.usage) ? { ...who.usage } : null;
    const runs = usage ? await this.facts.usageRunsOf(result.execution_id) : [];
    // For its type's token window (rates.ts): what the claim took, and what the worker says it used.
    const tokens = {
      expected: this.facts.expectedTokensOf(result.execution_id, result.attempt),
      used: (usage?.tokens_in ?? 0) + (usage?.tokens_out ?? 0),
    };
    return this.push({ ...result, tokens }, holderOf(who), who.token?.agent_types ?? null, usage, runs);
  }

  private push(
    result: AttemptResult,
    holder: string,
    agentTypes: readonly string[] | null,
    usage: Usage | null = null,
    usageRuns: string[] = [],
  ): Promise<ReportAnswer> {
    return new Promise<ReportAnswer>((resolve, reject) =>
      this.o.submit({
        kind: "report",
        result,
        holder,
        agent_types: agentTypes,
        usage,
        usage_runs: usageRuns,
        done: { resolve, reject },
      }),
    );
  }

  /**
   * A compensation's task with its payload resolved (its templates see what it undoes), as an
   * in-process attempt gets it; null when that fails: the attempt is failed for good, as an
   * in-process one would be, and not handed out.
   */
  private async withPayload(t: ClaimedTask, holder: string): Promise<ClaimedTask | null> {
    if (t.item && t.payload === null) {
      const resolved = await this.o.attempts.payloads.item({ ...t, item: t.item });
      if ("payload" in resolved) return { ...t, payload: resolved.payload };
      const error = { message: resolved.problem, reason: "template_error" };
      const failure: AttemptResult = {
        kind: "fail_visit",
        execution_id: t.execution_id,
        attempt: t.attempt,
        reason: "template_error",
        error,
      };
      this.push(failure, holder, null).catch(() => undefined);
      return null;
    }
    if (!t.compensates) return t;
    try {
      return { ...t, payload: await this.o.attempts.payloads.compensation(t) };
    } catch (e) {
      const error = { message: e instanceof Error ? e.message : String(e), reason: "template_error" };
      const failure: AttemptResult = {
        kind: "failure",
        execution_id: t.execution_id,
        attempt: t.attempt,
        error,
        retryable: false,
      };
      this.push(failure, holder, null).catch(() => undefined);
      return null;
    }
  }

  private remember(t: ClaimedTask, holder: string): void {
    this.facts.remember(t);
    this.holders.remember(t.execution_id, t.attempt, t.agent_type, holder);
  }
}

/** A report's output as sent, for comparing with the stored one (it is not applied). */
function jsonOf(value: unknown): Json {
  return (value ?? null) as Json;
}
