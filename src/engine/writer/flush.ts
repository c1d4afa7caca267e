/**
 * One flush: everything the dispatcher queued, applied in ONE write transaction. Run states
 * are loaded once (or taken from the run cache) and shared by every input; the fence of
 * DESIGN §5 is checked here, then the pure scheduler changes the state, and what changed is
 * written once at the end, claims included.
 */

import { type AttemptKey, attemptOf, holds, itemKeyOf, parseExecutionId, runOfExecution } from "../../core/attempt.js";
import { itemExecutionId } from "../../core/kinds/map.js";
import { failVisitRefusal, operatorFailure, pause, pauseRefusal, resume } from "../../core/pause.js";
import { cancelRefusal } from "../../core/preconditions.js";
import type { LoadedItem } from "../../core/run-state.js";
import {
  currentVisit,
  emptyChanges,
  endRun,
  executionId,
  failVisit,
  type RunState,
  runState,
} from "../../core/scheduler.js";
import type { Compensation, InboxEvent, MapItem, NewEvent, Run, Visit } from "../../core/types.js";
import type { CompiledNode } from "../../definition/graph.js";
import { MAX_CHILD_DEPTH } from "../../definition/kinds/workflow.js";
import { NotFoundError } from "../../errors.js";
import type { ItemKey, ReadyNotice, RunRead, StepRow, StoreTx, VisitKey } from "../../store/store.js";
import { itemWorkflowId } from "../registry.js";
import { WorkBounds } from "./bounded-work.js";
import { addRunUsage, Budget } from "./budget.js";
import { Claims } from "./claims.js";
import type { FlushContext, FlushOutcome } from "./context.js";
import type { DispatcherOptions } from "./dispatcher-options.js";
import { fork } from "./fork.js";
import { type AttemptRef, type Callback, type Input, itemsOf, runsToLock } from "./inputs.js";
import { Events } from "./kinds/events.js";
import { type KindSteps, kindSteps } from "./kinds/index.js";
import { ClaimLimits, freedLimitedTypes } from "./limits.js";
import { migrate } from "./migrate.js";
import { planCompensations } from "./plan-compensations.js";
import { applyResult, heartbeat, recordProgress, recordStep, retry, review, workerHeartbeat } from "./results.js";
import type { RunCache } from "./run-cache.js";
import { RunKeys } from "./run-keys.js";
import { startRun } from "./start-run.js";
import { Sweep } from "./sweep.js";

/**
 * One transaction's work. Run states are loaded once and shared by every input of the flush.
 * What every step shares is the context (context.ts), which the flush is; each step (claims,
 * sweep, limits, budget, events, the kinds' steps) is built with it and keeps its own state.
 */
