/**
 * One flush: everything the dispatcher queued, applied in ONE write transaction. Run states
 * are loaded once (or taken from the run cache) and shared by every input; the fence of
 * DESIGN §5 is checked here, then the pure scheduler changes the state, and what changed is
 * written once at the end, claims included.
 */

import type { Task } from "../agents/task.js";
import {
  advanceCompensation,
  claimableCompensation,
  claimCompensation,
  compensationFailed,
  compensationSucceeded,
  interruptCompensation,
  type PastVisit,
  planCompensation,
  renewCompensationLease,
  undoneExecutionId,
} from "../core/compensation.js";
import { ENGINE_STARTED, kindOf } from "../core/kinds/index.js";
import { redrive } from "../core/redrive.js";
import {
  claim,
  type Decision,
  decideReview,
  emptyChanges,
  endRun,
  event,
  failAttempt,
  failVisit,
  interrupt,
  leaseExpiry,
  nodeOf,
  type ReviewDecision,
  type RunState,
  releaseCancelled,
  renewLease,
  runState,
  startRunState,
  succeed,
} from "../core/scheduler.js";
import { HELD_STATES } from "../core/states.js";
import type { Compensation, Json, NewEvent, Run, RunEvent, Visit, VisitError } from "../core/types.js";
import { ConflictError, ForbiddenError, NotFoundError } from "../errors.js";
import type { LoadedRun, ReadyNotice, StoreTx, VisitKey } from "../store/store.js";
import type { DispatcherOptions } from "./dispatcher.js";
import type { RunCache } from "./run-cache.js";

/** A task as claimed in the transaction: the agent's task without its signal and callbacks. */
export type ClaimedTask = Omit<Task, "signal" | "heartbeat" | "route" | "traceparent"> & {
  workflow_id: string;
  workflow_version: number;
  deadline_at: number;
  lease_expires_at: number | null;
};

export type Input =
  | { kind: "start"; run: Run; done: Callback<Run> }
  | { kind: "success"; execution_id: string; attempt: number; output: Json; decision: Decision }
  | { kind: "failure"; execution_id: string; attempt: number; error: VisitError; retryable: boolean }
  /** A failure of the visit itself, not retried: invalid_next, when_error. */
  | { kind: "fail_visit"; execution_id: string; attempt: number; reason: string; error: VisitError }
  | { kind: "payload"; key: VisitKey; payload: Json }
  | { kind: "payload_error"; key: VisitKey; error: VisitError }
  | { kind: "heartbeat"; execution_id: string; attempt: number; done: Callback<boolean> }
  | {
      kind: "review";
      run_id: string;
      node_id: string;
      execution_id?: string;
      decision: ReviewDecision;
      /** The edges an approval fires, worked out beforehand (JSONata is async), or why that failed. */
      next: Decision | { reason: string; message: string };
      done: Callback<Visit>;
    }
  | { kind: "cancel"; run_id: string; reason?: string; compensate: boolean; done: Callback<Run> }
  | { kind: "retry"; run_id: string; from: string | null; force: boolean; done: Callback<Run> }
  /** An event about a run that changes no state (a notifier that failed for good). */
  | { kind: "event"; event: NewEvent }
  /** An external worker claims ready visits of some agent types (DESIGN §5, HTTP API). */
  | {
      kind: "claim";
      agent_types: string[];
      holder: string;
      max: number;
      lease_ms: number;
      done: Callback<ClaimedTask[]>;
    }
  /**
   * An external worker's report or heartbeat: answered, or refused with a ForbiddenError (an
   * agent type the token may not report) or a ConflictError (an attempt it does not hold).
   */
  | {
      kind: "report";
      execution_id: string;
      attempt: number;
      report: Report;
      /** Who sends it: the holder its claim recorded (`worker:...`, DESIGN §13). */
      holder: string;
      /** The agent types the sender's token may report; null: any. */
      agent_types: readonly string[] | null;
      done: Callback<ReportAnswer>;
    };

/**
 * What an external worker reports for an attempt it holds. A success's `decision` is null when
 * it was not worked out because the attempt had already ended (DESIGN §13: a `when` is
 * evaluated only for the holder of a running attempt): such a report is never applied.
 */
export type Report =
  | { kind: "success"; output: Json; decision: Decision | null }
  | { kind: "failure"; error: VisitError; retryable: boolean }
  | { kind: "fail_visit"; reason: string; error: VisitError }
  | { kind: "heartbeat"; lease_ms: number };

export interface ReportAnswer {
  /** `duplicate`: the same report was applied before; nothing changed this time. */
  status: "accepted" | "duplicate";
  /** The attempt's lease after a heartbeat. */
  lease_expires_at: number | null;
}

type Callback<T> = { resolve(value: T): void; reject(error: unknown): void };

type ClaimInput = Extract<Input, { kind: "claim" }>;

/** The attempt an external report names (Flush.reportTarget). */
interface ReportTarget {
  rs: RunState;
  key: VisitKey;
  row: Visit | Compensation;
  /** The row's lease changed: write it. */
  touched(): void;
  apply(report: AppliedReport): void;
  /** Its holder's attempt returned late (fenced): a cancelled visit holds nothing any more. */
  returned(attempt: number): void;
}

/** A report that changes the attempt: a success has its edges decided. */
type AppliedReport =
  | { kind: "success"; output: Json; decision: Decision }
  | Extract<Report, { kind: "failure" | "fail_visit" }>;

/** One attempt of a visit or compensation row. */
export type AttemptRef = { execution_id: string; attempt: number };

const SWEEP_BATCH = 500;

export interface FlushOutcome {
  events: RunEvent[];
  claimed: ClaimedTask[];
  unresolved: VisitKey[];
  aborted: [string, string][];
  callbacks: (() => void)[];
  /** The next moment something falls due, to arm the wake-up timer. */
  nextDue: number | null;
  /** The transaction's time. */
  now: number;
  /** Dead engines whose attempts could not all be recovered (their runs were busy elsewhere). */
  unrecovered: string[];
  /** Agent types of visits this flush made ready and left unclaimed (for external workers). */
  waiting: string[];
}

