/**
 * Concurrency limits across engines and workers (`agentConcurrency`): a limited agent type has
 * at most its limit of attempts RUNNING in the whole database, whoever claimed them (this
 * engine's handlers, external workers it serves, other engines). The limits are the engine's
 * options: each engine enforces its own for the claims it makes, so every engine of a database
 * should be given the same ones.
 *
 * The count is taken once per flush, at its first claim of a limited type, under the store's
 * limits lock (`countRunningForLimits`), which no other engine's limited claim passes until this
 * transaction commits; claims made after it are added as they are made.
 *
 * Rate limits (requests and tokens) and provider holds are rates.ts's: `room`, `admits` and
 * `took` ask it too.
 */
import type { Attempt } from "../../core/attempt.js";
import { nodeOf, type RunState } from "../../core/scheduler.js";
import type { Visit } from "../../core/types.js";
import type { ConcurrencyGroup } from "../../store/store.js";
import type { FlushContext } from "./context.js";
import { Rates } from "./rates.js";

export class ClaimLimits {
  /** Attempts running per limited type: the database's, this flush's changes included; null until counted. */
  private running: Map<string, number> | null = null;
  /** Running visits per (workflow, node, concurrency key) counted so far, the same way. */
  private readonly byKey = new Map<string, number>();
  /** The groups among them found full: their waiting visits are left out of later claim queries. */
  private readonly full = new Map<string, ConcurrencyGroup>();
  /** Rate limits and provider holds (rates.ts). */
  readonly rates: Rates;

  constructor(private readonly f: FlushContext) {
    this.rates = new Rates(f);
  }

  /** The limit of an agent type across the database, or undefined when it has none. */
  limitOf(agentType: string): number | undefined {
    return limitOf(this.f.o.agentConcurrency, agentType);
  }

  /** How many more attempts of the type may be claimed now (Infinity when it has no limit and is not held). */
  async room(agentType: string): Promise<number> {
    const byRate = await this.rates.room(agentType);
    const limit = this.limitOf(agentType);
    if (limit === undefined || byRate <= 0) return byRate;
    const running = await this.count();
    return Math.min(byRate, limit - (running.get(agentType) ?? 0));
  }

  /**
   * Whether the visit's node `concurrency` leaves room for one more attempt of its key (true
   * for a node without one). A visit is counted with the runs of its workflow id, all versions.
   */
  async nodeAllows(rs: RunState, v: Visit): Promise<boolean> {
    const limit = nodeOf(rs, v.node_id).concurrency?.limit;
    if (limit === undefined || v.concurrency_key === null) return true;
    const group = JSON.stringify([rs.run.workflow_id, v.node_id, v.concurrency_key]);
    let running = this.byKey.get(group);
    if (running === undefined) {
      const held = [...this.f.states.keys()];
      running = await this.f.tx.countRunningByKey(rs.run.workflow_id, v.node_id, v.concurrency_key, held);
      for (const other of this.f.states.values()) {
        if (other.run.workflow_id !== rs.run.workflow_id) continue;
        const w = other.current.get(v.node_id);
        if (w?.state === "RUNNING" && w.concurrency_key === v.concurrency_key) running += 1;
      }
      this.byKey.set(group, running);
    }
    if (running < limit) return true;
    this.full.set(group, { workflow_id: rs.run.workflow_id, node_id: v.node_id, key: v.concurrency_key });
    return false;
  }

  /** Node concurrency keys this flush found full (their ready visits wait for a slot). */
  fullKeys(): ConcurrencyGroup[] {
    return [...this.full.values()];
  }

  /**
   * Whether the attempt's own expectation fits its type's token window (rates.ts `admits`):
   * asked right before a claim, after `room` (and a visit's `nodeAllows`).
   */
  admits(a: Attempt): Promise<boolean> {
    return this.rates.admits(a);
  }

  /**
   * Records a claim of this flush (after `room`, `nodeAllows` and `admits` said there was room);
   * returns the tokens it took of its type's window, which its result settles (null: no token rate).
   */
  took(a: Attempt): number | null {
    const type = a.agentType;
    if (this.running && this.limitOf(type) !== undefined) {
      this.running.set(type, (this.running.get(type) ?? 0) + 1);
    }
    const tokens = this.rates.took(a);
    // Only a visit's node has a concurrency key (a map's items have their map's max_concurrency).
    if (a.kind === "visit" && a.row.concurrency_key) {
      const group = JSON.stringify([a.rs.run.workflow_id, a.row.node_id, a.row.concurrency_key]);
      const running = this.byKey.get(group);
      if (running !== undefined) this.byKey.set(group, running + 1);
    }
    return tokens;
  }

  /**
   * The runs this flush holds in memory may differ from their rows (attempts it ended or
   * claimed are not written yet): they are counted from memory, every other run from the
   * database. A run loaded later was read as stored, so the database's count holds for it.
   */
  private async count(): Promise<Map<string, number>> {
    if (this.running) return this.running;
    const types = Object.keys(this.f.o.agentConcurrency);
    const held = [...this.f.states.keys()];
    const running = await this.f.tx.countRunningForLimits(types, held);
    const limited = (type: string) => this.limitOf(type) !== undefined;
    const add = (type: string) => running.set(type, (running.get(type) ?? 0) + 1);
    for (const rs of this.f.states.values()) {
      for (const v of rs.current.values()) if (v.state === "RUNNING" && limited(v.agent_type)) add(v.agent_type);
      for (const c of rs.compensations) if (c.state === "RUNNING" && limited(c.agent_type)) add(c.agent_type);
    }
    this.running = running;
    return running;
  }
}

/**
 * Limited agent types whose attempts this flush ended (a result, an expiry, a cancel): a slot
 * may have freed, for this engine's next claim and for other engines and waiting workers, which
 * are told (`notifyOthers`). A visit that never ran, or one claimed again, is no slot freed,
 * but telling of one too many costs only a look.
 */
export function freedLimitedTypes(f: FlushContext): Set<string> {
  const freed = new Set<string>();
  const limits = f.o.agentConcurrency;
  const ended = (row: { attempt: number; state: string; agent_type: string }) =>
    row.attempt > 0 && row.state !== "RUNNING" && limitOf(limits, row.agent_type) !== undefined;
  for (const rs of f.states.values()) {
    for (const v of rs.changes.updated) {
      const keyed = v.concurrency_key !== null && v.attempt > 0 && v.state !== "RUNNING";
      if (keyed || ended(v)) freed.add(v.agent_type);
    }
    for (const c of rs.changes.compensations) if (ended(c)) freed.add(c.agent_type);
  }
  return freed;
}

/** The limit an engine's `agentConcurrency` sets for an agent type (own keys only: `constructor` is an agent type too). */
export function limitOf(limits: Readonly<Record<string, number>>, agentType: string): number | undefined {
  return Object.hasOwn(limits, agentType) ? limits[agentType] : undefined;
}