export class Flush implements FlushContext {
  /** The runs this transaction read or changed. */
  readonly states = new Map<string, RunState>();
  /** Their revisions as the database has them (read, or raised by this transaction's write), for the run cache. */
  readonly revisions = new Map<string, number>();
  /** Runs started in this transaction: inserted together by `persist`. */
  readonly newRuns: Run[] = [];
  notify: ReadyNotice[] = [];
  readonly work: WorkBounds;
  /** Item workflows' nodes this flush looked up (`itemNode`). */
  private readonly itemNodes = new Map<string, CompiledNode>();
  /** Steps attempts recorded (`recordStep`), written by `persist`. */
  private readonly steps: { row: StepRow; done: Callback<StepRow> }[] = [];
  /** Steps to copy once the runs are written (copySteps). */
  private readonly stepCopies: [VisitKey, VisitKey][] = [];
  /** The earliest future due time among the rows this transaction wrote. */
  private dueSoon: number | null = null;
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
    holds: [],
    more: { inputs: [], flush: false },
  };
  /** What the concurrency limits leave room for, across engines (counted at the first limited claim). */
  private readonly limits: ClaimLimits;
  private readonly budget: Budget;
  private readonly claims: Claims;
  private readonly events: Events;
  private readonly sweeps: Sweep;
  private readonly keys: RunKeys;
  /** The steps of the kinds the engine starts, by kind name (kinds/index.ts). */
  private readonly kinds: KindSteps;

  constructor(
    readonly tx: StoreTx,
    readonly o: DispatcherOptions,
    readonly cache: RunCache,
    readonly backlog: Set<string>,
    readonly now: number,
    readonly claiming: boolean,
    readonly lost: AttemptRef[] | null = null,
    readonly hints: ReadonlyMap<string, ReadonlySet<string>> = new Map(),
  ) {
    this.work = new WorkBounds(o.store.exclusive);
    this.limits = new ClaimLimits(this);
    this.budget = new Budget(this);
    this.events = new Events(this);
    this.kinds = kindSteps(this, this.budget);
    this.claims = new Claims(this, this.limits, this.budget, this.kinds.steps);
    this.keys = new RunKeys(this);
    this.sweeps = new Sweep(this, this.kinds.children, this.kinds.steps, this.keys);
  }

  /** The attempts this flush claimed so far (to give back if its commit's outcome is lost). */
  claimed(): AttemptRef[] {
    return this.out.claimed.map(({ execution_id, attempt }) => ({ execution_id, attempt }));
  }

  /**
   * @param takeOver the engine's first flush, or one after another engine died: held maps are
   * continued (their continuation was in the memory of an engine that is gone).
   */
  async run(inputs: Input[], deadEngines: string[], sweep: boolean, takeOver = false): Promise<FlushOutcome> {
    const { tx, claims, sweeps, budget } = this;
    this.out.now = this.now;
    if (
      onlySteps(inputs) &&
      !sweep &&
      !takeOver &&
      deadEngines.length === 0 &&
      this.lost === null &&
      this.hints.size === 0
    ) {
      return this.recordStepsOnly(inputs);
    }
    // The runs the inputs change were locked as the transaction began (the dispatcher passes
    // `runsToLock` as its `lock`; later loads never wait); read them together.
    await this.preload(runsToLock(inputs, this.lost));
    const items = itemsOf(inputs, this.lost);
    if (items.length > 0) await this.loadItems(items);
    await claims.takeHints();
    const dead = [...deadEngines];
    if (sweep && this.claiming && !this.o.store.exclusive) {
      dead.push(...(await tx.takeDeadEngines(this.o.engineId, this.now - this.o.engineTimeoutMs)));
    }
    await sweeps.recover(dead);
    if (takeOver || dead.length > 0) for (const step of this.kinds.steps.values()) await step.takeOver?.();
    await sweeps.recoverLost();
    for (const input of inputs) await this.apply(input);
    await claims.claimForWorkers();
    if (sweep) await sweeps.sweepExpired();
    await planCompensations(this);
    // A limited type's attempt that ended may leave room for a visit waiting in the database.
    for (const type of freedLimitedTypes(this)) this.backlog.add(type);
    // So may tokens an attempt took and did not use, given back to its type's window.
    for (const type of this.limits.rates.freed) this.backlog.add(type);
    await budget.release(); // attempts that ended leave room under their budgets
    if (this.claiming) await claims.claimReady(sweep);
    await this.rounds();
    // Starts this flush had no room for: ready visits wait in the backlog, held maps in their step's leftovers.
    const more: Input[] = [];
    for (const step of this.kinds.steps.values()) if (step.leftOver) more.push(...step.leftOver());
    this.out.more = { inputs: more, flush: this.work.startsLeft <= 0 || more.length > 0 };
    claims.notifyOthers();
    // Waiting workers may claim what a rate limit or an ended hold lets through now (a sweep: the timer of its room).
    const { rates } = this.limits;
    if (sweep) this.out.waiting.push(...rates.withRoom().filter((t) => !this.out.waiting.includes(t)));
    await rates.save();
    // A sweep reads the next due time after its write; any other flush ends with its write.
    await this.persist(!sweep);
    // A sweep asks the database for the next due time; other flushes only add due times, those
    // of the rows they wrote (an earlier one is armed already); when a rate-limited or held type has room too.
    const due = sweep ? await tx.nextDue(this.now) : this.dueSoon;
    if (this.claiming) rates.armWaiting(this.backlog);
    const room = rates.nextRoom;
    this.out.nextDue = due === null ? room : room === null ? due : Math.min(due, room);
    return this.out;
  }

  /**
   * The work of the kinds the engine starts (DESIGN §11.1), round after round until nothing
   * more follows: child runs and map items asked for are started and their first visits
   * claimed; ended children end their parent attempts, ended parents cancel their children
   * (nested children: one round per level, bounded by the depth limit).
   */
  private async rounds(): Promise<void> {
    const { steps } = this.kinds;
    for (let round = 0; round <= MAX_CHILD_DEPTH * 2 + 2; round++) {
      let changed = false;
      for (const step of steps.values()) if (step.round && (await step.round())) changed = true;
      // Keyed runs that ended: the next run queued for each key begins (DESIGN §17).
      if (await this.keys.release()) changed = true;
      if (this.claiming && (await this.startAsked())) changed = true;
      if (this.claiming) for (const step of steps.values()) if (step.undo && (await step.undo())) changed = true;
      if (!changed) return;
      await planCompensations(this);
      await this.budget.release();
      if (this.claiming) await this.claims.claimReady(false);
    }
  }

  /**
   * Hands each visit a kind's `begin` asked this flush to start (`Changes.starts`) to the step
   * of its kind, once, while it is still current and ready; true when there were any.
   */
  private async startAsked(): Promise<boolean> {
    let started = false;
    for (const rs of [...this.states.values()]) {
      const set = rs.changes.starts;
      if (set.size === 0) continue;
      const asked = [...set];
      set.clear();
      for (const v of asked) {
        if (!v.is_current || (v.state !== "PENDING" && v.state !== "RETRYING")) continue;
        // A visit's agent_type is its node's kind name.
        await this.kinds.steps.get(v.agent_type)?.start(rs, v);
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
        return startRun(this, input.run, input.flow, this.keys, input.done);
      // An attempt's result, in process or a worker's report: one call (writer/results.ts).
      case "success":
      case "failure":
      case "fail_visit":
      case "await_approval":
        return applyResult(this, this.limits.rates, input);
      case "report":
        return applyResult(this, this.limits.rates, input.result, input);
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
        return this.events.send(input);
      case "publish_event":
        return this.events.publish(input);
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
      case "pause":
      case "resume": {
        const rs = await this.load(input.run_id);
        if (!rs) return input.done.reject(new NotFoundError(`run ${input.run_id} does not exist`));
        const refused = pauseRefusal(rs);
        if (refused) return input.done.reject(refused);
        (input.kind === "pause" ? pause : resume)(rs, input, this.now);
        return this.answer(rs, input.done);
      }
      case "fail_node": {
        const rs = await this.load(input.run_id);
        if (!rs) return input.done.reject(new NotFoundError(`run ${input.run_id} does not exist`));
        const refused = failVisitRefusal(rs, input.node_id);
        if (refused) return input.done.reject(refused);
        const v = currentVisit(rs, input.node_id);
        const { reason, error } = operatorFailure(rs, v, input, this.now);
        failVisit(rs, v, reason, error, this.now);
        return this.answer(rs, input.done);
      }
      case "retry":
        return retry(this, input, this.keys);
      case "fork":
        return fork(this, input);
      case "migrate":
        return migrate(this, input);
      case "continue_map":
        return this.kinds.maps.resume(input);
      case "tool_run":
        return this.kinds.children.startToolRun(input);
      case "claim":
        this.claims.queue(input);
        return;
      case "heartbeat":
        return heartbeat(this, input);
      case "worker_heartbeat":
        return workerHeartbeat(this, input);
      case "step":
        return recordStep(this, input);
      case "progress":
        return recordProgress(this, input);
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

  addRun(rs: RunState, revision?: number): void {
    this.newRuns.push(rs.run);
    this.states.set(rs.run.run_id, rs);
    if (revision !== undefined) this.revisions.set(rs.run.run_id, revision);
  }

  /** Resolves a caller with the run as this transaction leaves it, once committed. */
  answer(rs: RunState, done: Callback<Run>): void {
    this.out.callbacks.push(() => done.resolve({ ...rs.run }));
  }

  /** The run of an execution_id (a visit's, a compensation's, or a map item's, whose row it reads too). */
  async loadExecution(executionId: string): Promise<RunState | undefined> {
    const runId = runOfExecution(executionId);
    const rs = runId === null ? undefined : await this.load(runId);
    const item = itemKeyOf(executionId);
    if (rs && item && !rs.items?.has(executionId)) await this.loadItems([item]);
    return rs;
  }

  async loadItems(keys: ItemKey[]): Promise<{ rs: RunState; item: LoadedItem }[]> {
    const id = (k: ItemKey) => itemExecutionId(executionId(k.run_id, k.node_id, k.visit), k.index);
    const out: { rs: RunState; item: LoadedItem }[] = [];
    if (keys.length === 0) return out;
    const missing = keys.filter((k) => this.states.has(k.run_id) && !this.states.get(k.run_id)?.items?.has(id(k)));
    if (missing.length > 0) await this.keepItems(await this.tx.loadMapItems(missing));
    for (const k of keys) {
      const rs = this.states.get(k.run_id);
      const item = rs?.items?.get(id(k));
      if (rs && item) out.push({ rs, item });
    }
    return out;
  }

  async keepItems(rows: MapItem[]): Promise<{ rs: RunState; item: LoadedItem }[]> {
    const out: { rs: RunState; item: LoadedItem }[] = [];
    for (const row of rows) {
      const rs = this.states.get(row.run_id);
      if (!rs) continue;
      const item = { row, node: await this.itemNode(rs, row.node_id) };
      rs.items ??= new Map();
      rs.items.set(itemExecutionId(executionId(row.run_id, row.node_id, row.visit), row.index), item);
      out.push({ rs, item });
    }
    return out;
  }

  async load(runId: string): Promise<RunState | undefined> {
    const known = this.states.get(runId);
    if (known) return known;
    // Never waits for a run another engine holds (its inputs' runs are locked already).
    const read = await this.tx.loadRun(runId, { skipLocked: true, known: this.cache.get(runId)?.revision });
    return read ? this.take(read) : undefined;
  }

  /** Keeps the earliest future due time of the rows this transaction wrote. */
  private due(t: number | null): void {
    if (t !== null && t > this.now && (this.dueSoon === null || t < this.dueSoon)) this.dueSoon = t;
  }

  /** The node of a map node's item workflow (its items' retry settings, timeout and lease), once per flush. */
  private async itemNode(rs: RunState, nodeId: string): Promise<CompiledNode> {
    const id = itemWorkflowId(rs.run.workflow_id, nodeId);
    const key = `${id}@${rs.run.workflow_version}`;
    let node = this.itemNodes.get(key);
    if (!node) {
      const { graph } = await this.o.registry.get(id, rs.run.workflow_version);
      node = graph.nodes.get(nodeId);
      if (!node) throw new Error(`skein: the item workflow ${id} has no node "${nodeId}"; this is a Skein bug`);
      this.itemNodes.set(key, node);
    }
    return node;
  }

  /**
   * A flush of durable steps alone (an agent's loop records one after another): they change no
   * visit, so nothing else of a flush can follow from them; claims and the rest wait for the next.
   */
  private async recordStepsOnly(inputs: Input[]): Promise<FlushOutcome> {
    await this.preload(runsToLock(inputs, null));
    for (const input of inputs) await this.apply(input);
    await this.writeSteps();
    return this.out;
  }

  copySteps(from: VisitKey, to: VisitKey): void {
    this.stepCopies.push([from, to]);
  }

  recordStep(row: StepRow, done: Callback<StepRow>): void {
    this.steps.push({ row, done });
  }

  /** Records the steps attempts sent; each caller hears, once committed, the row its name holds. */
  private async writeSteps(): Promise<void> {
    for (const rs of this.states.values()) {
      // The engine's own records (an approval's decision), as its attempt would have made them.
      if (rs.changes.steps.length === 0) continue;
      for (const s of rs.changes.steps.splice(0)) {
        const { run_id, node_id, visit } = parseExecutionId(s.execution_id) as AttemptKey;
        const size = Buffer.byteLength(JSON.stringify(s.output));
        const row = { ...s, run_id, node_id, visit, size, recorded_at: this.now };
        this.steps.push({ row, done: { resolve: () => {}, reject: () => {} } });
      }
    }
    if (this.steps.length === 0) return;
    const sent = this.steps.splice(0);
    const recorded = await this.tx.recordSteps(sent.map((s) => s.row));
    sent.forEach(({ done }, i) => {
      this.out.callbacks.push(() => done.resolve(recorded[i] as StepRow));
    });
  }

  async writeItems(): Promise<void> {
    const rows: MapItem[] = [];
    for (const rs of this.states.values()) {
      const changed = rs.changes.items?.rows;
      if (!changed) continue;
      for (const row of changed) {
        rows.push(row);
        this.due(row.ready_at);
        this.due(row.lease_expires_at);
      }
      changed.clear();
    }
    if (rows.length > 0) await this.tx.writeMapItems(rows);
  }

  /**
   * Writes what every loaded run changed, and collects what to do after commit. `last`: the
   * transaction runs nothing after this write (it may carry the COMMIT).
   */
  async persist(last: boolean): Promise<void> {
    await planCompensations(this);
    await this.budget.release();
    this.budget.announce();
    // One write for the whole transaction: on a networked database each statement is a round trip.
    const runs: Run[] = [];
    const updated: Visit[] = [];
    const inserted: Visit[] = [];
    const compensations: Compensation[] = [];
    const events: NewEvent[] = [];
    const inbox: InboxEvent[] = this.events.written();
    const due = (t: number | null) => this.due(t);
    // A new run goes in as it is now; it needs no update.
    const started = new Set(this.newRuns.map((r) => r.run_id));
    const newRuns = this.newRuns.splice(0).map((r) => this.states.get(r.run_id)?.run ?? r);
    for (const r of newRuns) due(r.deadline_at);
    await this.writeItems();
    await this.writeSteps();
    for (const rs of this.states.values()) {
      rs.inbox = undefined; // what this flush knew of the inbox: the next reads what it needs (by name)
      // Item rows are read again by the flush that needs them: another engine may change them.
      if (rs.items) rs.items = undefined;
      const c = rs.changes;
      if (c.items) c.items = undefined;
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
    const copies = this.stepCopies.splice(0);
    const written = await this.tx.write(batch, { last: last && inbox.length === 0 && copies.length === 0 });
    for (const [runId, revision] of written.revisions) this.revisions.set(runId, revision);
    // After the runs they belong to are written. Rare: only events sent or delivered.
    if (inbox.length > 0) await this.tx.writeInbox(inbox);
    // After the runs they are copied to (a fork's). Rare: only forks copy steps here.
    for (const [from, to] of copies) await this.tx.copySteps(from, to);
    this.out.events.push(...written.events);
  }
}

function onlySteps(inputs: Input[]): boolean {
  return inputs.length > 0 && inputs.every((i) => i.kind === "step");
}
