/**
 * Who held an attempt of an external task (DESIGN §13). Once an attempt is claimed its holder
 * never changes, so this can be checked outside the transaction, before a report is evaluated
 * or queued; whether the attempt still runs is fenced again in the flush. The attempts this
 * engine handed out are kept in memory; others (another engine's claims, forgotten ones, a
 * restart) are read from the database: the row while the attempt runs, the `*.started` event
 * once it has ended.
 */
import { undoneExecutionId } from "../../core/compensation.js";
import { parseItemExecutionId } from "../../core/kinds/map.js";
import type { Compensation, Visit } from "../../core/types.js";
import type { Store, VisitKey } from "../../store/store.js";

export interface AttemptFacts {
  /** The agent type of the visit or compensation row. */
  agent_type: string;
  /**
   * Who claimed this attempt; null when it was never claimed; undefined when only the run's
   * history can tell (the attempt ended): ask `startedBy`, after the cheaper checks.
   */
  holder: string | null | undefined;
  /** The attempt is running as committed, its lease not passed; null: not read (known from memory). */
  running: boolean | null;
}

/** Attempts kept in memory (the oldest are forgotten first; a miss reads the database). */
const KEPT = 10_000;
const EVENTS_PAGE = 500;

export class AttemptHolders {
  /** By `<execution_id>#<attempt>`. */
  private readonly known = new Map<string, { holder: string; agent_type: string }>();

  constructor(private readonly store: Store) {}

  /** An attempt this engine just handed out. */
  remember(executionId: string, attempt: number, agentType: string, holder: string): void {
    this.known.set(`${executionId}#${attempt}`, { holder, agent_type: agentType });
    if (this.known.size > KEPT) this.known.delete(this.known.keys().next().value as string);
  }

  /** The agent type of an attempt this engine handed out and still remembers. */
  agentTypeOf(executionId: string, attempt: number): string | undefined {
    return this.known.get(`${executionId}#${attempt}`)?.agent_type;
  }

  /**
   * The attempt's holder and agent type; with `needRunning`, also whether it still runs (`now`:
   * the time its lease is judged by, null when only the database may judge it). Null when the
   * run has no such visit or compensation row.
   */
  async find(
    executionId: string,
    key: VisitKey,
    attempt: number,
    needRunning: boolean,
    now: number | null,
  ): Promise<AttemptFacts | null> {
    const hit = this.known.get(`${executionId}#${attempt}`);
    if (hit && !needRunning) return { ...hit, running: null };
    const item = parseItemExecutionId(executionId);
    if (item) return this.findItem(key, item.index, attempt, hit, now);
    const loaded = await this.store.readRun(key.run_id);
    const compensation = undoneExecutionId(executionId) !== null;
    const row: Visit | Compensation | undefined = compensation
      ? loaded?.compensations.find((c) => c.node_id === key.node_id && c.visit === key.visit)
      : loaded?.visits.find((v) => v.node_id === key.node_id);
    if (!row) return null;
    const current = row.visit === key.visit;
    const atAttempt = current && row.attempt === attempt;
    const running =
      atAttempt &&
      row.state === "RUNNING" &&
      (now === null || (row.lease_expires_at ?? Number.POSITIVE_INFINITY) > now);
    const holder = hit?.holder ?? (atAttempt ? row.holder : null);
    // Null and the row has not reached that attempt yet: never claimed. Otherwise it ended and
    // its holder was cleared: the history tells (a read of the run's events, so it comes last).
    const ended = holder === null && !(current && row.attempt < attempt);
    return { agent_type: row.agent_type, holder: ended ? undefined : holder, running };
  }

  /**
   * A map item's attempt, from its row: the row keeps the holder of its last attempt (claims
   * write it, nothing clears it), so an earlier attempt's holder is known only from memory.
   */
  private async findItem(
    key: VisitKey,
    index: number,
    attempt: number,
    hit: { holder: string; agent_type: string } | undefined,
    now: number | null,
  ): Promise<AttemptFacts | null> {
    const [row] = await this.store.listMapItems(key, { after: index - 1, limit: 1 });
    if (row?.index !== index || row.agent_type === null) return null;
    const atAttempt = row.attempt === attempt;
    const running =
      atAttempt &&
      row.state === "RUNNING" &&
      (now === null || (row.lease_expires_at ?? Number.POSITIVE_INFINITY) > now);
    const holder = hit?.holder ?? (atAttempt ? row.holder : null);
    return { agent_type: row.agent_type, holder, running };
  }

  /** The holder its `node.started` (or `compensation.started`) event recorded for the attempt. */
  async startedBy(executionId: string, key: VisitKey, attempt: number): Promise<string | null> {
    const compensation = undoneExecutionId(executionId) !== null;
    let afterSeq = 0;
    for (;;) {
      const page = await this.store.listEvents(key.run_id, { afterSeq, limit: EVENTS_PAGE });
      for (const e of page) {
        const started = compensation
          ? e.type === "compensation.started" && e.data.execution_id === executionId
          : e.type === "node.started" && e.node_id === key.node_id && e.visit === key.visit;
        if (started && e.data.attempt === attempt && typeof e.data.holder === "string") return e.data.holder;
      }
      const last = page[page.length - 1];
      if (!last || page.length < EVENTS_PAGE) return null;
      afterSeq = last.seq;
    }
  }
}
