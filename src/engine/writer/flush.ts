/**
 * One flush: everything the dispatcher queued, applied in ONE write transaction. Run states
 * are loaded once (or taken from the run cache) and shared by every input; the fence of
 * DESIGN §5 is checked here, then the pure scheduler changes the state, and what changed is
 * written once at the end, claims included.
 */

import { attemptOf, holds, runOfExecution } from "../../core/attempt.js";
import { type PastVisit, planCompensation } from "../../core/compensation.js";
import { cancelRefusal } from "../../core/preconditions.js";
import { emptyChanges, endRun, failVisit, type RunState, runState, startRunState } from "../../core/scheduler.js";
import type { Compensation, InboxEvent, NewEvent, Run, RunEvent, Visit } from "../../core/types.js";
import { MAX_CHILD_DEPTH } from "../../definition/kinds/workflow.js";
import { ConflictError, NotFoundError } from "../../errors.js";
import type { MapItemUpdate, ReadyNotice, RunRead, StoreTx, VisitKey } from "../../store/store.js";
import { CANCELS_PER_FLUSH, FLUSH_WORK_MS, ITEM_ROWS_PER_FLUSH, startsPerFlush } from "./bounded-work.js";
import { addRunUsage, announceReleased, releaseReservations } from "./budget.js";
import { claimForWorkers, claimReady, notifyOthers, takeHints } from "./claims.js";
import type { DispatcherOptions, RunRef } from "./dispatcher-options.js";
import { type AttemptRef, type Callback, type ClaimedTask, type ClaimInput, type Input, inputRuns } from "./inputs.js";
import { settleChildren, startChildren } from "./kinds/children.js";
import { publishEvent, sendEvent } from "./kinds/events.js";
import { continueHeldMaps, continueMap, startMaps, undoItems } from "./kinds/maps.js";
import { ClaimLimits, freedLimitedTypes } from "./limits.js";
import { applyResult, heartbeat, retry, review, workerHeartbeat } from "./results.js";
import type { RunCache } from "./run-cache.js";
import type { SlotOutcome } from "./schedules.js";
import { recover, recoverLost, sweepExpired } from "./sweep.js";

export interface FlushOutcome {
  events: RunEvent[];
  claimed: ClaimedTask[];
  unresolved: (VisitKey & { run?: RunRef })[];
  aborted: [string, string][];
  callbacks: (() => void)[];
  /** The next moment something falls due, to arm the wake-up timer. */
  nextDue: number | null;
  /** The transaction's time. */
  now: number;
  /** Dead engines whose attempts could not all be recovered (their runs were busy elsewhere). */
  unrecovered: string[];
  /** Dead engines this flush took over: how many attempts went back to RETRYING, ms since their last heartbeat (null: unknown, or it closed with them running). */
  tookOver: { engine_id: string; attempts: number; silent_ms: number | null }[];
  /** Agent types of visits this flush made ready and left unclaimed (for external workers). */
  waiting: string[];
  /** What became of each schedule slot this flush handled (engine/writer/schedules.ts), for the metrics. */
  slots: SlotOutcome[];
  /**
   * Work this flush left over for the next (bounded-work.ts): inputs to apply then, and whether
   * ready `workflow`/`map` visits wait unstarted. The dispatcher flushes again on the next turn of
   * the event loop, after what else is queued.
   */
  more: { inputs: Input[]; flush: boolean };
}

/**
 * One transaction's work. Run states are loaded once and shared by every input of the flush.
 * Its state is open to the flush-*.ts modules (results, claims, sweep), which are its parts.
 */
