/**
 * The external-agent protocol (DESIGN §5): workers in any language, over the HTTP API, claim
 * ready visits of their agent types with a lease, heartbeat, and report success or failure.
 * Claims and reports are dispatcher inputs like any other, applied and fenced in a flush; a
 * report for an attempt the worker no longer holds is a ConflictError (409). A claim that finds
 * nothing waits (long poll) until a flush leaves visits of its types ready, another engine says
 * so, or the poll interval passes (a retry falling due announces nothing).
 */
import { route } from "../agents/task.js";
import { undoneExecutionId } from "../core/compensation.js";
import type { Json } from "../core/types.js";
import { NotFoundError, ValidationError } from "../errors.js";
import type { Store } from "../store/store.js";
import type { AttemptRunner, ResultOf } from "./attempts.js";
import type { Clock } from "./clock.js";
import type { Dispatcher } from "./dispatcher.js";
import { type ClaimedTask, type Input, parseExecutionId, REVIEW, type Report, type ReportAnswer } from "./flush.js";
import { randomHex } from "./ids.js";

/** A claimed task as an external worker receives it: DESIGN §5's fields and the lease. */
export type ExternalTask = ClaimedTask & { traceparent: string; lease_expires_at: number };

export interface ClaimRequest {
  agent_types: string[];
  /** Who holds the tasks (recorded as the visits' holder `worker:<id>`). */
  worker_id: string;
  /** @defaultValue 1 */
  max_tasks?: number;
  /** How long the lease lasts without a heartbeat (never past the node's timeout). @defaultValue 60 */
  lease_seconds?: number;
  /** How long to wait for a task when none is ready, at most 30. @defaultValue 0 */
  wait_seconds?: number;
  /** Aborted when the caller went away (its HTTP request closed): stop waiting, claim nothing more. */
  signal?: AbortSignal;
}

export const MAX_WAIT_SECONDS = 30;
export const MAX_TASKS = 100;

interface Waiter {
  types: ReadonlySet<string>;
  wake(): void;
}

/** What deciding a result's edges needs of its run; immutable, so kept from the claim to the report. */
type RunFacts = Pick<ClaimedTask, "run_id" | "input" | "trace_id" | "workflow_id" | "workflow_version">;

/** Claimed tasks whose run facts are kept (the oldest are forgotten first; a miss reads the run). */
const FACTS_KEPT = 10_000;

export class ExternalWorkers {
  private readonly waiters = new Set<Waiter>();
  private readonly facts = new Map<string, RunFacts>();

  constructor(
    private readonly o: {
      dispatcher: Dispatcher;
      attempts: AttemptRunner;
      store: Store;
      clock: Clock;
      /** How often a waiting claim looks again by itself, ms. */
      pollMs: number;
      /** True once the engine closes: waiting claims return empty. */
      closed: () => boolean;
    },
  ) {
    o.store.onReady(({ agentType }) => this.readyWaiting([agentType]));
  }

  /** Wakes the claims waiting for any of these agent types (`*`: all). */
  readyWaiting(agentTypes: string[]): void {
    for (const w of this.waiters) {
      if (agentTypes.some((t) => t === "*" || w.types.has(t))) w.wake();
    }
  }

