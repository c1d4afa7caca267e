/**
 * The dispatcher: the only writer of run state. Everything that changes a run (a run start, an
 * attempt's result, a resolved payload, a heartbeat, time passing) is queued as an input; a
 * flush applies all queued inputs in ONE transaction (group commit), sweeps what fell due,
 * claims ready visits up to the concurrency limits, commits, and only then dispatches the
 * claimed attempts to their agents. Nothing runs an agent before its claim is committed.
 */
import type { Logger } from "pino";
import type { RunEvent } from "../core/types.js";
import { DatabaseError, EngineClosedError } from "../errors.js";
import type { Store, VisitKey } from "../store/store.js";
import type { Clock, TimerHandle } from "./clock.js";
import { type AttemptRef, type ClaimedTask, Flush, type FlushOutcome, type Input, inputRuns, REVIEW } from "./flush.js";
import type { WorkflowRegistry } from "./registry.js";
import { RunCache } from "./run-cache.js";

export interface DispatcherHooks {
  /** Starts an attempt of a committed claim. */
  dispatch(task: ClaimedTask): void;
  /** Resolves the payload templates of a ready visit (then queues a `payload` input). */
  resolvePayload(key: VisitKey): void;
  /** Aborts the in-process attempt of a visit that was cancelled or expired. */
  abort(executionId: string, reason: string): void;
  /** Committed events, in order. */
  published(events: RunEvent[]): void;
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
  /** Agent types this engine runs in process. */
  agentTypes: () => string[];
  maxConcurrency: number;
  agentConcurrency: Readonly<Record<string, number>>;
  sweepIntervalMs: number;
  random: () => number;
  /** How many in-progress runs to keep in memory between transactions (exclusive stores only). */
  runCacheSize: number;
  /** After how long without a heartbeat another engine counts as dead (shared stores), ms. */
  engineTimeoutMs: number;
}

export class Dispatcher {
  private inbox: Input[] = [];
  private flushing: Promise<void> | null = null;
  private scheduled = false;
  private wakeTimer: { at: number; handle: TimerHandle } | null = null;
  private sweepTimer: TimerHandle | null = null;
  /** Engines found dead at start: their in-process attempts are recovered on the first flush. */
  private deadEngines: string[] = [];
  private readonly cache: RunCache;
  /** Agent types that may have ready visits waiting in the database (see Flush.claimReady). */
  private readonly backlog = new Set<string>();
  /** Runs other engines said have ready visits, with their agent types (see Flush.takeHints). */
  private hints = new Map<string, Set<string>>();
  private claiming = true;
  private stopped = false;
  /** Set by the timers: the next flush also looks for what fell due. Input-driven flushes skip that. */
  private sweepDue = true;
  private serving = true;
  /** Transactions that failed in a row for a transient reason (deadlock, lost connection): backs off. */
  private transientFailures = 0;
  /** What a transaction whose commit's outcome was lost claimed (it may have committed): see Flush. */
  private lost: AttemptRef[] | null = null;

  constructor(private readonly o: DispatcherOptions) {
    this.cache = new RunCache(o.store.exclusive ? o.runCacheSize : 0);
  }

  start(deadEngines: string[]): void {
    this.deadEngines = deadEngines;
    // Another engine made visits ready (or started runs): look for them now, not at the sweep.
    this.o.store.onReady(({ agentType, runIds }) => {
      const served = agentType === REVIEW || this.o.agentTypes().includes(agentType);
      if (agentType === "*") this.sweepDue = true;
      else if (!served)
        return; // no flush for it
      else if (runIds.length === 0) this.backlog.add(agentType);
      else for (const id of runIds) this.hints.set(id, (this.hints.get(id) ?? new Set()).add(agentType));
      this.wake();
    });
    this.armSweep();
    this.wake();
  }

  /** Client mode: only applies what is pushed (run starts); claims, sweeps and timers stay off. */
  startClient(): void {
    this.serving = false;
    this.claiming = false;
    this.sweepDue = false;
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
    const dead = this.takeDead();
    const lost = this.lost;
    const sweep = this.sweepDue;
    this.sweepDue = false;
    const hints = this.hints;
    this.hints = new Map();
    let flush: Flush | null = null;
    let outcome: FlushOutcome;
    try {
      outcome = await this.o.store.transaction(
        async (tx) => {
          // One clock judges every due time: the database's on a shared store (DESIGN §7).
          const now = (await tx.now()) ?? this.o.clock.now();
          flush = new Flush(this.o, this.cache, this.backlog, now, this.claiming, lost, hints);
          return flush.run(tx, inputs, dead, sweep);
        },
        { lock: inputRuns(inputs), tryLock: [...hints.keys()] },
      );
      this.cache.keep((flush as Flush | null)?.states.values() ?? []);
    } catch (e) {
      this.cache.forget((flush as Flush | null)?.states.keys() ?? []);
      // A failed transaction changed nothing. Recovery and the sweep rolled back with the rest:
      // they run again on the next flush.
      this.deadEngines.push(...dead);
      this.sweepDue ||= sweep;
      for (const types of hints.values()) for (const type of types) this.backlog.add(type);
      if (isTransient(e) && !this.stopped) {
        // A deadlock or a lost connection: apply the same inputs again, after a growing pause.
        this.transientFailures += 1;
        // Lost while committing: if it did commit, its runs exist and the attempts it claimed
        // are RUNNING under this engine but were never started. The next flush sees to both.
        if ((e as DatabaseError).ambiguous) {
          const claimed = (flush as Flush | null)?.claimed() ?? [];
          this.lost = [...(lost ?? []), ...claimed];
        }
        this.inbox.unshift(...inputs);
        const pause = Math.min(1000, 5 * 2 ** this.transientFailures);
        this.o.logger.warn({ err: e, retry_ms: pause }, "skein: a transaction failed; retrying it");
        // Real time, not the engine's clock: this paces retries against the database, and a
        // test's manual clock must not hold them back.
        setTimeout(() => this.wake(), pause).unref();
        return false;
      }
      // Callers waiting on it hear why; attempts whose results were lost here expire and retry,
      // so no run is stuck.
      this.o.logger.error({ err: e }, "skein: a transaction failed and was rolled back");
      for (const input of inputs) if ("done" in input) input.done.reject(e);
      return false;
    }
    this.transientFailures = 0;
    this.lost = null;
    this.deadEngines.push(...outcome.unrecovered);
    this.afterCommit(outcome);
    this.armWake(outcome.now, outcome.nextDue);
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
    if (out.waiting.length > 0) h.readyWaiting(out.waiting);
    for (const [executionId, reason] of out.aborted) h.abort(executionId, reason);
    for (const done of out.callbacks) done();
    for (const key of out.unresolved) h.resolvePayload(key);
    for (const task of out.claimed) h.dispatch(task);
  }

  /** Arms one timer for the next moment something falls due (a retry, a deadline, a TTL). */
  private armWake(now: number, due: number | null): void {
    if (this.stopped || !this.serving) return;
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

/** A failure worth trying again as is: the database says so (deadlock, lost connection). */
function isTransient(e: unknown): boolean {
  return e instanceof DatabaseError && e.transient;
}