export class Flush {
  /** The runs this transaction read or changed. */
  readonly states = new Map<string, RunState>();
  /** Their revisions as the database has them (read, or raised by this transaction's write), for the run cache. */
  readonly revisions = new Map<string, number>();
  tx!: StoreTx;
  /** Runs started in this transaction: inserted together by `persist`. */
  newRuns: Run[] = [];
  /** External workers' claims of this flush: applied together, after the other inputs. */
  readonly workerClaims: ClaimInput[] = [];
  /** What to tell other engines is ready (`notifyOthers`), written with the rest. */
  notify: ReadyNotice[] = [];
  /** Ready visits other engines told of, in runs this transaction locked (`takeHints`). */
  readonly hinted: [RunState, Visit][] = [];
  /** Events published by key in this transaction (no run holds them): written with the rest. */
  readonly keyed: InboxEvent[] = [];
  /** Child runs whose parent attempt ended without a cancel (its timeout): cancelled by `settleChildren`. */
  readonly orphanedChildren: { run_id: string; compensate: boolean }[] = [];
  /** Child runs this flush cancelled, and those whose end it gave to their parent. */
  readonly cancelledChildren = new Set<string>();
  readonly settledChildren = new Set<string>();
  /**
   * What this flush may still start, write and cancel (bounded-work.ts): a count, and none once
   * it has worked FLUSH_WORK_MS (a slow machine starts fewer per flush, never answers later);
   * what it leaves over, the next flush continues.
   */
  private maxStarts = 0;
  private starts = 0;
  private cancels = CANCELS_PER_FLUSH;
  rowsLeft = ITEM_ROWS_PER_FLUSH;
  private readonly began = performance.now();
  // The time bound applies once the flush has started (cancelled) some: every flush makes progress.
  get startsLeft(): number {
    return this.starts < this.maxStarts && this.overTime() ? Math.min(0, this.starts) : this.starts;
  }
  set startsLeft(n: number) {
    this.starts = n;
  }
  get cancelsLeft(): number {
    return this.cancels < CANCELS_PER_FLUSH && this.overTime() ? Math.min(0, this.cancels) : this.cancels;
  }
  set cancelsLeft(n: number) {
    this.cancels = n;
  }
  private overTime(): boolean {
    return performance.now() - this.began > FLUSH_WORK_MS;
  }
  /** Inputs for the next flush: maps to go on with, cancels to carry down (deduplicated by execution_id). */
  readonly continued = new Map<string, Input>();
  /** Map items whose runs ended, written together before the maps they belong to go on (engine/writer/kinds/maps.ts). */
  readonly itemEnds: MapItemUpdate[] = [];
  /** Held map visits an item of which ended in this round, by execution_id, with their runs. */
  readonly mapsToAdvance = new Map<string, { rs: RunState; v: Visit }>();
  /** The earliest future due time among the rows this transaction wrote. */
  dueSoon: number | null = null;
  /** Budgets and usage of runs above claimed ones, read once per flush (engine/writer/budget.ts). */
  readonly budgets = new Map<string, Pick<Run, "run_id" | "usage" | "budget">>();
  /** What the concurrency limits leave room for, across engines (counted at the first limited claim). */
  readonly limits = new ClaimLimits(this);
  readonly out: FlushOutcome = {
    events: [],
    claimed: [],
    unresolved: [],
    aborted: [],
    callbacks: [],
    nextDue: null,
    now: 0,
    unrecovered: [],
    tookOver: [],
    waiting: [],
    slots: [],
    more: { inputs: [], flush: false },
  };

  constructor(
    readonly o: DispatcherOptions,
    readonly cache: RunCache,
    /** Agent types with ready visits waiting in the database; shared across flushes. */
    readonly backlog: Set<string>,
    readonly now: number,
    readonly claiming: boolean,
    /**
     * After a transaction whose commit may have happened (its outcome was lost): its inputs are
     * applied again, and the attempts it claimed, never started, are given back (`recoverLost`).
     */
    readonly lost: AttemptRef[] | null = null,
    /** Runs other engines said have ready visits of these agent types (NOTIFY), by run id. */
    readonly hints: ReadonlyMap<string, ReadonlySet<string>> = new Map(),
  ) {}

  /** The attempts this flush claimed so far (to give back if its commit's outcome is lost). */
  claimed(): AttemptRef[] {
    return this.out.claimed.map(({ execution_id, attempt }) => ({ execution_id, attempt }));
  }

