/**
 * A pooled connection held for a transaction or a read. pg reports a dead socket (or a FATAL
 * the server sends, like 57P01 from pg_terminate_backend) as an `error` event on the client as
 * well as by failing its queries. Every pooled connection has a listener for its whole life
 * (watchConnection), so that no such event is ever unhandled (it would crash the process),
 * whenever it comes: while the connection is idle, checked out between statements, or on its
 * way between the pool and a session. The failure is then reported as a lost connection
 * (transient) and the connection is destroyed rather than reused.
 *
 * Behind a transaction-mode pooler a session prepares nothing by name (`unnamed`): the pooler
 * may give the next transaction another server connection, which never saw the statement.
 */
import type pg from "pg";
import { connectError, type Phase, sqlState, statementError } from "./pg-errors.js";

/** Connections whose socket failed: what they say next is a lost connection. */
const failed = new WeakSet<pg.ClientBase>();

/** Listens for `error` on a pooled connection for its whole life: call on the pool's `connect`. */
export function watchConnection(client: pg.ClientBase): void {
  client.on("error", () => failed.add(client));
}

export class Session {
  private constructor(
    private readonly client: pg.PoolClient,
    private readonly target: string,
    private readonly unnamed: boolean,
  ) {}

  /**
   * @param unnamed true behind a transaction-mode pooler: statements' names are dropped.
   * @throws DatabaseError when no connection can be opened (see connectError).
   */
  static async open(pool: pg.Pool, target: string, unnamed = false): Promise<Session> {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (e) {
      throw connectError(e, target);
    }
    return new Session(client, target, unnamed);
  }

  /** The transaction on this connection was committed by `commitWith`. */
  committed = false;

  /**
   * Statements that need no answer before the next one's (a transaction's BEGIN and its lock
   * check: see `defer`), sent with it, and what to do with their results.
   */
  private deferred: { configs: pg.QueryConfig[]; answered: (results: pg.QueryResult[]) => void } | null = null;

  /**
   * Sends `configs` with the next statement, in the same round trip, instead of now; `answered`
   * gets their results. When one of them fails, the next statement fails with its error.
   */
  defer(configs: pg.QueryConfig[], answered: (results: pg.QueryResult[]) => void): void {
    this.deferred = { configs, answered };
  }

  /** Deferred statements were given and not sent: the server has not seen the transaction begin. */
  get unsent(): boolean {
    return this.deferred !== null;
  }

  get isBroken(): boolean {
    return failed.has(this.client);
  }

  /** Runs one statement; a lost connection or a transient failure becomes a DatabaseError (statementError). */
  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    config: pg.QueryConfig | string,
    phase: Phase = "transaction",
  ): Promise<pg.QueryResult<R>> {
    if (this.deferred) {
      const [result] = await this.pipeline([typeof config === "string" ? { text: config } : config], phase);
      return result as pg.QueryResult<R>;
    }
    try {
      return await this.client.query<R>(this.statement(config));
    } catch (e) {
      throw statementError(e, this.target, { broken: this.isBroken, phase });
    }
  }

  /**
   * Several statements in one round trip: sent together (the pool's connections are in pg's
   * pipeline mode), each with its parameters bound, answered in order. When one fails, those
   * after it fail too (the transaction is aborted): the first failure is the one thrown.
   */
  async pipeline(configs: readonly pg.QueryConfig[], phase: Phase = "transaction"): Promise<pg.QueryResult[]> {
    const deferred = this.deferred;
    this.deferred = null;
    const sent = deferred ? [...deferred.configs, ...configs] : configs;
    const settled = await Promise.allSettled(sent.map((config) => this.client.query(this.statement(config))));
    const results: pg.QueryResult[] = [];
    for (const [i, outcome] of settled.entries()) {
      if (outcome.status === "rejected") {
        // The server answered a statement before the COMMIT with an error (the FATAL of a
        // terminated connection among them): answers come in order, so it never ran the COMMIT,
        // and the transaction did not commit, whatever happened to the connection after.
        const beforeCommit = phase === "commit" && i < sent.length - 1 && sqlState(outcome.reason) !== undefined;
        throw statementError(outcome.reason, this.target, {
          broken: this.isBroken,
          phase: beforeCommit ? "transaction" : phase,
        });
      }
      results.push(outcome.value);
    }
    if (!deferred) return results;
    deferred.answered(results.slice(0, deferred.configs.length));
    return results.slice(deferred.configs.length);
  }

  /**
   * The transaction's last statement and its COMMIT in one round trip. A lost connection leaves
   * the outcome unknown (phase "commit"); a failed statement aborts the transaction, and the
   * COMMIT that follows it only ends it: its failure is the one thrown.
   */
  async commitWith(config: pg.QueryConfig): Promise<pg.QueryResult> {
    const [result, commit] = await this.pipeline([config, { text: "COMMIT" }], "commit");
    // What a COMMIT answers in a transaction that failed: nothing was written.
    if (commit?.command !== "COMMIT") throw new Error(`skein: PostgreSQL answered COMMIT with ${commit?.command}`);
    this.committed = true;
    return result as pg.QueryResult;
  }

  /** The statement as sent: without its name when unnamed. */
  private statement(config: pg.QueryConfig | string): pg.QueryConfig | string {
    if (!this.unnamed || typeof config === "string" || config.name === undefined) return config;
    const { name: _name, ...unnamed } = config;
    return unnamed;
  }

  /** Gives the connection back to the pool, or closes it when it failed or is in an unknown state. */
  release(destroy = false): void {
    this.client.release(destroy || this.isBroken);
  }
}
