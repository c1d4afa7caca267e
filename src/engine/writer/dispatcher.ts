/**
 * The dispatcher: the only writer of run state. Everything that changes a run (a run start, an
 * attempt's result, a resolved payload, a heartbeat, time passing) is queued as an input; a
 * flush applies all queued inputs in ONE transaction (group commit), sweeps what fell due,
 * claims ready visits up to the concurrency limits, commits, and only then dispatches the
 * claimed attempts to their agents. Nothing runs an agent before its claim is committed.
 */

import type { RunState } from "../../core/scheduler.js";
import { ENGINE_STARTED } from "../../definition/kinds/index.js";
import { type DatabaseError, EngineClosedError, UnavailableError } from "../../errors.js";
import { StaleRunsError } from "../../store/store.js";
import { untilDeadline } from "../attempts/deadline.js";
import { INPUTS_PER_FLUSH } from "./bounded-work.js";
import type { FlushOutcome } from "./context.js";
import type { DispatcherOptions } from "./dispatcher-options.js";
import { Flush } from "./flush.js";
import { type AttemptRef, type Input, runsToLock } from "./inputs.js";
import { HOLDS_NOTICE } from "./rates.js";
import { type Failure, isolate, isTransient, type Refusing } from "./refused.js";
import { RunCache } from "./run-cache.js";
import { takeoverLine } from "./sweep.js";
import { WakeTimers } from "./wake-timers.js";

/** Longest pause between two tries of a transaction that failed for a transient reason, ms. */
const MAX_RETRY_PAUSE_MS = 1000;
/**
 * Transient failures in a row after which storage counts as down (callers are answered
 * UnavailableError at once): a deadlock or one lost connection passes on the first retry, a
 * full disk does not.
 */
const FAILURES_WHEN_DOWN = 2;

export class Dispatcher {
  private inbox: Input[] = [];
  private flushing: Promise<void> | null = null;
  private scheduled = false;
  private readonly timers: WakeTimers;
  /** Engines found dead at start: their in-process attempts are recovered on the first flush. */
  private deadEngines: string[] = [];
  /** The first flush continues the maps an engine left held (each kind step's `takeOver`, engine/writer/kinds). */
  private takeOver = false;
  private readonly cache: RunCache;
  /** Agent types that may have ready visits waiting in the database (claims.ts `claimReady`). */
  private readonly backlog = new Set<string>();
  /** Runs other engines said have ready visits, with their agent types (claims.ts `takeHints`). */
  private hints = new Map<string, Set<string>>();
  /**
   * Another engine said so (hints, backlog) while a flush ran: that flush may have read its
   * hints and backlog before, so the loop runs once more. (The store leaves out this engine's
   * own notices: a flush for them would find nothing new.)
   */
  private heard = false;
  private claiming = true;
  private stopped = false;
  /** Set by the timers: the next flush also looks for what fell due. Input-driven flushes skip that. */
  private sweepDue = true;
  private serving = true;
  /** Transactions that failed in a row for a transient reason (deadlock, lost connection): backs off. */
  private transientFailures = 0;
  /** The pause after such a failure: the next try starts when it fires. */
  private retryTimer: NodeJS.Timeout | null = null;
  /** Resolved when the retry timer fires (a draining close waits for it). */
  private retried: (() => void)[] = [];
  /**
   * Storage takes no writes (transactions keep failing for a transient reason: a full disk, no
   * database): callers are answered UnavailableError at once, and only the retry timer tries
   * again, until a transaction with inputs (or a probe write) commits.
   */
  private down = false;
  /**
   * Why the engine cannot record anything now: its last transaction failed for a transient
   * reason, and no transaction with inputs (or probe write) has committed since. Null when it can.
   */
  unavailable: UnavailableError | null = null;
  /** What a transaction whose commit's outcome was lost claimed (it may have committed): see Flush. */
  private lost: AttemptRef[] | null = null;
  /** Work a flush left over (bounded-work.ts), queued on the next turn of the event loop; null: none. */
  private continuing: Input[] | null = null;
  /** Inputs of that transaction, not applied since: they may have committed, so they are never refused as unavailable. */
  private readonly uncertain = new Set<Input>();

