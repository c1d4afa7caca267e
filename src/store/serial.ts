/**
 * Runs async functions one at a time, in call order: a store's transactions share one
 * connection (SQLite) or must not interleave (one engine's flushes on PostgreSQL).
 */
export class Serial {
  private tail: Promise<unknown> = Promise.resolve();

  /** Runs `fn` once every function queued before it has settled. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn, fn);
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Settles when everything queued so far has. */
  async idle(): Promise<void> {
    await this.tail;
  }
}
