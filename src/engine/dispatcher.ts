/**
 * The dispatcher: the only writer of run state. Everything that changes a run (a run start, an
 * attempt's result, a resolved payload, a heartbeat, time passing) is queued as an input; a
 * flush applies all queued inputs in ONE transaction (group commit), sweeps what fell due,
 * claims ready visits up to the concurrency limits, commits, and only then dispatches the
 * claimed attempts to their agents. Nothing runs an agent before its claim is committed.
 */
import type { Logger } from "pino";
import {
  claim,
  type Decision,
  emptyChanges,
  endRun,
  failAttempt,
  failVisit,
  interrupt,
  type RunState,
  renewLease,
  runState,
  startRunState,
  succeed,
} from "../core/scheduler.js";
import type { Json, Run, RunEvent, Visit, VisitError } from "../core/types.js";
import { ConflictError, EngineClosedError } from "../errors.js";
import type { Store, StoreTx, VisitKey } from "../store/store.js";
import type { Clock, TimerHandle } from "./clock.js";
import type { WorkflowRegistry } from "./registry.js";
import { RunCache } from "./run-cache.js";

/** A task as claimed in the transaction: everything an attempt needs but its signal and callbacks. */
export interface ClaimedTask {
  run_id: string;
  node_id: string;
  agent_type: string;
  visit: number;
  attempt: number;
  execution_id: string;
  payload: Json;
  input: Json;
  deps: Record<string, { status: string; output: Json | null; error: Json | null }>;
  trigger: { node_id: string; visit: number; status: string; output: Json | null; error: Json | null } | null;
  trace_id: string;
  workflow_id: string;
  workflow_version: number;
  deadline_at: number;
}

export type Input =
  | { kind: "start"; run: Run; done: Callback<Run> }
  | { kind: "success"; execution_id: string; attempt: number; output: Json; decision: Decision }
  | { kind: "failure"; execution_id: string; attempt: number; error: VisitError; retryable: boolean }
  /** A failure of the visit itself, not retried: invalid_next, when_error. */
  | { kind: "fail_visit"; execution_id: string; attempt: number; reason: string; error: VisitError }
  | { kind: "payload"; key: VisitKey; payload: Json }
  | { kind: "payload_error"; key: VisitKey; error: VisitError }
  | { kind: "heartbeat"; execution_id: string; attempt: number; done: Callback<boolean> };

type Callback<T> = { resolve(value: T): void; reject(error: unknown): void };

export interface DispatcherHooks {
  /** Starts an attempt of a committed claim. */
  dispatch(task: ClaimedTask): void;
  /** Resolves the payload templates of a ready visit (then queues a `payload` input). */
  resolvePayload(key: VisitKey): void;
  /** Aborts the in-process attempt of a visit that was cancelled or expired. */
  abort(executionId: string, reason: string): void;
  /** Committed events, in order. */
  published(events: RunEvent[]): void;
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
  /** Agent types this engine runs in process. */
  agentTypes: () => string[];
  maxConcurrency: number;
  agentConcurrency: Readonly<Record<string, number>>;
  sweepIntervalMs: number;
  random: () => number;
  /** How many in-progress runs to keep in memory between transactions (exclusive stores only). */
  runCacheSize: number;
}

const SWEEP_BATCH = 500;

export class Dispatcher {
  private inbox: Input[] = [];
  private flushing: Promise<void> | null = null;
  private scheduled = false;
  private wakeTimer: { at: number; handle: TimerHandle } | null = null;
  private sweepTimer: TimerHandle | null = null;
  /** Engines found dead at start: their in-process attempts are recovered on the first flush. */
  private deadEngines: string[] = [];
  private readonly cache: RunCache;
  private claiming = true;
  private stopped = false;
  /** Set by the timers: the next flush also looks for what fell due. Input-driven flushes skip that. */
  private sweepDue = true;

  constructor(private readonly o: DispatcherOptions) {
    this.cache = new RunCache(o.store.exclusive ? o.runCacheSize : 0);
  }

