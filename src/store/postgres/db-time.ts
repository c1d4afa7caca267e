/**
 * The database's clock between readings (DESIGN §7: on PostgreSQL the database's clock judges
 * every due time). Each transaction used to read it in a round trip of its own before it could
 * compute a due time; a transaction whose runs the engine holds now sends everything in one round
 * trip (postgres-store.ts), so it takes the time from here: the database's time as last read,
 * carried forward by this process's monotonic clock, never by its wall clock, whose skew is what
 * DESIGN §7 guards against. The same round trip checks the estimate against the database's own
 * (migrations/019_trusted_runs.sql) and aborts it when the two differ by more than `TOLERANCE_MS`;
 * past `MAX_AGE_MS` without a reading there is no estimate and the next transaction reads first.
 */

/** The longest an estimate is carried forward without a reading, ms. */
const MAX_AGE_MS = 1_000;
/** How far the estimate may be from the database's clock when it checks it, ms. */
export const TOLERANCE_MS = 250;

export class DatabaseTime {
  /** The last reading, and this process's monotonic time when it arrived. */
  private read = 0;
  private readAt = Number.NEGATIVE_INFINITY;
  /** The last estimate given: estimates never go back. */
  private given = 0;

  constructor(private readonly monotonic: () => number = () => performance.now()) {}

  /** The database said it was `now` (epoch ms), in an answer that just arrived. */
  saw(now: number): void {
    this.read = now;
    this.readAt = this.monotonic();
  }

  /** The database's time now, or null when the last reading is too old to carry forward. */
  estimate(): number | null {
    const age = this.monotonic() - this.readAt;
    if (!(age <= MAX_AGE_MS)) return null;
    this.given = Math.max(this.given, Math.floor(this.read + age));
    return this.given;
  }

  /** The estimate was found off: the next transaction reads the time first. */
  forget(): void {
    this.readAt = Number.NEGATIVE_INFINITY;
  }
}