  /**
   * Claims up to `max_tasks` ready visits of the agent types; with `wait_seconds`, waits for
   * some when none is ready. @throws ValidationError for a bad request.
   */
  async claim(request: ClaimRequest): Promise<ExternalTask[]> {
    const types = request.agent_types;
    if (!Array.isArray(types) || types.length === 0 || types.some((t) => typeof t !== "string" || t === "")) {
      throw new ValidationError("Claim is invalid", [
        { path: "agent_types", message: "must be a non-empty list of agent types" },
      ]);
    }
    if (types.includes(REVIEW)) {
      throw new ValidationError("Claim is invalid", [
        { path: "agent_types", message: `${REVIEW} nodes wait for a person's decision, not for a worker` },
      ]);
    }
    const max = request.max_tasks ?? 1;
    const leaseSeconds = request.lease_seconds ?? 60;
    const waitSeconds = request.wait_seconds ?? 0;
    const problems = [
      bad(max, 1, MAX_TASKS, "max_tasks", true),
      bad(leaseSeconds, 1, 24 * 3600, "lease_seconds", false),
      bad(waitSeconds, 0, MAX_WAIT_SECONDS, "wait_seconds", false),
    ].filter((p) => p !== null);
    if (problems.length > 0) throw new ValidationError("Claim is invalid", problems);

    const giveUpAt = this.o.clock.now() + waitSeconds * 1000;
    const gone = () => this.o.closed() || request.signal?.aborted === true;
    request.signal?.addEventListener("abort", () => this.readyWaiting(types), { once: true });
    for (;;) {
      if (gone()) return [];
      // Listening before claiming: a wake-up between the claim's commit and the wait is not lost.
      const waiting =
        waitSeconds > 0 ? this.waitFor(new Set(types), Math.min(this.o.pollMs, giveUpAt - this.o.clock.now())) : null;
      const tasks = await new Promise<ClaimedTask[]>((resolve, reject) =>
        this.o.dispatcher.push({
          kind: "claim",
          agent_types: types,
          holder: `worker:${request.worker_id}`,
          max,
          lease_ms: leaseSeconds * 1000,
          done: { resolve, reject },
        }),
      );
      if (!waiting || tasks.length > 0 || this.o.clock.now() >= giveUpAt || gone()) {
        waiting?.cancel();
        for (const t of tasks) this.remember(t);
        const ready = (await Promise.all(tasks.map((t) => this.withPayload(t)))).filter((t) => t !== null);
        return ready.map((t) => ({
          ...t,
          traceparent: `00-${t.trace_id}-${randomHex(8)}-01`,
          lease_expires_at: t.lease_expires_at ?? t.deadline_at,
        }));
      }
      await waiting.done;
    }
  }

  /** Renews the lease of an attempt the worker holds. @throws ConflictError when it no longer does. */
  heartbeat(executionId: string, request: { attempt: number; lease_seconds?: number }): Promise<ReportAnswer> {
    const leaseSeconds = request.lease_seconds ?? 60;
    const problem = bad(leaseSeconds, 1, 24 * 3600, "lease_seconds", false);
    if (problem) throw new ValidationError("Heartbeat is invalid", [problem]);
    return this.report(executionId, request.attempt, { kind: "heartbeat", lease_ms: leaseSeconds * 1000 });
  }

  /**
   * Reports success: `output`, and optionally the route `next` (DESIGN §4's precedence: an
   * agent's route first). The output is checked like an in-process agent's; the edges are
   * decided the same way. @throws ConflictError, ValidationError (output not JSON or too large)
   */
  async complete(
    executionId: string,
    request: { attempt: number; output?: unknown; next?: string | string[] },
  ): Promise<ReportAnswer> {
    let input: Input;
    if (undoneExecutionId(executionId) !== null) {
      if (request.next !== undefined) {
        throw new ValidationError("Report is invalid", [
          { path: "next", message: "a compensation has no edges to route" },
        ]);
      }
      input = this.o.attempts.compensationOutcome(
        { execution_id: executionId, attempt: request.attempt },
        request.output,
      );
    } else {
      const task = await this.taskOf(executionId, request.attempt);
      const value = request.next === undefined ? (request.output ?? null) : route(request.next, request.output ?? null);
      input = await this.o.attempts.outcome(task, value);
    }
    if (input.kind === "failure")
      throw new ValidationError("Output is invalid", [{ path: "output", message: input.error.message }]);
    if (input.kind === "success") {
      return this.report(executionId, request.attempt, {
        kind: "success",
        output: input.output,
        decision: input.decision,
      });
    }
    if (input.kind === "fail_visit") {
      return this.report(executionId, request.attempt, {
        kind: "fail_visit",
        reason: input.reason,
        error: input.error,
      });
    }
    throw new Error(`skein: unexpected outcome ${input.kind}`);
  }