/** One transaction's work. Run states are loaded once and shared by every input of the flush. */
export class Flush {
  /** The runs this transaction read or changed. */
  readonly states = new Map<string, RunState>();
  private tx!: StoreTx;
  /** Runs started in this transaction: inserted together by `persist`. */
  private newRuns: Run[] = [];
  /** External workers' claims of this flush: applied together, after the other inputs. */
  private readonly workerClaims: ClaimInput[] = [];
  /** What to tell other engines is ready (`notifyOthers`), written with the rest. */
  private notify: ReadyNotice[] = [];
  /** Ready visits other engines told of, in runs this transaction locked (`takeHints`). */
  private readonly hinted: [RunState, Visit][] = [];
  /** The earliest future due time among the rows this transaction wrote. */
  private dueSoon: number | null = null;
  private readonly out: FlushOutcome = {
    events: [],
    claimed: [],
    unresolved: [],
    aborted: [],
    callbacks: [],
    nextDue: null,
    now: 0,
    unrecovered: [],
    waiting: [],
  };

  constructor(
    private readonly o: DispatcherOptions,
    private readonly cache: RunCache,
    /** Agent types with ready visits waiting in the database; shared across flushes. */
    private readonly backlog: Set<string>,
    private readonly now: number,
    private readonly claiming: boolean,
    /**
     * After a transaction whose commit may have happened (its outcome was lost): its inputs are
     * applied again, and the attempts it claimed, never started, are given back (`recoverLost`).
     */
    private readonly lost: AttemptRef[] | null = null,
    /** Runs other engines said have ready visits of these agent types (NOTIFY), by run id. */
    private readonly hints: ReadonlyMap<string, ReadonlySet<string>> = new Map(),
  ) {}

  /** The attempts this flush claimed so far (to give back if its commit's outcome is lost). */
  claimed(): AttemptRef[] {
    return this.out.claimed.map(({ execution_id, attempt }) => ({ execution_id, attempt }));
  }

  async run(tx: StoreTx, inputs: Input[], deadEngines: string[], sweep: boolean): Promise<FlushOutcome> {
    this.tx = tx;
    this.out.now = this.now;
    // Another process (a client's review, cancel or redrive) changed runs this engine may keep in memory.
    if (await tx.writtenElsewhere()) this.cache.clear();
    // The runs the inputs change were locked as the transaction began (the dispatcher passes
    // `inputRuns` as its `lock`; later loads never wait); read them together.
    await this.preload(inputRuns(inputs));
    await this.takeHints();
    const dead = [...deadEngines];
    if (sweep && this.claiming && !this.o.store.exclusive) {
      dead.push(...(await tx.takeDeadEngines(this.o.engineId, this.now - this.o.engineTimeoutMs)));
    }
    await this.recover(dead);
    await this.recoverLost();
    for (const input of inputs) await this.apply(input);
    await this.claimForWorkers();
    if (sweep) await this.sweep();
    await this.planCompensations();
    if (this.claiming) await this.claimReady(sweep);
    this.notifyOthers();
    await this.persist();
    // A sweep asks the database for the next due time; other flushes only add due times, those
    // of the rows they wrote (an earlier one is armed already).
    this.out.nextDue = sweep ? await this.tx.nextDue(this.now) : this.dueSoon;
    return this.out;
  }

  /** Runs this transaction locked that are not in memory yet, in one read. */
  private async preload(runIds: string[]): Promise<void> {
    const missing = runIds.filter((id) => !this.states.has(id) && !this.cache.get(id));
    if (missing.length === 0) return;
    for (const loaded of await this.tx.loadRuns(missing)) await this.keepState(loaded);
  }

  private async keepState({ run, visits, compensations }: LoadedRun): Promise<void> {
    const { graph } = await this.o.registry.get(run.workflow_id, run.workflow_version);
    this.states.set(run.run_id, runState(run, graph, visits, compensations));
  }

  /**
   * Runs another engine said have ready visits of this engine's agent types (a NOTIFY that
   * named them): those the transaction locked as it began (no other held them) were read then,
   * and their ready visits are claimed with those this flush makes ready, without asking the
   * database. A run another transaction held is left to the claimable query: its agent types go
   * to the backlog.
   */
  private async takeHints(): Promise<void> {
    if (this.hints.size === 0) return;
    for (const loaded of await this.tx.tryLocked()) {
      if (!this.states.has(loaded.run.run_id)) await this.keepState(loaded);
    }
    for (const [runId, types] of this.hints) {
      const rs = this.states.get(runId);
      if (!rs) {
        for (const type of types) this.backlog.add(type);
        continue;
      }
      for (const v of rs.current.values()) {
        if (types.has(v.agent_type) && isClaimable(v, this.now)) this.hinted.push([rs, v]);
      }
    }
  }

  /** Ready visits in hand: made ready by this flush, or told of by another engine. */
  private *inHand(): Generator<[RunState, Visit]> {
    for (const rs of this.states.values()) for (const v of rs.changes.readied) yield [rs, v];
    yield* this.hinted;
  }

  /**
   * Ready visits this engine leaves waiting (no handler here, or over its limits) and new runs
   * of a client: external workers waiting for those types hear of them after commit, and other
   * engines at once (PostgreSQL NOTIFY).
   */
  private notifyOthers(): void {
    // By agent type: the runs to look in, or null: look in the database.
    const ready = new Map<string, Set<string> | null>();
    const add = (type: string, runId: string | null) => {
      const runs = ready.get(type);
      if (runs === null) return; // already: look in the database
      ready.set(type, runId === null ? null : (runs ?? new Set<string>()).add(runId));
    };
    for (const rs of this.states.values()) {
      for (const v of rs.changes.readied) {
        if (isClaimable(v, this.now)) add(v.agent_type, rs.run.run_id);
        // A client resolves no templates: an engine's sweep does, so wake one up.
        else if (!this.claiming && v.payload === null && v.state === "PENDING") add("*", null);
      }
      // Compensation rows are found by the sweep's query, not from a run id.
      const c = claimableCompensation(rs, this.now);
      if (c) add(c.agent_type, null);
    }
    this.out.waiting = [...ready.keys()].filter((t) => t !== "*");
    if (!this.o.store.exclusive) {
      this.notify = [...ready].map(([agentType, runs]) => ({ agentType, runIds: runs ? [...runs] : [] }));
    }
  }