  /** What isolating an input the database refuses needs (refused.ts). */
  private readonly refusing: Refusing;

  constructor(private readonly o: DispatcherOptions) {
    this.cache = new RunCache(o.runCacheSize);
    this.refusing = {
      transact: (inputs) => this.transact(inputs, false),
      failedForNow: (inputs, failure) => this.failedForNow(inputs, failure),
      logger: o.logger,
    };
    this.timers = new WakeTimers(o.clock, () => {
      this.sweepDue = true;
      this.wake();
    });
  }

  start(deadEngines: string[]): void {
    this.deadEngines = deadEngines;
    this.takeOver = true;
    // Another engine made visits ready (or started runs): look for them now, not at the sweep.
    this.o.store.onReady(({ agentType, runIds }) => {
      // Another engine held an agent type, or notices may have been lost: the next claim reads the holds.
      if (agentType === HOLDS_NOTICE || agentType === "*") this.o.holds.stale = true;
      if (agentType === HOLDS_NOTICE) return;
      const served = ENGINE_STARTED.includes(agentType) || this.o.agentTypes().includes(agentType);
      if (agentType === "*") this.sweepDue = true;
      else if (!served)
        return; // no flush for it
      else if (runIds.length === 0) this.backlog.add(agentType);
      else for (const id of runIds) this.hints.set(id, (this.hints.get(id) ?? new Set()).add(agentType));
      this.heard = true;
      this.wake();
    });
    this.timers.armSweep(this.o.sweepIntervalMs, () => {
      this.o.store.checkpoint().catch((err) => this.o.logger.error({ err }, "skein: checkpoint failed"));
    });
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
    if (this.down && this.unavailable) {
      // Storage takes no writes: a caller hears it at once; what has no caller waits for the retry.
      if ("done" in input) input.done.reject(this.unavailable);
      else this.inbox.push(input);
      return;
    }
    this.inbox.push(input);
    this.wake();
  }

  /** @internal work queued, scheduled or being applied (the test harness waits for none before it moves the clock) */
  working(): boolean {
    return (
      this.inbox.length > 0 ||
      this.flushing !== null ||
      this.scheduled ||
      this.retryTimer !== null ||
      this.continuing !== null
    );
  }

  /** Asks for a flush soon (same tick: on the next turn of the event loop). */
  wake(): void {
    // While storage is down only the retry timer tries again (see `retry`).
    if (!this.down) this.schedule();
  }