  start(deadEngines: string[]): void {
    this.deadEngines = deadEngines;
    this.armSweep();
    this.wake();
  }

  push(input: Input): void {
    if (this.stopped) {
      // Too late to record: an attempt still RUNNING is recovered by the next engine.
      if ("done" in input) input.done.reject(new EngineClosedError("the engine is closed"));
      return;
    }
    this.inbox.push(input);
    this.wake();
  }

  /** Asks for a flush soon (same tick: on the next turn of the event loop). */
  wake(): void {
    if (this.scheduled || this.stopped) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (!this.stopped) void this.flush();
    });
  }

  /** Stops claiming new work; queued results are still applied. */
  stopClaiming(): void {
    this.claiming = false;
  }

  /** Applies everything queued; resolves when the inbox is empty and no flush runs. */
  async drain(): Promise<void> {
    do await this.flush();
    while (this.inbox.length > 0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.sweepTimer) this.o.clock.clearTimeout(this.sweepTimer);
    if (this.wakeTimer) this.o.clock.clearTimeout(this.wakeTimer.handle);
    this.sweepTimer = null;
    this.wakeTimer = null;
    while (this.flushing) await this.flushing;
  }

  private flush(): Promise<void> {
    if (this.flushing) {
      // One flush at a time; the running one loops until the inbox is empty.
      return this.flushing;
    }
    this.flushing = (async () => {
      try {
        // Loop while work arrived meanwhile; after a failed transaction, wait for the next wake-up.
        let ok = true;
        do ok = await this.flushOnce(this.inbox.splice(0));
        while (ok && (this.inbox.length > 0 || (this.sweepDue && !this.stopped)));
      } finally {
        this.flushing = null;
      }
    })();
    return this.flushing;
  }

  /** One transaction; false when it failed and was rolled back. */
  private async flushOnce(inputs: Input[]): Promise<boolean> {
    const now = this.o.clock.now();
    const dead = this.takeDead();
    const sweep = this.sweepDue;
    this.sweepDue = false;
    let outcome: FlushOutcome;
    const flush = new Flush(this.o, this.cache, now, this.claiming);
    try {
      outcome = await this.o.store.transaction((tx) => flush.run(tx, inputs, dead, sweep));
      this.cache.keep(flush.states.values());
    } catch (e) {
      this.cache.forget(flush.states.keys());
      // A failed transaction changed nothing. Callers waiting on it hear why; attempts whose
      // results were lost here expire and retry, so no run is stuck. Recovery and the sweep
      // rolled back with the rest: they run again on the next flush.
      this.deadEngines.push(...dead);
      this.sweepDue ||= sweep;
      this.o.logger.error({ err: e }, "skein: a transaction failed and was rolled back");
      for (const input of inputs) if ("done" in input) input.done.reject(e);
      return false;
    }
    this.afterCommit(outcome);
    this.armWake(now, outcome.nextDue);
    return true;
  }

  private takeDead(): string[] {
    const dead = this.deadEngines;
    this.deadEngines = [];
    return dead;
  }

  private afterCommit(out: FlushOutcome): void {
    const h = this.o.hooks;
    if (out.events.length > 0) h.published(out.events);
    for (const [executionId, reason] of out.aborted) h.abort(executionId, reason);
    for (const done of out.callbacks) done();
    for (const key of out.unresolved) h.resolvePayload(key);
    for (const task of out.claimed) h.dispatch(task);
  }

  /** Arms one timer for the next moment something falls due (a retry, a deadline, a TTL). */
  private armWake(now: number, due: number | null): void {
    if (this.stopped) return;
    if (due === null || (this.wakeTimer && this.wakeTimer.at <= due)) return;
    if (this.wakeTimer) this.o.clock.clearTimeout(this.wakeTimer.handle);
    const at = due;
    this.wakeTimer = {
      at,
      handle: this.o.clock.setTimeout(() => {
        this.wakeTimer = null;
        this.sweepDue = true;
        this.wake();
      }, at - now),
    };
  }

  private armSweep(): void {
    this.sweepTimer = this.o.clock.setTimeout(() => {
      this.o.store.checkpoint().catch((err) => this.o.logger.error({ err }, "skein: checkpoint failed"));
      this.sweepDue = true;
      this.wake();
      if (!this.stopped) this.armSweep();
    }, this.o.sweepIntervalMs);
  }
}