  private async apply(input: Input): Promise<unknown> {
    // An in-process compensation's result (an external worker's is a report like a visit's).
    if (input.kind !== "report" && "attempt" in input && undoneExecutionId(input.execution_id) !== null) {
      return this.compensationResult(input);
    }
    switch (input.kind) {
      case "start":
        return this.start(input.run, input.done);
      case "success":
        return this.withAttempt(input, (rs, v) => succeed(rs, v, input.output, input.decision, this.now));
      case "failure":
        return this.withAttempt(input, (rs, v) =>
          failAttempt(rs, v, input.error, input.retryable, this.now, this.o.random),
        );
      case "fail_visit":
        return this.withAttempt(input, (rs, v) => failVisit(rs, v, input.reason, input.error, this.now));
      case "review":
        return this.review(input);
      case "event": {
        const rs = await this.load(input.event.run_id);
        rs?.changes.events.push(input.event);
        return;
      }
      case "cancel": {
        const rs = await this.load(input.run_id);
        if (!rs) return input.done.reject(new NotFoundError(`run ${input.run_id} does not exist`));
        if (rs.run.ended_at !== null) {
          const what = rs.run.status === "COMPENSATING" ? "is compensating" : `already ended ${rs.run.status}`;
          return input.done.reject(new ConflictError(`run ${input.run_id} ${what}; nothing to cancel`));
        }
        const error = { message: input.reason ?? "cancelled", reason: "cancelled" };
        endRun(rs, "cancelled", error, this.now, { compensate: input.compensate });
        return this.answer(rs, input.done);
      }
      case "retry":
        return this.retry(input);
      case "claim":
        this.workerClaims.push(input);
        return;
      case "report":
        return this.report(input);
      case "heartbeat": {
        const held = await this.withAttempt(input, (rs, v) => renewLease(rs, v, this.now), false);
        this.out.callbacks.push(() => input.done.resolve(held));
        return;
      }
      case "payload":
      case "payload_error": {
        const rs = await this.load(input.key.run_id);
        const v = rs?.current.get(input.key.node_id);
        // Resolved for a visit that has since moved on (loop reset, run ended): drop it.
        if (
          !rs ||
          !v ||
          v.visit !== input.key.visit ||
          v.state !== "PENDING" ||
          v.ready_at === null ||
          v.payload !== null
        )
          return;
        if (input.kind === "payload") {
          v.payload = input.payload;
          rs.changes.updated.add(v);
          rs.changes.readied.push(v); // claimable now
        } else {
          failVisit(rs, v, "template_error", input.error, this.now);
        }
        return;
      }
    }
  }

  private async start(run: Run, done: Callback<Run>): Promise<void> {
    // Applied again after a commit whose outcome was lost: the run may exist already.
    const committed = this.lost ? await this.load(run.run_id) : undefined;
    if (committed) {
      const existing = { ...committed.run };
      this.out.callbacks.push(() => done.resolve(existing));
      return;
    }
    if (run.idempotency_key !== null) {
      const existing =
        this.newRuns.find((r) => r.idempotency_key === run.idempotency_key) ??
        (await this.tx.runByIdempotencyKey(run.idempotency_key));
      if (existing) {
        if (existing.input_hash !== run.input_hash || existing.workflow_id !== run.workflow_id) {
          this.out.callbacks.push(() =>
            done.reject(
              new ConflictError(
                `idempotency_key "${run.idempotency_key}" was already used for run ${existing.run_id} with a different ` +
                  "workflow or input; use a new key for a new run",
              ),
            ),
          );
        } else {
          this.out.callbacks.push(() => done.resolve(existing));
        }
        return;
      }
    }
    const { graph } = await this.o.registry.get(run.workflow_id, run.workflow_version);
    const rs = startRunState(run, graph, this.now);
    this.newRuns.push(rs.run);
    this.states.set(run.run_id, rs);
    const started = { ...rs.run };
    this.out.callbacks.push(() => done.resolve(started));
  }

  /**
   * Applies `fn` to the visit of an attempt if the sender still holds it (the fence of DESIGN §5);
   * otherwise records `result.fenced` and changes nothing.
   */
  private async withAttempt(
    input: { kind: string; execution_id: string; attempt: number },
    fn: (rs: RunState, v: Visit) => void,
    recordFence = true,
  ): Promise<boolean> {
    const key = parseExecutionId(input.execution_id);
    const rs = key ? await this.load(key.run_id) : undefined;
    const v = key ? rs?.current.get(key.node_id) : undefined;
    if (rs && v && key && v.visit === key.visit && v.state === "RUNNING" && v.attempt === input.attempt) {
      fn(rs, v);
      return true;
    }
    if (rs && v && key && v.visit === key.visit && v.state === "CANCELLED" && v.attempt === input.attempt) {
      // The cancelled attempt returned: compensation, which waits for it, may start.
      releaseCancelled(rs, v);
      advanceCompensation(rs, this.now);
    }
    if (recordFence && rs) {
      event(rs, "result.fenced", key, this.now, {
        execution_id: input.execution_id,
        attempt: input.attempt,
        result: input.kind,
        reason:
          !v || v.visit !== key?.visit
            ? "superseded"
            : v.attempt !== input.attempt
              ? "stale_attempt"
              : `visit is ${v.state}`,
      });
    }
    return false;
  }