  /**
   * @param takeOver the engine's first flush, or one after another engine died: held maps are
   * continued (their continuation was in the memory of an engine that is gone).
   */
  async run(
    tx: StoreTx,
    inputs: Input[],
    deadEngines: string[],
    sweep: boolean,
    takeOver = false,
  ): Promise<FlushOutcome> {
    this.tx = tx;
    this.out.now = this.now;
    this.maxStarts = this.starts = startsPerFlush(this.o.store.exclusive);
    // The runs the inputs change were locked as the transaction began (the dispatcher passes
    // `inputRuns` as its `lock`; later loads never wait); read them together.
    await this.preload(inputRuns(inputs));
    await takeHints(this);
    const dead = [...deadEngines];
    if (sweep && this.claiming && !this.o.store.exclusive) {
      dead.push(...(await tx.takeDeadEngines(this.o.engineId, this.now - this.o.engineTimeoutMs)));
    }
    await recover(this, dead);
    if (takeOver || dead.length > 0) await continueHeldMaps(this);
    await recoverLost(this);
    for (const input of inputs) await this.apply(input);
    await claimForWorkers(this);
    if (sweep) await sweepExpired(this);
    await this.planCompensations();
    // A limited type's attempt that ended may leave room for a visit waiting in the database.
    for (const type of freedLimitedTypes(this)) this.backlog.add(type);
    await releaseReservations(this); // attempts that ended leave room under their budgets
    if (this.claiming) await claimReady(this, sweep);
    await this.children();
    // Starts this flush had no room for: ready visits wait in the backlog, held maps in `continued`.
    this.out.more = { inputs: [...this.continued.values()], flush: this.startsLeft <= 0 || this.continued.size > 0 };
    notifyOthers(this);
    // Waiting workers may claim what a rate limit lets through now (a sweep: the timer of its next token).
    if (sweep) this.out.waiting.push(...this.limits.withTokens().filter((t) => !this.out.waiting.includes(t)));
    await this.limits.save();
    // A sweep reads the next due time after its write; any other flush ends with its write.
    await this.persist(!sweep);
    // A sweep asks the database for the next due time; other flushes only add due times, those
    // of the rows they wrote (an earlier one is armed already); a rate limit's next token too.
    const due = sweep ? await this.tx.nextDue(this.now) : this.dueSoon;
    const token = this.limits.nextToken;
    this.out.nextDue = due === null ? token : token === null ? due : Math.min(due, token);
    return this.out;
  }

  /**
   * Child runs (DESIGN §11.1) until nothing more follows: children asked for are started and
   * their first visits claimed; ended children end their parent attempts, ended parents cancel
   * their children (nested children: one round per level, bounded by the depth limit).
   */
  private async children(): Promise<void> {
    for (let round = 0; round <= MAX_CHILD_DEPTH * 2 + 2; round++) {
      const settled = await settleChildren(this);
      const started = this.claiming && ((await startChildren(this)) || (await startMaps(this)));
      const undoing = this.claiming && (await undoItems(this));
      if (!settled && !started && !undoing) return;
      await this.planCompensations();
      await releaseReservations(this);
      if (this.claiming) await claimReady(this, false);
    }
  }

  /**
   * Calls `start` for each visit a kind's `begin` asked this flush to start (`pick`: which set
   * of the run's changes: children, maps), once, while it is still current and ready; true when
   * there were any.
   */
  async eachAsked(
    pick: (rs: RunState) => Set<Visit>,
    start: (rs: RunState, v: Visit) => Promise<unknown>,
  ): Promise<boolean> {
    let started = false;
    for (const rs of [...this.states.values()]) {
      const set = pick(rs);
      if (set.size === 0) continue;
      const asked = [...set];
      set.clear();
      for (const v of asked) {
        if (!v.is_current || (v.state !== "PENDING" && v.state !== "RETRYING")) continue;
        await start(rs, v);
        started = true;
      }
    }
    return started;
  }

  /** Runs this transaction locked that it has not read yet, in one read (kept ones only if they changed). */
  async preload(runIds: string[]): Promise<void> {
    const missing = runIds.filter((id) => !this.states.has(id));
    if (missing.length === 0) return;
    for (const read of await this.tx.loadRuns(missing, this.cache.revisions(missing))) await this.take(read);
  }

  /**
   * The state of a run a load answered: built from the rows read, or the one kept in memory when
   * the database still has its revision.
   */
  async take(read: RunRead): Promise<RunState | undefined> {
    if ("unchanged" in read) {
      const kept = this.cache.get(read.run_id);
      // Unchanged is only answered for a revision the cache gave; without it, read the run.
      if (!kept) {
        const loaded = await this.tx.loadRun(read.run_id, { skipLocked: true });
        return loaded ? this.take(loaded) : undefined;
      }
      this.states.set(read.run_id, kept.state);
      this.revisions.set(read.run_id, kept.revision);
      return kept.state;
    }
    const { run, revision, visits, compensations } = read;
    const { graph } = await this.o.registry.get(run.workflow_id, run.workflow_version);
    const rs = runState(run, graph, visits, compensations);
    this.states.set(run.run_id, rs);
    this.revisions.set(run.run_id, revision);
    return rs;
  }

