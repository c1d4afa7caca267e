/**
 * Following a run's stored events by seq: what the live view and `skein events --follow` show,
 * whichever process writes them (another process's engine publishes nothing here; SQLite has
 * no notifications), so the log is read when asked and every second.
 */
import type { Engine, RunEvent } from "../index.js";

/** How often the stored events are read for what other processes wrote. */
const POLL_MS = 1000;
const PAGE = 1000;
const END_EVENTS: ReadonlySet<string> = new Set(["run.succeeded", "run.failed", "run.cancelled"]);

/**
 * A run's stored events after `afterSeq`, handed to `listener` in order, each once: read when
 * asked and every POLL_MS. `ended` resolves once the events read say the run ended (a redrive
 * after an end starts it again). A failed read is left to the next one.
 */
export class StoredEvents {
  readonly ended: Promise<void>;
  private resolveEnded!: () => void;
  private isEnded = false;
  /** Reads run one after another; `again` coalesces the requests made during one. */
  private reading: Promise<void> | null = null;
  private again = false;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly engine: Engine,
    private readonly runId: string,
    private afterSeq: number | undefined,
    private readonly listener: (e: RunEvent) => void,
  ) {
    this.ended = new Promise((resolve) => {
      this.resolveEnded = resolve;
    });
    this.schedule();
  }

  /** Reads what was stored since the last read; resolves when that read (or a later one) is done. */
  read(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = (async () => {
      do {
        this.again = false;
        await this.readPages().catch(() => {});
      } while (this.again && !this.stopped);
      this.reading = null;
    })();
    return this.reading;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.read().then(() => this.schedule());
    }, POLL_MS);
  }

  private async readPages(): Promise<void> {
    for (;;) {
      const page = await this.engine.listEvents(this.runId, {
        limit: PAGE,
        ...(this.afterSeq === undefined ? {} : { afterSeq: this.afterSeq }),
      });
      for (const e of page) {
        this.afterSeq = e.seq;
        this.listener(e);
        if (END_EVENTS.has(e.type)) this.isEnded = true;
        else if (e.type === "run.retried") this.isEnded = false;
      }
      if (this.isEnded) this.resolveEnded();
      if (page.length < PAGE) return;
    }
  }
}