  /**
   * External workers' claims, all at once after the flush's other inputs: visits this flush
   * made ready first (not written yet), then the database's, oldest first, with one query per
   * agent type for every claim of the flush. Each claim takes up to its `max`, in the order the
   * claims arrived; the lease is the worker's, never past the deadline.
   */
  private async claimForWorkers(): Promise<void> {
    const claims = this.workerClaims.splice(0);
    if (claims.length === 0) return;
    const tasks = new Map(claims.map((c) => [c, [] as ClaimedTask[]]));
    const room = (c: ClaimInput) => c.max - (tasks.get(c)?.length ?? 0);
    // The claim set the node's lease (deadline, heartbeat_timeout); the worker's may only shorten it.
    const lease = (c: ClaimInput, row: Visit | Compensation) => {
      row.lease_expires_at = Math.min(row.lease_expires_at ?? Number.POSITIVE_INFINITY, this.now + c.lease_ms);
    };
    const take = async (c: ClaimInput, rs: RunState, v: Visit) => {
      claim(rs, v, c.holder, this.now);
      lease(c, v);
      tasks.get(c)?.push(await this.task(rs, v));
    };
    const takeCompensation = async (c: ClaimInput, rs: RunState, row: Compensation) => {
      claimCompensation(rs, row, c.holder, this.now);
      lease(c, row);
      tasks.get(c)?.push(await this.compensationTask(rs, row));
    };
    const taker = (agentType: string) => claims.find((c) => room(c) > 0 && c.agent_types.includes(agentType));
    for (const [rs, v] of this.inHand()) {
      const c = isClaimable(v, this.now) ? taker(v.agent_type) : undefined;
      if (c) await take(c, rs, v);
    }
    for (const rs of this.states.values()) {
      const row = claimableCompensation(rs, this.now);
      const c = row ? taker(row.agent_type) : undefined;
      if (row && c) await takeCompensation(c, rs, row);
    }
    const wanted = (type: string) =>
      claims.reduce((n, c) => n + (c.agent_types.includes(type) ? Math.max(0, room(c)) : 0), 0);
    for (const type of new Set(claims.flatMap((c) => c.agent_types))) {
      if (wanted(type) === 0) continue;
      const keys = await this.tx.claimable(type, this.now, wanted(type));
      await this.preload([...new Set(keys.map((k) => k.run_id))]);
      for (const key of keys) {
        const rs = await this.load(key.run_id);
        const v = rs?.current.get(key.node_id);
        const c = rs && v && v.visit === key.visit && isClaimable(v, this.now) ? taker(v.agent_type) : undefined;
        if (rs && v && c) await take(c, rs, v);
      }
      // Then what failed runs have to undo with this agent type, one row per run at a time.
      if (wanted(type) === 0) continue;
      const runIds = await this.tx.claimableCompensations(type, this.now, wanted(type));
      await this.preload(runIds);
      for (const runId of runIds) {
        const rs = await this.load(runId);
        const row = rs ? claimableCompensation(rs, this.now) : null;
        const c = row?.agent_type === type ? taker(type) : undefined;
        if (rs && row && c) await takeCompensation(c, rs, row);
      }
    }
    for (const c of claims) this.out.callbacks.push(() => c.done.resolve(tasks.get(c) ?? []));
  }

  /**
   * An external worker's report. Held means: the visit is RUNNING at that attempt, held by this
   * worker (DESIGN §13), and its lease has not passed (the sweep may not have expired it yet).
   * The same report sent again is answered `duplicate`; anything else for an attempt not held
   * is a conflict. Refusals for another token's or worker's attempt record nothing. Who held an
   * attempt that has ended is checked before the report is queued (ExternalWorkers.verify).
   */
  private async report(input: Extract<Input, { kind: "report" }>): Promise<void> {
    const { report, done } = input;
    const target = await this.reportTarget(input.execution_id);
    if (!target) return done.reject(new NotFoundError(`no task ${input.execution_id}; check the execution_id`));
    const { rs, row, key } = target;
    if (input.agent_types !== null && !input.agent_types.includes(row.agent_type)) {
      return done.reject(
        new ForbiddenError(
          `this token may report tasks of ${input.agent_types.join(", ")}, not ${row.agent_type} (${input.execution_id})`,
        ),
      );
    }
    if (row.attempt === input.attempt && row.holder !== null && row.holder !== input.holder) {
      return done.reject(new ConflictError(notHeldBy(input.execution_id, input.attempt, row.holder)));
    }
    if (row.visit !== key.visit) {
      return done.reject(
        new ConflictError(`attempt ${input.attempt} of ${input.execution_id} is no longer held: superseded`),
      );
    }
    const answer = (status: ReportAnswer["status"]) => {
      this.out.callbacks.push(() => done.resolve({ status, lease_expires_at: row.lease_expires_at }));
    };
    const expired = row.lease_expires_at !== null && row.lease_expires_at <= this.now;
    if (row.state === "RUNNING" && row.attempt === input.attempt && !expired) {
      if (report.kind === "heartbeat") {
        // As at the claim: the node's lease (deadline, heartbeat_timeout), shortened by the worker's.
        const node = rs.graph.nodes.get(row.node_id);
        const nodeLease = node ? leaseExpiry(node, row, this.now) : row.deadline_at;
        row.lease_expires_at = Math.min(nodeLease ?? Number.POSITIVE_INFINITY, this.now + report.lease_ms);
        target.touched();
      } else if (report.kind !== "success") target.apply(report);
      else if (report.decision !== null) target.apply({ ...report, decision: report.decision });
      else {
        // Checked as ended before it was queued, so it cannot be running again at this attempt.
        return done.reject(new ConflictError(`attempt ${input.attempt} of ${input.execution_id} is no longer held`));
      }
      return answer("accepted");
    }
    if (row.attempt === input.attempt && sameReport(row, report)) return answer("duplicate");
    const why =
      row.attempt !== input.attempt
        ? `its current attempt is ${row.attempt}`
        : row.state === "RUNNING"
          ? "its lease expired"
          : `it is ${row.state}`;
    if (report.kind !== "heartbeat") {
      event(rs, "result.fenced", key, this.now, {
        execution_id: input.execution_id,
        attempt: input.attempt,
        result: report.kind,
        reason: why,
        by: input.holder,
      });
      target.returned(input.attempt);
    }
    this.out.callbacks.push(() =>
      done.reject(new ConflictError(`attempt ${input.attempt} of ${input.execution_id} is no longer held: ${why}`)),
    );
  }

