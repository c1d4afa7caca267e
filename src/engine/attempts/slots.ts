/**
 * Slots held at once, per holder and in total (DESIGN §13): long-poll claims, event streams.
 * Each refusal is a LimitError: `client` (429) over the holder's cap, `engine` (503) over the
 * total, with when to try again.
 */
import { LimitError } from "../../errors.js";

export interface SlotRefusals<K> {
  /** Seconds a refused caller is told to wait. */
  retryAfterSeconds: number;
  /** The message when `holder` already holds `held` slots, its cap. */
  holder(held: number, holder: K): string;
  /** The message when `total` slots are held in all, the cap. */
  total(total: number): string;
}

export class Slots<K> {
  private held = 0;
  private readonly byHolder = new Map<K, number>();

  constructor(
    private readonly perHolder: number,
    private readonly max: number,
    private readonly refusals: SlotRefusals<K>,
  ) {}

  /**
   * Takes a slot for `holder` (null: counted in the total only).
   * @returns the function that gives it back (once; calling it again does nothing)
   * @throws LimitError over a cap
   */
  take(holder: K | null): () => void {
    const mine = holder === null ? 0 : (this.byHolder.get(holder) ?? 0);
    const r = this.refusals;
    if (holder !== null && mine >= this.perHolder) {
      throw new LimitError(r.holder(mine, holder), "client", r.retryAfterSeconds);
    }
    if (this.held >= this.max) throw new LimitError(r.total(this.held), "engine", r.retryAfterSeconds);
    this.held += 1;
    if (holder !== null) this.byHolder.set(holder, mine + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.held -= 1;
      if (holder === null) return;
      const left = (this.byHolder.get(holder) ?? 1) - 1;
      if (left === 0) this.byHolder.delete(holder);
      else this.byHolder.set(holder, left);
    };
  }
}
