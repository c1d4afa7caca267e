/**
 * Which agent types something serves, so that a visit of a type nobody serves is said to wait
 * for an agent (a warning in the log, getRun's `waiting`, the validation warning) instead of
 * waiting in silence until its run's TTL. Served: a live engine's in-process handlers, and the
 * types external workers claimed, heartbeated or reported at an engine in the last
 * `WORKER_SEEN_MS`. Each engine writes what it serves into its row (`engines.served_types`) at
 * registration and with every heartbeat; a worker may poll any engine, so the judgement is the
 * union of the live engines' rows, with this engine's own memory on top (its workers count at once).
 */
import type { Logger } from "pino";
import type { Clock } from "../clock.js";
import { kindOf } from "../definition/kinds/index.js";
import { nearest } from "../definition/suggest.js";
import type { Store, StoreGauges } from "../store/store.js";

/** A worker that claimed, heartbeated or reported a type within this long still serves it, ms. */
export const WORKER_SEEN_MS = 60_000;

export class ServedTypes {
  /** Types this engine's external workers used, with when they last did (this engine's clock). */
  private readonly workers = new Map<string, number>();
  /** The live engines' rows, as last read, and when. */
  private read: { types: Set<string>; at: number } | null = null;
  /** Types the log has warned about since they were last served: once per type, not per check. */
  private readonly warned = new Set<string>();

  constructor(
    private readonly o: {
      store: Store;
      clock: Clock;
      logger: Logger;
      /** This process's in-process handlers (none for a client: it serves nothing). */
      handlerTypes: readonly string[];
      /** An engine row is live while its heartbeat is at most this old (the engine timeout), ms. */
      freshMs: number;
      /** The rows are read again after this long (the heartbeat interval: they change no faster), ms. */
      refreshMs: number;
    },
  ) {}

  /** External workers claimed, heartbeated or reported these types at this engine now. */
  workerSeen(types: Iterable<string>): void {
    const now = this.o.clock.now();
    for (const t of types) this.workers.set(t, now);
  }

  /** What this engine's row says it serves: its handlers' types and its workers' recent ones. */
  own(): string[] {
    const since = this.o.clock.now() - WORKER_SEEN_MS;
    for (const [type, at] of this.workers) if (at < since) this.workers.delete(type);
    return [...new Set([...this.o.handlerTypes, ...this.workers.keys()])].sort();
  }

  /** Every type served in the database now: the live engines' rows (read at most once per `refreshMs`) and this engine's own. */
  async all(): Promise<Set<string>> {
    const now = this.o.clock.now();
    if (!this.read || now - this.read.at >= this.o.refreshMs || now < this.read.at) {
      this.read = { types: new Set(await this.o.store.servedTypes(now, this.o.freshMs)), at: now };
    }
    return new Set([...this.read.types, ...this.own()]);
  }

  /** Forgets the rows read, so that the next judgement reads them again (this engine just wrote its own). */
  stale(): void {
    this.read = null;
  }

  /**
   * Warns, once per type, about agent types with ready visits that nothing serves. Called with
   * every heartbeat; reads the ready visits per type (the metrics' statement, by index).
   */
  async check(engineId: string): Promise<void> {
    const { ready } = await this.o.store.readGauges(engineId, this.o.clock.now());
    const waiting = readyByType(ready).filter((r) => needsAgent(r.agent_type));
    if (waiting.length === 0) return;
    const served = await this.all();
    for (const type of this.warned) if (served.has(type)) this.warned.delete(type);
    for (const r of waiting) {
      if (served.has(r.agent_type) || this.warned.has(r.agent_type)) continue;
      this.warned.add(r.agent_type);
      this.o.logger.warn(
        { agent_type: r.agent_type, visits: r.visits, oldest_age_ms: r.oldest_age_ms },
        `skein: ${r.visits} ready visit${r.visits === 1 ? "" : "s"}: ${noAgent(r.agent_type, served)}`,
      );
    }
  }
}

/** Types whose visits an agent claims; the engine's own kinds (sleep, review, map, ...) wait for no agent. */
export function needsAgent(agentType: string): boolean {
  return kindOf(agentType).start === "agent";
}

/** Why nothing claims visits of `type` (with the nearest served type: likely a typo) and what to do; why first: a CLI note keeps the start. */
export function noAgent(type: string, served: ReadonlySet<string>): string {
  const near = nearest(type, served);
  const hint = near === undefined ? "" : ` (did you mean "${near}"?)`;
  return `no engine or worker serves agent_type "${type}"${hint}: its visits wait until their run's timeout; ${WHAT_TO_DO}`;
}

const WHAT_TO_DO =
  "give an engine an agent for it, or start a worker that claims it " +
  `(a worker counts for ${WORKER_SEEN_MS / 1000} s after its last claim, heartbeat or report)`;

/** The gauges' ready rows (by type and priority) summed by type: visits, and the oldest one's age. */
export function readyByType(
  ready: StoreGauges["ready"],
): { agent_type: string; visits: number; oldest_age_ms: number }[] {
  const byType = new Map<string, { agent_type: string; visits: number; oldest_age_ms: number }>();
  for (const r of ready) {
    const t = byType.get(r.agent_type);
    if (!t) byType.set(r.agent_type, { agent_type: r.agent_type, visits: r.visits, oldest_age_ms: r.oldest_age_ms });
    else {
      t.visits += r.visits;
      t.oldest_age_ms = Math.max(t.oldest_age_ms, r.oldest_age_ms);
    }
  }
  return [...byType.values()];
}