  private async apply(input: Input): Promise<unknown> {
    switch (input.kind) {
      case "start":
        return this.start(input.run, input.done);
      // An attempt's result, in process or a worker's report: one call (writer/results.ts).
      case "success":
      case "failure":
      case "fail_visit":
        return applyResult(this, input);
      case "report":
        return applyResult(this, input.result, input);
      case "usage": {
        // Later calls of the attempt make a new input from now on: this one's figures are final.
        input.taken = true;
        const rs = await this.loadExecution(input.execution_id);
        const a = rs ? attemptOf(rs, input.execution_id) : undefined;
        // Fenced like a result: an attempt that no longer holds its row adds nothing.
        if (!a || !holds(a, input.attempt)) return;
        return addRunUsage(this, input.usage_runs, input.usage, input.execution_id);
      }
      case "review":
        return review(this, input);
      case "send_event":
        return sendEvent(this, input);
      case "publish_event":
        return publishEvent(this, input);
      case "event": {
        const rs = await this.load(input.event.run_id);
        rs?.changes.events.push(input.event);
        return;
      }
      case "cancel": {
        const rs = await this.load(input.run_id);
        if (!rs) return input.done.reject(new NotFoundError(`run ${input.run_id} does not exist`));
        const refused = cancelRefusal(rs.run);
        if (refused) return input.done.reject(refused);
        const error = { message: input.reason ?? "cancelled", reason: "cancelled" };
        endRun(rs, "cancelled", error, this.now, { compensate: input.compensate });
        return this.answer(rs, input.done);
      }
      case "retry":
        return retry(this, input);
      case "continue_map":
        return continueMap(this, input);
      case "claim":
        this.workerClaims.push(input);
        return;
      case "heartbeat":
        return heartbeat(this, input);
      case "worker_heartbeat":
        return workerHeartbeat(this, input);
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
          v.concurrency_key = input.concurrency_key;
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
    this.revisions.set(run.run_id, 0);
    const started = { ...rs.run };
    this.out.callbacks.push(() => done.resolve(started));
  }

  /** Resolves a caller with the run as this transaction leaves it, once committed. */
  answer(rs: RunState, done: Callback<Run>): void {
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

  /** The run of an execution_id (a visit's or a compensation's). */
  async loadExecution(executionId: string): Promise<RunState | undefined> {
    const runId = runOfExecution(executionId);
    return runId === null ? undefined : this.load(runId);
  }

  async load(runId: string): Promise<RunState | undefined> {
    const known = this.states.get(runId);
    if (known) return known;
    // Never waits for a run another engine holds (its inputs' runs are locked already).
    const read = await this.tx.loadRun(runId, { skipLocked: true, known: this.cache.get(runId)?.revision });
    return read ? this.take(read) : undefined;
  }

  /**
   * Writes what every loaded run changed, and collects what to do after commit. `last`: the
   * transaction runs nothing after this write (it may carry the COMMIT).
   */
  async persist(last: boolean): Promise<void> {
    await this.planCompensations();
    await releaseReservations(this);
    announceReleased(this);
    // One write for the whole transaction: on a networked database each statement is a round trip.
    const runs: Run[] = [];
    const updated: Visit[] = [];
    const inserted: Visit[] = [];
    const compensations: Compensation[] = [];
    const events: NewEvent[] = [];
    const inbox: InboxEvent[] = this.keyed.splice(0);
    const due = (t: number | null) => {
      if (t !== null && t > this.now && (this.dueSoon === null || t < this.dueSoon)) this.dueSoon = t;
    };
    // A new run goes in as it is now; it needs no update.
    const started = new Set(this.newRuns.map((r) => r.run_id));
    const newRuns = this.newRuns.splice(0).map((r) => this.states.get(r.run_id)?.run ?? r);
    for (const r of newRuns) due(r.deadline_at);
    for (const rs of this.states.values()) {
      rs.inbox = undefined; // what this flush knew of the inbox: the next reads what it needs (by name)
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
      inbox.push(...c.inbox);
      for (const v of [...c.updated, ...c.inserted, ...c.compensations]) {
        due(v.ready_at);
        due(v.lease_expires_at);
      }
      for (const v of c.cancelled) this.out.aborted.push([v.execution_id, "cancelled"]);
      for (const v of c.readied) {
        if (v.payload === null && v.state === "PENDING") {
          // With what resolving needs of the run, so it reads nothing more than templates ask for.
          const { run_id, workflow_id, workflow_version, trace_id, input, parent } = rs.run;
          const run = { run_id, workflow_id, workflow_version, trace_id, input, parent };
          this.out.unresolved.push({ run_id: v.run_id, node_id: v.node_id, visit: v.visit, run });
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
    const written = await this.tx.write(batch, { last: last && inbox.length === 0 });
    for (const [runId, revision] of written.revisions) this.revisions.set(runId, revision);
    // After the runs they belong to are written. Rare: only events sent or delivered.
    if (inbox.length > 0) await this.tx.writeInbox(inbox);
    this.out.events.push(...written.events);
  }
}
