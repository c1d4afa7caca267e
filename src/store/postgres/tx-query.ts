/** What a PostgreSQL facet runs its statements through: the transaction's query (PostgresTx.q). */

/** A statement, named when it is prepared once per connection, and its parameters. */
export type Query = <R extends object>(config: { name?: string; text: string }, values: unknown[]) => Promise<R[]>;

/** A transaction as its facets' functions see it (passed explicitly: nothing is built per transaction). */
export interface TxQuery {
  q: Query;
}

/** The database's time in epoch ms. clock_timestamp(), not now(): now() is the transaction's start. */
export const DB_NOW = "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint";