  /** Reports failure; `retryable: false` fails the visit without retries. @throws ConflictError */
  fail(
    executionId: string,
    request: { attempt: number; error: { message: string; [key: string]: unknown }; retryable?: boolean },
  ): Promise<ReportAnswer> {
    const { message, ...details } = request.error;
    return this.report(executionId, request.attempt, {
      kind: "failure",
      error: {
        message,
        reason: "error",
        ...(Object.keys(details).length > 0 ? { details: details as Json } : {}),
      },
      retryable: request.retryable ?? true,
    });
  }

  private report(executionId: string, attempt: number, report: Report): Promise<ReportAnswer> {
    if (!Number.isInteger(attempt) || attempt < 1) {
      return Promise.reject(
        new ValidationError("Report is invalid", [
          { path: "attempt", message: "must be the attempt's number (1 or more)" },
        ]),
      );
    }
    return new Promise<ReportAnswer>((resolve, reject) =>
      this.o.dispatcher.push({ kind: "report", execution_id: executionId, attempt, report, done: { resolve, reject } }),
    );
  }

  /**
   * A compensation's task with its payload resolved (its templates see what it undoes), as an
   * in-process attempt gets it; null when that fails: the attempt is failed for good, as an
   * in-process one would be, and not handed out.
   */
  private async withPayload(t: ClaimedTask): Promise<ClaimedTask | null> {
    if (!t.compensates) return t;
    try {
      return { ...t, payload: await this.o.attempts.compensationPayload(t) };
    } catch (e) {
      const error = { message: e instanceof Error ? e.message : String(e), reason: "template_error" };
      this.report(t.execution_id, t.attempt, { kind: "failure", error, retryable: false }).catch(() => undefined);
      return null;
    }
  }

  private remember(t: ClaimedTask): void {
    const { run_id, input, trace_id, workflow_id, workflow_version } = t;
    this.facts.set(t.execution_id, { run_id, input, trace_id, workflow_id, workflow_version });
    if (this.facts.size > FACTS_KEPT) this.facts.delete(this.facts.keys().next().value as string);
  }

  /** What deciding the edges of a result needs: the visit's run and workflow. */
  private async taskOf(executionId: string, attempt: number): Promise<ResultOf> {
    const key = parseExecutionId(executionId);
    const facts = this.facts.get(executionId) ?? (key ? await this.o.store.getRun(key.run_id) : null);
    if (!key || !facts) throw new NotFoundError(`no task ${executionId}; use the execution_id of a claimed task`);
    const { run_id, input, trace_id, workflow_id, workflow_version } = facts;
    return {
      run_id,
      input,
      trace_id,
      workflow_id,
      workflow_version,
      node_id: key.node_id,
      attempt,
      execution_id: executionId,
    };
  }

  /** Resolves when a flush leaves visits of these types ready, or after `ms`. */
  private waitFor(types: ReadonlySet<string>, ms: number): { done: Promise<void>; cancel(): void } {
    let wake!: () => void;
    const done = new Promise<void>((resolve) => {
      wake = resolve;
    });
    const timer = this.o.clock.setTimeout(() => w.wake(), Math.max(0, ms));
    const w: Waiter = {
      types,
      wake: () => {
        this.waiters.delete(w);
        this.o.clock.clearTimeout(timer);
        wake();
      },
    };
    this.waiters.add(w);
    return { done, cancel: () => w.wake() };
  }
}

function bad(
  value: unknown,
  min: number,
  max: number,
  path: string,
  integer: boolean,
): { path: string; message: string } | null {
  const ok = typeof value === "number" && Number.isFinite(value) && value >= min && value <= max;
  if (ok && (!integer || Number.isInteger(value))) return null;
  return {
    path,
    message: `must be ${integer ? "an integer" : "a number"} from ${min} to ${max}, got ${JSON.stringify(value)}`,
  };
}