  private schedule(): void {
    if (this.scheduled || this.stopped) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (!this.stopped) void this.flush();
    });
  }

  /**
   * Asks for a flush that sweeps soon (a schedule was put or resumed: its next slot may come
   * before the wake-up timer armed); the sweep then arms the timer for what it finds due.
   */
  sweepSoon(): void {
    if (!this.serving) return;
    this.sweepDue = true;
    this.wake();
  }

  /** Stops claiming new work; queued results are still applied. */
  stopClaiming(): void {
    this.claiming = false;
  }

  /**
   * Applies everything queued; resolves when the inbox is empty and no flush runs, or at
   * `deadline` (epoch ms, real time) while transactions keep failing: a close must end.
   */
  async drain(deadline: number): Promise<void> {
    for (;;) {
      // A flush even while storage is down: each one either commits or sets a retry pause.
      await untilDeadline(this.flush(), deadline);
      if (this.inbox.length === 0 || Date.now() >= deadline) return;
      if (this.retryTimer !== null) await this.retryPause(deadline);
    }
  }

  /**
   * Stops: no more flushes. Waits for the one running, at most until `deadline`. Callers still
   * queued hear that the engine closed; results still queued are lost, and their attempts,
   * still RUNNING under this engine, are recovered by the next one (DESIGN §7).
   */
  async stop(deadline: number): Promise<void> {
    this.stopped = true;
    this.timers.stop();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    for (const resolve of this.retried.splice(0)) resolve();
    while (this.flushing && Date.now() < deadline) await untilDeadline(this.flushing, deadline);
    const closed = new EngineClosedError("the engine closed before it could record this; try again on another engine");
    const left = this.inbox.splice(0);
    for (const input of left) if ("done" in input) input.done.reject(closed);
    if (left.length > 0) {
      // Their attempts stay RUNNING under this engine: the next one recovers and re-runs them.
      this.o.logger.warn({ inputs: left.length }, "skein: stopped with inputs it could not record");
    }
  }

  /** Resolves when the retry pause ends, or at `deadline`. */
  private async retryPause(deadline: number): Promise<void> {
    await untilDeadline(new Promise<void>((resolve) => this.retried.push(resolve)), deadline);
  }

  private flush(): Promise<void> {
    if (this.flushing) {
      // One flush at a time; the running one loops until the inbox is empty, a bounded part at a time.
      return this.flushing;
    }
    this.flushing = (async () => {
      try {
        // Loop while work arrived meanwhile; after a failed transaction, wait for the next wake-up.
        let ok = true;
        for (;;) {
          this.heard = false;
          ok = await this.flushOnce(this.inbox.splice(0, INPUTS_PER_FLUSH));
          const more = this.inbox.length > 0 || ((this.sweepDue || this.heard) && !this.stopped);
          if (!(ok && more)) break;
          // A turn of the event loop between two transactions: on SQLite a transaction never
          // yields, and inputs that keep coming (payloads resolved, results) would otherwise keep
          // the API from answering (DESIGN §13.1). Inputs that arrive meanwhile join the next.
          await new Promise<void>((resolve) => setImmediate(resolve));
        }
      } finally {
        this.flushing = null;
      }
    })();
    return this.flushing;
  }

  /**
   * One transaction, and what follows if it fails; false when the loop should stop for now
   * (inputs wait for a retry pause; a sweep that failed waits for the next).
   */
  private async flushOnce(inputs: Input[]): Promise<boolean> {
    const failure = await this.transact(inputs, true);
    if (failure === null) return true;
    if (isTransient(failure.error)) return this.failedForNow(inputs, failure);
    // Trying again will not change this: a statement error. Only the input that causes it fails.
    this.o.logger.error({ err: failure.error }, "skein: a transaction failed and was rolled back");
    if (inputs.length === 0) return false;
    await isolate(this.refusing, inputs);
    return this.retryTimer === null;
  }

  /**
   * Runs one transaction: `inputs` and, with `extras`, what is due besides (recovery of dead
   * engines, the sweep, other engines' hints). Null when it committed (what follows the commit
   * done), else the failure, with the work besides the inputs put back for a later flush.
   */
  private async transact(inputs: Input[], extras: boolean): Promise<Failure | null> {
    const failure = await this.transactOnce(inputs, extras);
    // The store trusted the runs kept in memory and one had changed (another engine wrote it):
    // nothing was written and they are forgotten, so trying again at once reads them.
    if (failure?.error instanceof StaleRunsError) {
      this.o.logger.debug({ err: failure.error }, "skein: a run changed since this engine read it; reading it again");
      return this.transactOnce(inputs, extras);
    }
    return failure;
  }

  private async transactOnce(inputs: Input[], extras: boolean): Promise<Failure | null> {
    const dead = extras ? this.takeDead() : [];
    const takeOver = extras && this.takeOver;
    this.takeOver &&= !takeOver;
    const lost = this.lost;
    const sweep = extras && this.sweepDue;
    if (sweep) this.sweepDue = false;
    const hints = extras ? this.hints : new Map<string, Set<string>>();
    if (extras) this.hints = new Map();
    const lock = runsToLock(inputs, lost);
    const tryLock = [...hints.keys()];
    // Runs kept in memory are read again only if something wrote them since (their revision moved).
    const known = this.cache.revisions([...lock, ...tryLock]);
    let flush: Flush | null = null;
    let outcome: FlushOutcome;
    // This process's clock when the transaction's time was read (see armWake below).
    let nowReadAt = this.o.clock.now();
    // Real time, not the clock: a transaction's duration is a measurement (metrics), not a due time.
    const timer = performance.now();
    try {
      outcome = await this.o.store.transaction(
        async (tx) => {
          // One clock judges every due time: the database's on a shared store (DESIGN §7).
          const now = (await tx.now()) ?? this.o.clock.now();
          nowReadAt = this.o.clock.now();
          flush = new Flush(tx, this.o, this.cache, this.backlog, now, this.claiming, lost, hints);
          return flush.run(inputs, dead, sweep, takeOver);
        },
        { lock, tryLock, known },
      );
      const done = flush as Flush | null;
      if (done) this.cache.keep(done.states.values(), done.revisions);
    } catch (error) {
      this.cache.forget((flush as Flush | null)?.states.keys() ?? []);
      this.cache.forget(lock);
      // A failed transaction changed nothing. Recovery and the sweep rolled back with the rest:
      // they run again on a later flush (the sweep at once only after a transient failure; the
      // sweep timer brings it back otherwise, so a sweep that fails for good cannot spin).
      // With the engines it found dead and could not recover all of: if the commit's outcome was
      // lost and it did commit, their rows are marked taken and no sweep finds them again.
      this.deadEngines.push(...dead, ...((flush as Flush | null)?.out.unrecovered ?? []));
      this.takeOver ||= takeOver;
      if (isTransient(error)) this.sweepDue ||= sweep;
      for (const types of hints.values()) for (const type of types) this.backlog.add(type);
      return { error, flush };
    }
    this.transientFailures = 0;
    if (inputs.length > 0) this.writable();
    for (const input of inputs) this.uncertain.delete(input);
    if (this.uncertain.size === 0) this.lost = null;
    // An attempt this commit claimed is started now: if a lost transaction had claimed it too
    // (it had not committed, so the attempt number is the same), it is no longer "never started"
    // and recovering it would run a living attempt twice.
    else if (this.lost && outcome.claimed.length > 0) {
      const started = new Set(outcome.claimed.map((c) => `${c.execution_id}#${c.attempt}`));
      this.lost = this.lost.filter((a) => !started.has(`${a.execution_id}#${a.attempt}`));
    }
    this.deadEngines.push(...outcome.unrecovered);
    const states = (flush as Flush | null)?.states ?? new Map<string, RunState>();
    this.afterCommit(outcome, states, (performance.now() - timer) / 1000);
    // Due times are the transaction's clock; the timer runs on this process's: count the time
    // since the transaction read its time, or a slow flush arms its wake-up late by that much
    // (and counting from before that read, early: a wake-up that finds nothing due yet).
    if (!this.stopped && this.serving)
      this.timers.armWake(outcome.now + (this.o.clock.now() - nowReadAt), outcome.nextDue);
    return null;
  }

  /**
   * A transaction failed for a reason that passes (a deadlock, a lost connection, a full disk).
   * The first time, its inputs are tried again after a short pause: a deadlock or one lost
   * connection is over by then. If it fails again, storage is down: callers hear
   * UnavailableError at once (unless their input may have committed), and what has no caller
   * (results, payloads) is kept and tried again, pausing longer each time, until storage takes
   * it: no result is lost to a passing failure. Which errors pass is the store's to say.
   */
  private failedForNow(inputs: Input[], failure: Failure): false {
    const error = failure.error as DatabaseError;
    this.transientFailures += 1;
    // Lost while committing: if it did commit, its runs exist and the attempts it claimed
    // are RUNNING under this engine but were never started. The next flush sees to both.
    if (error.ambiguous) {
      this.lost = [...(this.lost ?? []), ...(failure.flush?.claimed() ?? [])];
      for (const input of inputs) this.uncertain.add(input);
    }
    this.unavailable = new UnavailableError(
      `the engine cannot record anything now (${error.message}); nothing of this request was written, retry later`,
      Math.max(1, Math.ceil(this.pause() / 1000)),
      { cause: error },
    );
    if (this.transientFailures >= FAILURES_WHEN_DOWN) this.down = true;
    this.retryLater(inputs);
    return false;
  }

  /** Queues `inputs` again for the retry timer; while storage is down, callers hear it now. */
  private retryLater(inputs: Input[]): void {
    const unavailable = this.unavailable;
    const answer = (i: Input) => this.down && unavailable !== null && "done" in i && !this.uncertain.has(i);
    for (const i of inputs) if (answer(i) && "done" in i) i.done.reject(unavailable);
    const kept = inputs.filter((i) => !answer(i));
    this.inbox.unshift(...kept);
    const pause = this.pause();
    this.o.logger.warn(
      { err: unavailable?.cause, retry_ms: pause, kept: this.inbox.length, storage_down: this.down },
      "skein: a transaction failed; retrying it",
    );
    if (this.stopped) return;
    // Real time, not the engine's clock: this paces retries against the database, and a
    // test's manual clock must not hold them back.
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => void this.retry(), pause);
    this.retryTimer.unref();
  }

  /**
   * The retry pause is over: what waited is tried again. With nothing waiting, a small write
   * (this engine's heartbeat) tells whether storage takes writes again, so readiness recovers
   * without waiting for a request.
   */
  private async retry(): Promise<void> {
    this.retryTimer = null;
    if (!this.stopped && this.down && this.inbox.length === 0) {
      try {
        await this.o.store.heartbeat(this.o.engineId, this.o.clock.now());
        this.writable();
      } catch (error) {
        if (!isTransient(error)) this.o.logger.error({ err: error }, "skein: the probe write failed");
        this.transientFailures += 1;
        this.retryLater([]);
      }
    }
    // What waited (while storage is down only this retry flushes), or what fell due meanwhile.
    if (!this.down || this.inbox.length > 0) this.schedule();
    for (const resolve of this.retried.splice(0)) resolve();
  }

  /** Storage took a write: requests are served again. */
  private writable(): void {
    this.down = false;
    this.unavailable = null;
  }

  private pause(): number {
    return Math.min(MAX_RETRY_PAUSE_MS, 5 * 2 ** this.transientFailures);
  }

  private takeDead(): string[] {
    const dead = this.deadEngines;
    this.deadEngines = [];
    return dead;
  }

  private afterCommit(out: FlushOutcome, states: ReadonlyMap<string, RunState>, seconds: number): void {
    const h = this.o.hooks;
    for (const t of out.tookOver) this.o.logger.warn(t, takeoverLine(t));
    h.published(out.events, states, seconds);
    if (out.slots.length > 0) h.slots?.(out.slots);
    if (out.holds.length > 0) h.held?.(out.holds);
    if (out.waiting.length > 0) h.readyWaiting(out.waiting);
    for (const [executionId, reason] of out.aborted) h.abort(executionId, reason);
    for (const done of out.callbacks) done();
    for (const { run, ...key } of out.unresolved) h.resolvePayload(key, run);
    for (const task of out.claimed) h.dispatch(task);
    if (out.more.flush || out.more.inputs.length > 0) this.continueSoon(out.more.inputs);
  }

  /**
   * Work a flush left over (a map's next items, a cancel still cascading, starts it had no room
   * for): flushed again on the next turn of the event loop, so requests that arrived meanwhile
   * (health, a cancel, other runs' results) are served first, and queued beside it.
   */
  private continueSoon(inputs: Input[]): void {
    if (this.continuing) {
      this.continuing.push(...inputs);
      return;
    }
    this.continuing = [...inputs];
    setImmediate(() => {
      const next = this.continuing ?? [];
      this.continuing = null;
      if (this.stopped) return;
      this.inbox.push(...next);
      this.wake();
    });
  }
}
