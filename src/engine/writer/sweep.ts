/**
 * What a flush finds due besides its inputs: attempts of dead engines and of a lost commit
 * (DESIGN §7), expired attempts, reviews and waits past their due time, runs past their TTL,
 * compensations to advance, payloads to resolve. Every attempt, a visit's or a compensation
 * row's, goes through the one lifecycle of core/attempt.ts.
 */
import { type Attempt, attemptOf, compensationAttempt, expiry, itemAttempt, visitAttempt } from "../../core/attempt.js";
import { advanceCompensation } from "../../core/compensation.js";
import { childOf } from "../../core/kinds/workflow.js";
import { endRun, holdDue, type RunState, releaseCancelled } from "../../core/scheduler.js";
import { HELD_STATES } from "../../core/states.js";
import type { ItemKey } from "../../store/store.js";
import type { FlushContext } from "./context.js";
import { SWEEP_BATCH } from "./inputs.js";
import type { ChildRuns, KindStep } from "./kinds/step.js";
import type { RunKeys } from "./run-keys.js";
import { fireSchedules } from "./schedules.js";

/** The flush's sweep step: what fell due, and what dead engines and a lost commit left. */
export class Sweep {
  constructor(
    private readonly f: FlushContext,
    /** Child runs to cancel when their parent attempt expires. */
    private readonly children: ChildRuns,
    /** The steps of the kinds the engine starts: each sweeps its own. */
    private readonly steps: ReadonlyMap<string, KindStep>,
    /** Keyed runs (DESIGN §17): a QUEUED run's deadline is its debounce window's end, or its TTL. */
    private readonly keys: RunKeys,
  ) {}

  /** Attempts held by in-process agents of dead engines go back to RETRYING (DESIGN §7). */
  async recover(deadEngines: string[]): Promise<void> {
    const f = this.f;
    if (deadEngines.length === 0) return;
    const dead = new Set(deadEngines);
    const taken = new Map<string, number>();
    const count = (holder: string) => taken.set(holder, (taken.get(holder) ?? 0) + 1);
    // Runs another engine holds right now are skipped, never waited for: the dead engines are
    // tried again on the next flush (`unrecovered`), or an attempt they held would stay RUNNING
    // under an engine no sweep looks for again (its row is marked taken) until its deadline.
    let busy = 0;
    for (const runId of await f.tx.compensatingRuns(SWEEP_BATCH)) {
      const rs = await f.load(runId);
      if (!rs) {
        busy += 1;
        continue;
      }
      for (const v of rs.current.values()) if (v.holder !== null && dead.has(v.holder)) releaseCancelled(rs, v);
      for (const c of rs.compensations) {
        if (c.state === "RUNNING" && c.holder !== null && dead.has(c.holder)) {
          count(c.holder);
          compensationAttempt(rs, c).interrupt(f.now);
        }
      }
      advanceCompensation(rs, f.now);
    }
    for (;;) {
      let recovered = 0;
      for (const key of await f.tx.attemptsHeldBy(deadEngines, SWEEP_BATCH)) {
        const rs = await f.load(key.run_id);
        if (!rs) busy += 1;
        const v = rs?.current.get(key.node_id);
        if (rs && v?.visit === key.visit && v.state === "RUNNING") {
          if (v.holder !== null) count(v.holder);
          visitAttempt(rs, v).interrupt(f.now);
          recovered += 1;
        }
      }
      if (recovered === 0) break;
      // Written now, so that the next query no longer finds them.
      await f.persist(false);
    }
    // Map items whose attempts the dead engines held, as their visits' (their rows are their own).
    for (;;) {
      let recovered = 0;
      const keys = await f.tx.mapItemsHeldBy(deadEngines, SWEEP_BATCH);
      for (const key of keys) if (!(await f.load(key.run_id))) busy += 1;
      for (const a of await this.itemAttempts(keys)) {
        if (a.row.state !== "RUNNING" || a.row.holder === null || !dead.has(a.row.holder)) continue;
        count(a.row.holder);
        a.interrupt(f.now);
        recovered += 1;
      }
      if (recovered === 0) break;
      await f.persist(false);
    }
    if (busy > 0) f.out.unrecovered = deadEngines;
    await this.tookOver(taken);
  }

  /** What the takeover's log line says (logged once the transaction commits): per engine, how many attempts and how late. */
  private async tookOver(taken: Map<string, number>): Promise<void> {
    const f = this.f;
    // An engine tried again (its runs were busy) with nothing left to take says nothing more.
    const engines = [...taken].filter(([, attempts]) => attempts > 0);
    if (engines.length === 0) return;
    const heartbeats = await f.tx.lastHeartbeats(engines.map(([id]) => id));
    for (const [engine_id, attempts] of engines) {
      const at = heartbeats.get(engine_id);
      // 0: it closed while attempts it held still ran (made stale at once, so it is taken at once).
      const silent_ms = at === undefined || at === 0 ? null : Math.max(0, f.now - at);
      f.out.tookOver.push({ engine_id, attempts, silent_ms });
    }
  }

