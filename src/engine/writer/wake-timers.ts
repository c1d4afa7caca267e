/**
 * The dispatcher's two timers, on the engine's clock: the wake-up at the next moment something
 * falls due (a retry, a deadline, a TTL, a sleep's wake-up), and the periodic sweep. Either
 * firing asks for a flush that sweeps (`fired`).
 */
import type { Clock, TimerHandle } from "../../clock.js";

export class WakeTimers {
  private wakeTimer: { at: number; handle: TimerHandle } | null = null;
  private sweepTimer: TimerHandle | null = null;
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    /** A timer fired: the next flush looks for what fell due. */
    private readonly fired: () => void,
  ) {}

  /** Arms one timer for the next moment something falls due; `now` is the transaction's time as of arming. */
  armWake(now: number, due: number | null): void {
    if (due === null || (this.wakeTimer && this.wakeTimer.at <= due)) return;
    if (this.wakeTimer) this.clock.clearTimeout(this.wakeTimer.handle);
    const at = due;
    this.wakeTimer = {
      at,
      handle: this.clock.setTimeout(() => {
        this.wakeTimer = null;
        this.fired();
      }, at - now),
    };
  }

  /** Arms the sweep every `intervalMs` until `stop`: `each` runs first (a checkpoint), then the flush is asked for. */
  armSweep(intervalMs: number, each: () => void): void {
    this.sweepTimer = this.clock.setTimeout(() => {
      each();
      this.fired();
      if (!this.stopped) this.armSweep(intervalMs, each);
    }, intervalMs);
  }

  stop(): void {
    this.stopped = true;
    if (this.sweepTimer) this.clock.clearTimeout(this.sweepTimer);
    if (this.wakeTimer) this.clock.clearTimeout(this.wakeTimer.handle);
    this.sweepTimer = null;
    this.wakeTimer = null;
  }
}
