/**
 * A pooled connection held for a transaction or a read. pg reports a dead socket as an `error`
 * event on the client as well as by failing its queries: the session notes it, so the failure
 * is reported as a lost connection and the connection is destroyed rather than reused.
 */
import type pg from "pg";
import { connectError, type Phase, statementError } from "./pg-errors.js";

/** Statements each connection has PREPAREd (SQL-level), by name: they outlive transactions. */
const preparedOn = new WeakMap<pg.PoolClient, Set<string>>();

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

  /** Several statements in one round trip (simple protocol, no parameters): one result each. */
  async multi(sql: string, phase: Phase = "transaction"): Promise<pg.QueryResult[]> {
    const result = (await this.query(sql, phase)) as unknown;
    return Array.isArray(result) ? (result as pg.QueryResult[]) : [result as pg.QueryResult];
  }

  /**
   * Makes `name` a prepared statement of this connection (a round trip, once per connection),
   * so that a multi-statement round trip (the simple protocol) can EXECUTE it with its kept plan.
   */
  async prepare(name: string, text: string): Promise<void> {
    let names = preparedOn.get(this.client);
    if (!names) preparedOn.set(this.client, (names = new Set()));
    if (names.has(name)) return;
    await this.query(`PREPARE ${name} AS ${text}`);
    names.add(name);
  }

  /** Gives the connection back to the pool, or closes it when it failed or is in an unknown state. */
  release(destroy = false): void {
    this.client.off("error", this.onError);
    this.client.release(destroy || this.broken);
  }
}