  /**
   * What an external report names: a visit's attempt, or a compensation row's (its execution_id
   * ends in `:compensate`), with how a result applies to each. Undefined when there is none.
   */
  private async reportTarget(executionId: string): Promise<ReportTarget | undefined> {
    const undone = undoneExecutionId(executionId);
    const key = parseExecutionId(undone ?? executionId);
    const rs = key ? await this.load(key.run_id) : undefined;
    if (!rs || !key) return undefined;
    if (undone === null) {
      const v = rs.current.get(key.node_id);
      if (!v) return undefined;
      return {
        rs,
        key,
        row: v,
        touched: () => rs.changes.updated.add(v),
        apply: (r) => {
          if (r.kind === "success") succeed(rs, v, r.output, r.decision, this.now);
          else if (r.kind === "failure") failAttempt(rs, v, r.error, r.retryable, this.now, this.o.random);
          else failVisit(rs, v, r.reason, r.error, this.now);
        },
        returned: (attempt) => {
          if (v.state !== "CANCELLED" || v.attempt !== attempt) return;
          // As for an in-process attempt: compensation, which waits for it, may start.
          releaseCancelled(rs, v);
          advanceCompensation(rs, this.now);
        },
      };
    }
    const c = rs.compensations.find((x) => x.node_id === key.node_id && x.visit === key.visit);
    if (!c) return undefined;
    return {
      rs,
      key,
      row: c,
      touched: () => rs.changes.compensations.add(c),
      apply: (r) => {
        if (r.kind === "success") compensationSucceeded(rs, c, r.output, this.now);
        else if (r.kind === "failure") compensationFailed(rs, c, r.error, r.retryable, this.now, this.o.random);
        else compensationFailed(rs, c, r.error, false, this.now, this.o.random, r.reason);
      },
      returned: () => {},
    };
  }

  /** A person's decision: exactly one wins, for the review round it names (DESIGN §5). */
  private async review(input: Extract<Input, { kind: "review" }>): Promise<void> {
    const { run_id, node_id, decision, done } = input;
    const rs = await this.load(run_id);
    const v = rs?.current.get(node_id);
    if (!rs || !v) return done.reject(new NotFoundError(`run ${run_id} has no node "${node_id}"`));
    if (v.state !== "IN_REVIEW" || (input.execution_id !== undefined && input.execution_id !== v.execution_id)) {
      const what = v.state === "IN_REVIEW" ? `its current round is ${v.execution_id}` : `it is ${v.state}`;
      return done.reject(
        new ConflictError(`node ${node_id} of run ${run_id} is not waiting for this decision: ${what}`),
      );
    }
    const refused = assigneeRefusal(node_id, (v.payload as { assignees?: unknown } | null)?.assignees, decision);
    if (refused) return done.reject(refused);
    // An admin deciding as itself is recorded as itself alone.
    const recorded = decision.admin === decision.by ? { ...decision, admin: null } : decision;
    if (decision.decision === "approve" && "reason" in input.next) {
      failVisit(rs, v, input.next.reason, { message: input.next.message, reason: input.next.reason }, this.now);
    } else {
      decideReview(rs, v, recorded, "kind" in input.next ? input.next : { kind: "none" }, this.now);
    }
    const decided = { ...v };
    this.out.callbacks.push(() => done.resolve(decided));
  }

  /** Attempts held by in-process agents of dead engines go back to RETRYING (DESIGN §7). */
  private async recover(deadEngines: string[]): Promise<void> {
    if (deadEngines.length === 0) return;
    const dead = new Set(deadEngines);
    for (const runId of await this.tx.compensatingRuns(SWEEP_BATCH)) {
      const rs = await this.load(runId);
      if (!rs) continue;
      for (const v of rs.current.values()) if (v.holder !== null && dead.has(v.holder)) releaseCancelled(rs, v);
      for (const c of rs.compensations) {
        if (c.state === "RUNNING" && c.holder !== null && dead.has(c.holder)) interruptCompensation(rs, c, this.now);
      }
      advanceCompensation(rs, this.now);
    }
    for (;;) {
      let recovered = 0;
      let busy = 0;
      for (const key of await this.tx.attemptsHeldBy(deadEngines, SWEEP_BATCH)) {
        const rs = await this.load(key.run_id);
        if (!rs) busy += 1;
        const v = rs?.current.get(key.node_id);
        if (rs && v?.visit === key.visit && v.state === "RUNNING") {
          interrupt(rs, v, this.now);
          recovered += 1;
        }
      }
      // Runs another engine holds right now: try those again on the next flush.
      if (busy > 0) this.out.unrecovered = deadEngines;
      if (recovered === 0) return;
      // Written now, so that the next query no longer finds them.
      await this.persist();
    }
  }

  /**
   * Attempts a transaction claimed before its commit's outcome was lost: if it committed, they
   * are RUNNING under this engine at that attempt but were never started. They go back to
   * RETRYING as a dead engine's would (DESIGN §7), and this flush's claims look for them.
   */
  private async recoverLost(): Promise<void> {
    for (const { execution_id, attempt } of this.lost ?? []) {
      const undone = undoneExecutionId(execution_id);
      const key = parseExecutionId(undone ?? execution_id);
      const rs = key ? await this.load(key.run_id) : undefined;
      if (!rs || !key) continue;
      const held = (a: { state: string; attempt: number; holder: string | null }) =>
        a.state === "RUNNING" && a.attempt === attempt && a.holder === this.o.engineId;
      if (undone !== null) {
        const c = rs.compensations.find((x) => x.node_id === key.node_id && x.visit === key.visit);
        if (c && held(c)) interruptCompensation(rs, c, this.now);
        continue;
      }
      const v = rs.current.get(key.node_id);
      if (v && v.visit === key.visit && held(v)) {
        interrupt(rs, v, this.now);
        this.backlog.add(v.agent_type); // ready in the database once written: claimed below
      }
    }
  }

