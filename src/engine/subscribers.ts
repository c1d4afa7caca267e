/**
 * Listeners of an engine's events (`Engine.subscribe`): all runs, or one run's; a run's from a
 * seq of its history. Only events this process commits are live (another process's engine or
 * client publishes its own): a replay reads the database, so it also shows what others wrote.
 * Progress (`node.progress`) is stored like any event (DESIGN §15): replayed with the rest.
 */
import type { Logger } from "pino";
import type { LiveEvent, RunEvent } from "../core/types.js";
import { ValidationError } from "../errors.js";
import type { EventListener, SubscribeFilter } from "./engine-options.js";
import { refuseNul } from "./identifiers.js";

/** Stored events read per page while a subscription replays a run's history. */
const REPLAY_PAGE = 500;

/** How a subscription reads a run's stored history (Store.listEvents: `afterSeq` exclusive). */
export type ReadEvents = (runId: string, options: { afterSeq: number; limit: number }) => Promise<RunEvent[]>;

export interface ReplayOptions {
  /** The first seq to deliver (stored events with seq >= from, then live ones). */
  from: number;
  readEvents: ReadEvents;
  /** The replay could not read the history: the subscription has ended. Default: logged. */
  onError?: ((err: unknown) => void) | undefined;
  /** The history (and what was buffered meanwhile) has been delivered: what follows is live. */
  onLive?: (() => void) | undefined;
}

export class Subscribers {
  private readonly all = new Set<EventListener>();
  private readonly byRun = new Map<string, Set<EventListener>>();

  constructor(private readonly logger: Logger) {}

  /** Adds a listener; the function returned removes it. */
  add(listener: EventListener, runId: string | undefined): () => void {
    if (runId === undefined) {
      this.all.add(listener);
      return () => this.all.delete(listener);
    }
    const set = this.byRun.get(runId) ?? new Set<EventListener>();
    this.byRun.set(runId, set);
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.byRun.get(runId) === set) this.byRun.delete(runId);
    };
  }

  /**
   * Engine.subscribe: every event, one run's, or one run's from a seq (`from`, read with `readEvents`).
   * @throws ValidationError for `from` without `run_id`, or a `from` that is not an integer >= 0
   */
  subscribe(listener: EventListener, filter: SubscribeFilter, readEvents: ReadEvents): () => void {
    const { run_id, from } = filter;
    refuseNul({ run_id });
    if (from === undefined) return this.add(listener, run_id);
    if (!Number.isSafeInteger(from) || from < 0) {
      throw new ValidationError("Invalid subscription", [
        { path: "from", message: `must be an integer >= 0 (a seq of the run's events), got ${String(from)}` },
      ]);
    }
    if (typeof run_id !== "string" || run_id === "") {
      throw new ValidationError("Invalid subscription", [
        { path: "from", message: "needs run_id: only one run's history can be replayed; pass { run_id, from }" },
      ]);
    }
    return this.replay(listener, run_id, { from, readEvents, onError: filter.onError });
  }

  /**
   * A run's events from seq `from`: its stored history a page at a time, then live ones, each
   * once and in seq order. The live listener is added first and buffers while the history is
   * read, so an event committed during the replay is either read or buffered (or both: the seq
   * says which were delivered). A run's events are written one transaction at a time, in seq
   * order, so every seq after the last delivered one is new. The function returned removes it,
   * and stops a replay in progress.
   */
  replay(listener: EventListener, runId: string, options: ReplayOptions): () => void {
    let lastDelivered = options.from - 1;
    let buffered: RunEvent[] | null = [];
    let stopped = false;
    const deliver = (e: RunEvent) => {
      if (stopped || e.seq <= lastDelivered) return;
      lastDelivered = e.seq;
      this.call(listener, e);
    };
    const remove = this.add((e) => {
      if (buffered) buffered.push(e);
      else deliver(e);
    }, runId);
    const stop = () => {
      stopped = true;
      buffered = null;
      remove();
    };
    const readHistory = async () => {
      for (;;) {
        const page = await options.readEvents(runId, { afterSeq: lastDelivered, limit: REPLAY_PAGE });
        if (stopped) return;
        for (const e of page) deliver(e);
        if (page.length < REPLAY_PAGE) break;
      }
      const live = buffered ?? [];
      buffered = null;
      for (const e of live) deliver(e);
      if (!stopped) options.onLive?.();
    };
    readHistory().catch((err: unknown) => {
      if (stopped) return; // the engine closed (or the caller left) while a page was read
      stop();
      if (options.onError) options.onError(err);
      else this.logger.error({ err, run_id: runId }, "skein: a subscription could not read the run's history: ended");
    });
    return stop;
  }

  /** Hands each event to its listeners; one that throws is logged, the others still hear it. */
  publish(events: RunEvent[]): void {
    for (const e of events) {
      const forRun = this.byRun.get(e.run_id);
      for (const listener of forRun ? [...this.all, ...forRun] : this.all) this.call(listener, e);
    }
  }

  clear(): void {
    this.all.clear();
    this.byRun.clear();
  }

  private call(listener: EventListener, e: LiveEvent): void {
    try {
      listener(e);
    } catch (err) {
      this.logger.error({ err, run_id: e.run_id }, "skein: an event listener threw");
    }
  }
}