interface FlushOutcome {
  events: RunEvent[];
  claimed: ClaimedTask[];
  unresolved: VisitKey[];
  aborted: [string, string][];
  callbacks: (() => void)[];
  /** The next moment something falls due, to arm the wake-up timer. */
  nextDue: number | null;
}

/** One transaction's work. Run states are loaded once and shared by every input of the flush. */
class Flush {
  /** The runs this transaction read or changed. */
  readonly states = new Map<string, RunState>();
  private tx!: StoreTx;
  private readonly out: FlushOutcome = {
    events: [],
    claimed: [],
    unresolved: [],
    aborted: [],
    callbacks: [],
    nextDue: null,
  };

  constructor(
    private readonly o: DispatcherOptions,
    private readonly cache: RunCache,
    private readonly now: number,
    private readonly claiming: boolean,
  ) {}

  async run(tx: StoreTx, inputs: Input[], deadEngines: string[], sweep: boolean): Promise<FlushOutcome> {
    this.tx = tx;
    await this.recover(deadEngines);
    for (const input of inputs) await this.apply(input);
    if (sweep) await this.sweep();
    if (this.claiming) await this.claimReady();
    await this.persist();
    this.out.nextDue = await this.tx.nextDue(this.now);
    return this.out;
  }

  private async apply(input: Input): Promise<unknown> {
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
    if (run.idempotency_key !== null) {
      const existing = await this.tx.runByIdempotencyKey(run.idempotency_key);
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
    await this.tx.insertRun(run);
    const rs = startRunState(run, graph, this.now);
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
    if (recordFence && rs) {
      rs.changes.events.push({
        run_id: rs.run.run_id,
        type: "result.fenced",
        node_id: key?.node_id ?? null,
        visit: key?.visit ?? null,
        trace_id: rs.run.trace_id,
        at: this.now,
        data: {
          execution_id: input.execution_id,
          attempt: input.attempt,
          result: input.kind,
          reason:
            !v || v.visit !== key?.visit
              ? "superseded"
              : v.attempt !== input.attempt
                ? "stale_attempt"
                : `visit is ${v.state}`,
        },
      });
    }
    return false;
  }

  /** Attempts held by in-process agents of dead engines go back to RETRYING (DESIGN §7). */
  private async recover(deadEngines: string[]): Promise<void> {
    if (deadEngines.length === 0) return;
    for (;;) {
      let recovered = 0;
      for (const key of await this.tx.attemptsHeldBy(deadEngines, SWEEP_BATCH)) {
        const rs = await this.load(key.run_id);
        const v = rs?.current.get(key.node_id);
        if (rs && v?.visit === key.visit && v.state === "RUNNING") {
          interrupt(rs, v, this.now);
          recovered += 1;
        }
      }
      if (recovered === 0) return;
      await this.persist();
    }
  }

  /** What fell due: expired attempts, expired runs, ready visits whose payload waits for templates. */
  private async sweep(): Promise<void> {
    for (const key of await this.tx.expiredAttempts(this.now, SWEEP_BATCH)) {
      const rs = await this.load(key.run_id);
      const v = rs?.current.get(key.node_id);
      if (!rs || !v || v.state !== "RUNNING" || v.lease_expires_at === null || v.lease_expires_at > this.now) continue;
      const timedOut = v.deadline_at !== null && v.deadline_at <= this.now;
      const seconds = rs.graph.nodes.get(v.node_id)?.timeout;
      this.out.aborted.push([v.execution_id, timedOut ? "timeout" : "lease_expired"]);
      failAttempt(
        rs,
        v,
        timedOut
          ? { message: `attempt ${v.attempt} timed out after ${seconds} s`, reason: "timeout" }
          : { message: `attempt ${v.attempt} sent no heartbeat in time`, reason: "lease_expired" },
        true,
        this.now,
        this.o.random,
      );
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
    this.out.unresolved.push(...(await this.tx.unresolved(this.now, SWEEP_BATCH)));
  }

  /**
   * Claims ready visits for this engine's agents within the concurrency limits: first those
   * already waiting in the database (oldest first), then those this flush made ready, which are
   * not written yet; everything is written once, claimed, by the persist that follows.
   */
  private async claimReady(): Promise<void> {
    const inFlight = this.o.hooks.inFlight();
    let free = this.o.maxConcurrency - inFlight.total;
    const taken = new Map<string, number>();
    const room = (type: string) => {
      const limit = this.o.agentConcurrency[type];
      if (limit === undefined) return free;
      return Math.min(free, limit - (inFlight.byType.get(type) ?? 0) - (taken.get(type) ?? 0));
    };
    const take = async (rs: RunState, v: Visit) => {
      claim(rs, v, this.o.engineId, this.now);
      this.out.claimed.push(await this.task(rs, v));
      free -= 1;
      taken.set(v.agent_type, (taken.get(v.agent_type) ?? 0) + 1);
    };
    const types = this.o.agentTypes();
    for (const type of types) {
      const n = room(type);
      if (n <= 0) continue;
      for (const key of await this.tx.claimable(type, this.now, n)) {
        const rs = await this.load(key.run_id);
        const v = rs?.current.get(key.node_id);
        if (rs && v && v.visit === key.visit && isClaimable(v, this.now)) await take(rs, v);
      }
    }
    for (const rs of this.states.values()) {
      for (const v of rs.changes.readied) {
        if (isClaimable(v, this.now) && types.includes(v.agent_type) && room(v.agent_type) > 0) await take(rs, v);
      }
    }
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
      const current = rs.current.get(v.trigger.node_id);
      const t =
        current && current.visit === v.trigger.visit
          ? current
          : await this.tx.getVisit({ run_id: rs.run.run_id, ...v.trigger });
      if (t) trigger = { ...v.trigger, status: t.state, output: t.output, error: t.error as Json | null };
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
    };
  }

  private async load(runId: string): Promise<RunState | undefined> {
    const known = this.states.get(runId) ?? this.cache.get(runId);
    if (known) {
      this.states.set(runId, known);
      return known;
    }
    const loaded = await this.tx.loadRun(runId);
    if (!loaded) return undefined;
    const { graph } = await this.o.registry.get(loaded.run.workflow_id, loaded.run.workflow_version);
    const rs = runState(loaded.run, graph, loaded.visits);
    this.states.set(runId, rs);
    return rs;
  }

  /** Writes what every loaded run changed, and collects what to do after commit. */
  private async persist(): Promise<void> {
    for (const rs of this.states.values()) {
      const c = rs.changes;
      if (c.inserted.size === 0 && c.updated.size === 0 && c.events.length === 0 && !c.runUpdated) continue;
      if (c.runUpdated || c.ended) {
        rs.run.updated_at = this.now;
        await this.tx.updateRun(rs.run);
      }
      await this.tx.updateVisits(c.updated);
      await this.tx.insertVisits(c.inserted);
      this.out.events.push(...(await this.tx.insertEvents(c.events)));
      for (const v of c.cancelled) this.out.aborted.push([v.execution_id, "cancelled"]);
      for (const v of c.readied) {
        if (v.payload === null && v.state === "PENDING") {
          this.out.unresolved.push({ run_id: v.run_id, node_id: v.node_id, visit: v.visit });
        }
      }
      rs.changes = emptyChanges();
    }
  }
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
