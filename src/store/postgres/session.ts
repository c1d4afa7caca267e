/**
 * A pooled connection held for a transaction or a read. pg reports a dead socket as an `error`
 * event on the client as well as by failing its queries: the session notes it, so the failure
 * is reported as a lost connection and the connection is destroyed rather than reused.
 */
import type pg from "pg";
import { connectError, type Phase, statementError } from "./pg-errors.js";

export class Session {
  private broken = false;
  private readonly onError = () => {
    this.broken = true;
  };

  private constructor(
    private readonly client: pg.PoolClient,
    private readonly target: string,
  ) {
    client.on("error", this.onError);
  }

  /** @throws DatabaseError when no connection can be opened (see connectError). */
  static async open(pool: pg.Pool, target: string): Promise<Session> {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (e) {
      throw connectError(e, target);
    }
    return new Session(client, target);
  }

  get isBroken(): boolean {
    return this.broken;
  }

  /** Runs one statement; a lost connection or a transient failure becomes a DatabaseError (statementError). */
  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    config: pg.QueryConfig | string,
    phase: Phase = "transaction",
  ): Promise<pg.QueryResult<R>> {
    try {
      return await this.client.query<R>(config);
    } catch (e) {
      throw statementError(e, this.target, { broken: this.broken, phase });
    }
  }

  /**
   * Several statements in one round trip: sent together (the pool's connections are in pg's
   * pipeline mode), each with its parameters bound, answered in order. When one fails, those
   * after it fail too (the transaction is aborted): the first failure is the one thrown.
   */
  async pipeline(configs: readonly pg.QueryConfig[], phase: Phase = "transaction"): Promise<pg.QueryResult[]> {
    const settled = await Promise.allSettled(configs.map((config) => this.client.query(config)));
    const results: pg.QueryResult[] = [];
    for (const outcome of settled) {
      if (outcome.status === "rejected")
        throw statementError(outcome.reason, this.target, { broken: this.broken, phase });
      results.push(outcome.value);
    }
    return results;
  }

  /** Gives the connection back to the pool, or closes it when it failed or is in an unknown state. */
  release(destroy = false): void {
    this.client.off("error", this.onError);
    this.client.release(destroy || this.broken);
  }
}