  /** What fell due: expired attempts, expired runs, ready visits whose payload waits for templates. */
  private async sweep(): Promise<void> {
    for (const key of await this.tx.expiredAttempts(this.now, SWEEP_BATCH)) {
      const rs = await this.load(key.run_id);
      const v = rs?.current.get(key.node_id);
      const error = rs && v ? this.expired(rs, v) : null;
      if (rs && v && error) failAttempt(rs, v, error, true, this.now, this.o.random);
    }
    // Reviews and waits whose due time passed: their kind says what that means (a timeout, a wake-up).
    for (const key of await this.tx.expiredHolds(this.now, SWEEP_BATCH)) {
      const rs = await this.load(key.run_id);
      const v = rs?.current.get(key.node_id);
      if (!rs || v?.visit !== key.visit || !HELD_STATES.includes(v.state)) continue;
      rs.graph.nodes.get(v.node_id)?.kind.due?.(rs, v, this.now);
    }
    for (const runId of await this.tx.expiredRuns(this.now, SWEEP_BATCH)) {
      const rs = await this.load(runId);
      if (!rs || rs.run.ended_at !== null) continue;
      endRun(
        rs,
        "ttl",
        { message: "the run passed its timeout (the workflow's TTL)", reason: "run_timeout" },
        this.now,
      );
    }
    for (const runId of await this.tx.compensatingRuns(SWEEP_BATCH)) {
      const rs = await this.load(runId);
      if (!rs) continue;
      for (const c of rs.compensations) {
        const error = this.expired(rs, c);
        if (error) compensationFailed(rs, c, error, true, this.now, this.o.random);
      }
      advanceCompensation(rs, this.now);
    }
    this.out.unresolved.push(...(await this.tx.unresolved(this.now, SWEEP_BATCH)));
  }

  /**
   * A running attempt (of a visit or a compensation) whose lease or deadline passed: why it
   * failed, its signal queued to abort. Null while it still holds.
   */
  private expired(
    rs: RunState,
    a: Pick<Visit, "state" | "execution_id" | "node_id" | "attempt" | "deadline_at" | "lease_expires_at">,
  ): VisitError | null {
    if (a.state !== "RUNNING" || a.lease_expires_at === null || a.lease_expires_at > this.now) return null;
    const timedOut = a.deadline_at !== null && a.deadline_at <= this.now;
    this.out.aborted.push([a.execution_id, timedOut ? "timeout" : "lease_expired"]);
    const seconds = rs.graph.nodes.get(a.node_id)?.timeout;
    return timedOut
      ? { message: `attempt ${a.attempt} timed out after ${seconds} s`, reason: "timeout" }
      : { message: `attempt ${a.attempt} sent no heartbeat in time`, reason: "lease_expired" };
  }

  /** A compensation's result or heartbeat, fenced like a visit's. */
  private async compensationResult(
    input: Exclude<Extract<Input, { attempt: number }>, { kind: "report" }>,
  ): Promise<void> {
    const key = parseExecutionId(undoneExecutionId(input.execution_id) ?? "");
    const rs = key ? await this.load(key.run_id) : undefined;
    const c = rs?.compensations.find((x) => x.node_id === key?.node_id && x.visit === key.visit);
    const held = rs && c && c.state === "RUNNING" && c.attempt === input.attempt ? { rs, c } : null;
    if (input.kind === "heartbeat") {
      if (held) renewCompensationLease(held.rs, held.c, this.now);
      this.out.callbacks.push(() => input.done.resolve(held !== null));
      return;
    }
    if (!held) {
      if (rs)
        event(rs, "result.fenced", key, this.now, {
          execution_id: input.execution_id,
          attempt: input.attempt,
          result: input.kind,
        });
      return;
    }
    if (input.kind === "success") compensationSucceeded(held.rs, held.c, input.output, this.now);
    else if (input.kind === "failure") {
      compensationFailed(held.rs, held.c, input.error, input.retryable, this.now, this.o.random);
    } else compensationFailed(held.rs, held.c, input.error, false, this.now, this.o.random, input.reason);
  }

  /** A redrive (DESIGN §6): only a FAILED or CANCELLED run, and with `force` one that needs attention. */
  private async retry(input: Extract<Input, { kind: "retry" }>): Promise<void> {
    const rs = await this.load(input.run_id);
    if (!rs) return input.done.reject(new NotFoundError(`run ${input.run_id} does not exist`));
    const { status, needs_attention } = rs.run;
    if (status !== "FAILED" && status !== "CANCELLED") {
      return input.done.reject(
        new ConflictError(`run ${input.run_id} is ${status}; only a FAILED or CANCELLED run can be retried`),
      );
    }
    if (needs_attention && !input.force) {
      return input.done.reject(
        new ConflictError(
          `run ${input.run_id} needs attention: a compensation failed for good. Undo its effect by hand, then retry with force`,
        ),
      );
    }
    if (input.from !== null && !rs.graph.nodes.has(input.from)) {
      return input.done.reject(
        new NotFoundError(`workflow ${rs.run.workflow_id} has no node "${input.from}" to retry from`),
      );
    }
    redrive(rs, { from: input.from, force: input.force }, this.now);
    return this.answer(rs, input.done);
  }

  /** Resolves a caller with the run as this transaction leaves it, once committed. */
  private answer(rs: RunState, done: Callback<Run>): void {
    this.out.callbacks.push(() => done.resolve({ ...rs.run }));
  }

  /**
   * Plans the compensation of runs that ended with work to undo (DESIGN §6), from the run's
   * whole history: stored rows, overlaid with what this transaction changed in memory.
   */
  private async planCompensations(): Promise<void> {
    for (const rs of this.states.values()) {
      if (!rs.changes.plan) continue;
      const byKey = new Map<string, PastVisit>();
      for (const p of await this.tx.runHistory(rs.run.run_id)) byKey.set(`${p.visit.node_id}#${p.visit.visit}`, p);
      // Successes of this transaction have no stored event yet: they come after every stored one, in order.
      const fresh = new Map<string, number>();
      rs.changes.events.forEach((e, i) => {
        if (e.type === "node.succeeded") fresh.set(`${e.node_id}#${e.visit}`, 2 ** 50 + i);
      });
      for (const v of [...rs.changes.inserted, ...rs.changes.updated, ...rs.current.values()]) {
        const k = `${v.node_id}#${v.visit}`;
        byKey.set(k, { visit: v, successSeq: fresh.get(k) ?? byKey.get(k)?.successSeq ?? null });
      }
      planCompensation(rs, [...byKey.values()], this.now);
    }
  }

