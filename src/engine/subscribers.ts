/** Live subscribers of an engine's events (`Engine.subscribe`): all runs, or one run's. */
import type { Logger } from "pino";
import type { RunEvent } from "../core/types.js";
import type { EventListener } from "./engine-options.js";

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

  /** Hands each event to its listeners; one that throws is logged, the others still hear it. */
  publish(events: RunEvent[]): void {
    for (const e of events) {
      const forRun = this.byRun.get(e.run_id);
      for (const listener of forRun ? [...this.all, ...forRun] : this.all) {
        try {
          listener(e);
        } catch (err) {
          this.logger.error({ err, run_id: e.run_id }, "skein: an event listener threw");
        }
      }
    }
  }

  clear(): void {
    this.all.clear();
    this.byRun.clear();
  }
}