  /**
   * Attempts a transaction claimed before its commit's outcome was lost: if it committed, they
   * are RUNNING under this engine at that attempt but were never started. They go back to
   * RETRYING as a dead engine's would (DESIGN §7), and this flush's claims look for them.
   */
  async recoverLost(): Promise<void> {
    const f = this.f;
    for (const { execution_id, attempt } of f.lost ?? []) {
      const rs = await f.loadExecution(execution_id);
      const a = rs ? attemptOf(rs, execution_id) : undefined;
      if (!a?.current || a.row.state !== "RUNNING" || a.row.attempt !== attempt || a.row.holder !== f.o.engineId) {
        continue;
      }
      a.interrupt(f.now);
      f.backlog.add(a.agentType); // ready in the database once written: claimed below
    }
  }

  /** What fell due: expired attempts, holds and runs, compensations to advance, schedules' slots, payloads to resolve. */
  async sweepExpired(): Promise<void> {
    const f = this.f;
    for (const key of await f.tx.expiredAttempts(f.now, SWEEP_BATCH)) {
      const rs = await f.load(key.run_id);
      const v = rs?.current.get(key.node_id);
      if (rs && v) this.failExpired(rs, visitAttempt(rs, v));
    }
    const items = await f.tx.expiredMapItems(f.now, SWEEP_BATCH);
    for (const key of items) await f.load(key.run_id);
    for (const a of await this.itemAttempts(items)) this.failExpired(a.rs, a);
    // Reviews and waits whose due time passed: their kind says what that means (a timeout, a wake-up).
    for (const key of await f.tx.expiredHolds(f.now, SWEEP_BATCH)) {
      const rs = await f.load(key.run_id);
      const v = rs?.current.get(key.node_id);
      if (!rs || v?.visit !== key.visit || !HELD_STATES.includes(v.state)) continue;
      holdDue(rs, v, f.now);
    }
    for (const runId of await f.tx.expiredRuns(f.now, SWEEP_BATCH)) {
      const rs = await f.load(runId);
      if (!rs || rs.run.ended_at !== null) continue;
      if (rs.run.status === "QUEUED") {
        await this.keys.due(rs);
        continue;
      }
      endRun(rs, "ttl", { message: "the run passed its timeout (the workflow's TTL)", reason: "run_timeout" }, f.now);
    }
    for (const runId of await f.tx.compensatingRuns(SWEEP_BATCH)) {
      const rs = await f.load(runId);
      if (!rs) continue;
      for (const c of rs.compensations) this.failExpired(rs, compensationAttempt(rs, c));
      advanceCompensation(rs, f.now);
    }
    // Each kind the engine starts: what a flush could not do (the other run busy elsewhere, a crash between).
    for (const step of this.steps.values()) if (step.sweep) await step.sweep(SWEEP_BATCH);
    // An engine that is closing (not claiming) leaves due slots to the next sweep, its own or another's.
    if (f.claiming) await fireSchedules(f);
    f.out.unresolved.push(...(await f.tx.unresolved(f.now, SWEEP_BATCH)));
  }

  /** The attempts of these map items whose runs this flush holds, while their map holds them (current). */
  private async itemAttempts(keys: ItemKey[]): Promise<Attempt[]> {
    const out: Attempt[] = [];
    for (const { rs, item } of await this.f.loadItems(keys)) {
      const map = rs.current.get(item.row.node_id);
      const a = map ? itemAttempt(rs, item, map) : undefined;
      if (a?.current) out.push(a);
    }
    return out;
  }

  /** A running attempt whose lease or deadline passed fails (retryable), its signal queued to abort. */
  private failExpired(rs: RunState, a: Attempt): void {
    const f = this.f;
    const expired = expiry(a.row, rs.graph.nodes.get(a.row.node_id)?.timeout, f.now);
    if (!expired) return;
    f.out.aborted.push([a.executionId, expired.abort]);
    // A child run's attempt timed out: the child is cancelled, and undoes what it did.
    const child = childOf(a.row.holder);
    if (child) this.children.cancel(child, true);
    a.fail(expired.error, true, f.now, f.o.random);
  }
}

/** The takeover of a dead engine (DESIGN §7), in words: which engine, how many attempts, after how long. */
export function takeoverLine(t: FlushContext["out"]["tookOver"][number]): string {
  const attempts = `${t.attempts} attempt${t.attempts === 1 ? "" : "s"}`;
  const since =
    t.silent_ms === null
      ? "it stopped while they still ran"
      : `its last heartbeat was ${Math.round(t.silent_ms / 1000)} s ago`;
  return `skein: took over dead engine ${t.engine_id}: ${attempts} back to RETRYING (${since})`;
}