  /**
   * Claims ready visits for this engine's agents within the concurrency limits: first those
   * already waiting in the database (oldest first), then those this flush made ready, which are
   * not written yet; everything is written once, claimed, by the persist that follows.
   *
   * The database is asked only for agent types in the backlog (ready visits left waiting by an
   * earlier flush), or for every type on a sweep, which also catches retries that fell due.
   */
  private async claimReady(sweep: boolean): Promise<void> {
    const backlog = this.backlog;
    const inFlight = this.o.hooks.inFlight();
    let free = this.o.maxConcurrency - inFlight.total;
    const taken = new Map<string, number>();
    const room = (type: string) => {
      if (kindOf(type).start === "engine") return SWEEP_BATCH; // started by the engine, not attempts: no concurrency limit
      const limit = this.o.agentConcurrency[type];
      if (limit === undefined) return free;
      return Math.min(free, limit - (inFlight.byType.get(type) ?? 0) - (taken.get(type) ?? 0));
    };
    const take = async (rs: RunState, v: Visit) => {
      const { kind } = nodeOf(rs, v.node_id);
      if (kind.begin) return kind.begin(rs, v, this.now);
      claim(rs, v, this.o.engineId, this.now);
      this.out.claimed.push(await this.task(rs, v));
      free -= 1;
      taken.set(v.agent_type, (taken.get(v.agent_type) ?? 0) + 1);
    };
    const types = [...this.o.agentTypes().filter((t) => !ENGINE_STARTED.includes(t)), ...ENGINE_STARTED];
    for (const type of types) {
      if (!sweep && !backlog.has(type)) continue;
      const n = room(type);
      if (n <= 0) {
        backlog.add(type);
        continue;
      }
      const keys = await this.tx.claimable(type, this.now, n);
      await this.preload([...new Set(keys.map((k) => k.run_id))]); // locked by the claim: one read for all
      for (const key of keys) {
        const rs = await this.load(key.run_id);
        const v = rs?.current.get(key.node_id);
        if (rs && v && v.visit === key.visit && isClaimable(v, this.now)) await take(rs, v);
      }
      if (keys.length < n) backlog.delete(type);
      else backlog.add(type);
    }
    for (const [rs, v] of this.inHand()) {
      if (!isClaimable(v, this.now) || !types.includes(v.agent_type)) continue;
      if (room(v.agent_type) > 0) await take(rs, v);
      else backlog.add(v.agent_type);
    }
    for (const rs of this.states.values()) {
      // A compensating run's next row; one left over a limit is found again by the sweep.
      const c = claimableCompensation(rs, this.now);
      if (c && types.includes(c.agent_type) && room(c.agent_type) > 0) {
        claimCompensation(rs, c, this.o.engineId, this.now);
        this.out.claimed.push(await this.compensationTask(rs, c));
        free -= 1;
        taken.set(c.agent_type, (taken.get(c.agent_type) ?? 0) + 1);
      }
    }
  }

  /** The task of a compensation: the visit it undoes is `compensates`; its payload is resolved at dispatch. */
  private async compensationTask(rs: RunState, c: Compensation): Promise<ClaimedTask> {
    const current = rs.current.get(c.node_id);
    const v =
      current?.visit === c.visit
        ? current
        : await this.tx.getVisit({ run_id: rs.run.run_id, node_id: c.node_id, visit: c.visit });
    return {
      run_id: rs.run.run_id,
      node_id: c.node_id,
      agent_type: c.agent_type,
      visit: c.visit,
      attempt: c.attempt,
      execution_id: c.execution_id,
      payload: null,
      input: rs.run.input,
      deps: {},
      trigger: null,
      trace_id: rs.run.trace_id,
      workflow_id: rs.run.workflow_id,
      workflow_version: rs.run.workflow_version,
      deadline_at: c.deadline_at ?? this.now,
      lease_expires_at: c.lease_expires_at,
      compensates: {
        execution_id: v?.execution_id ?? undoneExecutionId(c.execution_id) ?? c.execution_id,
        output: v?.output ?? null,
        error: (v?.error ?? null) as Json | null,
      },
    };
  }

  private async task(rs: RunState, v: Visit): Promise<ClaimedTask> {
    const node = rs.graph.nodes.get(v.node_id);
    const deps: ClaimedTask["deps"] = {};
    for (const d of node?.depends_on ?? []) {
      const dv = rs.current.get(d);
      if (dv) deps[d] = { status: dv.state, output: dv.output, error: dv.error as Json | null };
    }
    let trigger: ClaimedTask["trigger"] = null;
    if (v.trigger) {
      const { node_id, visit } = v.trigger;
      // The trigger may be the current visit, one this flush superseded (a loop-back's source:
      // changed in memory, not written yet), or an older row.
      const same = (x: Visit) => x.node_id === node_id && x.visit === visit;
      const current = rs.current.get(node_id);
      const t =
        (current && same(current) ? current : undefined) ??
        [...rs.changes.updated].find(same) ??
        (await this.tx.getVisit({ run_id: rs.run.run_id, node_id, visit }));
      if (t) trigger = { node_id, visit, status: t.state, output: t.output, error: t.error as Json | null };
    }
    return {
      run_id: rs.run.run_id,
      node_id: v.node_id,
      agent_type: v.agent_type,
      visit: v.visit,
      attempt: v.attempt,
      execution_id: v.execution_id,
      payload: v.payload ?? {},
      input: rs.run.input,
      deps,
      trigger,
      trace_id: rs.run.trace_id,
      workflow_id: rs.run.workflow_id,
      workflow_version: rs.run.workflow_version,
      deadline_at: v.deadline_at ?? this.now,
      lease_expires_at: v.lease_expires_at,
    };
  }

  private async load(runId: string): Promise<RunState | undefined> {
    const known = this.states.get(runId) ?? this.cache.get(runId);
    if (known) {
      this.states.set(runId, known);
      return known;
    }
    // Never waits for a run another engine holds (its inputs' runs are locked already).
    const loaded = await this.tx.loadRun(runId, { skipLocked: true });
    if (!loaded) return undefined;
    const { graph } = await this.o.registry.get(loaded.run.workflow_id, loaded.run.workflow_version);
    const rs = runState(loaded.run, graph, loaded.visits, loaded.compensations);
    this.states.set(runId, rs);
    return rs;
  }

  /** Writes what every loaded run changed, and collects what to do after commit. */
  private async persist(): Promise<void> {
    await this.planCompensations();
    // One write for the whole transaction: on a networked database each statement is a round trip.
    const runs: Run[] = [];
    const updated: Visit[] = [];
    const inserted: Visit[] = [];
    const compensations: Compensation[] = [];
    const events: NewEvent[] = [];
    const due = (t: number | null) => {
      if (t !== null && t > this.now && (this.dueSoon === null || t < this.dueSoon)) this.dueSoon = t;
    };
    // A new run goes in as it is now; it needs no update.
    const started = new Set(this.newRuns.map((r) => r.run_id));
    const newRuns = this.newRuns.splice(0).map((r) => this.states.get(r.run_id)?.run ?? r);
    for (const r of newRuns) due(r.deadline_at);
    for (const rs of this.states.values()) {
      const c = rs.changes;
      if (c.inserted.size === 0 && c.updated.size === 0 && c.events.length === 0 && !c.runUpdated) continue;
      if (c.runUpdated || c.ended) {
        rs.run.updated_at = this.now;
        if (!started.has(rs.run.run_id)) runs.push(rs.run);
        if (rs.run.ended_at === null) due(rs.run.deadline_at);
      }
      updated.push(...c.updated);
      inserted.push(...c.inserted);
      compensations.push(...c.compensations);
      events.push(...c.events);
      for (const v of [...c.updated, ...c.inserted, ...c.compensations]) {
        due(v.ready_at);
        due(v.lease_expires_at);
      }
      for (const v of c.cancelled) this.out.aborted.push([v.execution_id, "cancelled"]);
      for (const v of c.readied) {
        if (v.payload === null && v.state === "PENDING") {
          this.out.unresolved.push({ run_id: v.run_id, node_id: v.node_id, visit: v.visit });
        }
      }
      rs.changes = emptyChanges();
    }
    const batch = {
      insertRuns: newRuns,
      updateRuns: runs,
      updateVisits: updated,
      insertVisits: inserted,
      compensations,
      events,
      notify: this.notify,
    };
    const written = await this.tx.write(batch);
    this.out.events.push(...written);
  }
}

/** The runs that inputs name, sorted (the lock order): the flush's transaction locks them as it begins. */
export function inputRuns(inputs: Input[]): string[] {
  const ids = new Set<string>();
  for (const input of inputs) {
    if ("run_id" in input) ids.add(input.run_id);
    else if ("key" in input) ids.add(input.key.run_id);
    else if ("execution_id" in input) {
      const key = parseExecutionId(undoneExecutionId(input.execution_id) ?? input.execution_id);
      if (key) ids.add(key.run_id);
    } else if (input.kind === "event") ids.add(input.event.run_id);
  }
  return [...ids].sort();
}

/** Ready, resolved and still waiting for an attempt (in memory, which may be ahead of the database). */
function isClaimable(v: Visit, now: number): boolean {
  return (
    v.is_current &&
    (v.state === "PENDING" || v.state === "RETRYING") &&
    v.ready_at !== null &&
    v.ready_at <= now &&
    v.payload !== null
  );
}

/** `run_id:node_id:visit` → its parts (run ids may not contain ':' but node ids never do). */
export function parseExecutionId(executionId: string): VisitKey | null {
  const last = executionId.lastIndexOf(":");
  const middle = executionId.lastIndexOf(":", last - 1);
  if (last < 0 || middle < 0) return null;
  const visit = Number(executionId.slice(last + 1));
  if (!Number.isInteger(visit) || visit < 1) return null;
  return { run_id: executionId.slice(0, middle), node_id: executionId.slice(middle + 1, last), visit };
}

/** Why a report for an attempt another holder has is refused (who holds it is not told). */
export function notHeldBy(executionId: string, attempt: number, holder: string): string {
  const who = holder.startsWith("worker:") ? "another worker claimed it" : "an engine runs it in process";
  return `attempt ${attempt} of ${executionId} is not held by this worker: ${who}`;
}

/** The report that left the visit as it is: sent again by a worker that missed the answer. */
function sameReport(v: Pick<Visit, "state" | "output" | "error">, report: Report): boolean {
  if (report.kind === "success") {
    return v.state === "SUCCEEDED" && JSON.stringify(v.output) === JSON.stringify(report.output);
  }
  if (report.kind === "heartbeat") return false;
  return (v.state === "RETRYING" || v.state === "FAILED") && v.error?.message === report.error.message;
}

/**
 * Why `decision` may not decide a review with these `assignees` (null: it may). Fails closed
 * (DESIGN §13): assignees that are anything but a list (or absent) let nobody decide, and an
 * admin decides only *as* one of the assignees.
 */
function assigneeRefusal(nodeId: string, assignees: unknown, decision: ReviewDecision): ForbiddenError | null {
  if (assignees === undefined || assignees === null) return null;
  if (!Array.isArray(assignees)) {
    return new ForbiddenError(
      `nobody may decide ${nodeId}: its assignees are not a list of names; fix the workflow's payload.assignees`,
    );
  }
  if (assignees.includes(decision.by)) return null;
  const names = assignees.join(", ");
  if (decision.admin !== null && decision.admin === decision.by) {
    return new ForbiddenError(
      `${decision.admin} is not an assignee of ${nodeId}: an admin decides as one of its assignees; choose one with by (one of: ${names})`,
    );
  }
  return new ForbiddenError(
    `${decision.by ?? "an anonymous reviewer"} may not decide ${nodeId}: assignees are ${names}`,
  );
}
