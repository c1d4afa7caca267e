/**
 * Liveness the database can see (DESIGN §8): every engine holds a session-level advisory lock
 * named after its schema and engine id on its ready listener's connection, for as long as it
 * runs. PostgreSQL releases the lock the moment that connection's backend ends: when the
 * process dies however it dies (SIGKILL included), the kernel closes its socket and the server
 * ends the backend. So another engine's sweep finds a registered engine whose lock is free and,
 * if it is still free FREE_LOCK_GRACE_MS later, takes it as dead, instead of waiting for its
 * heartbeat to go stale, which stays the fallback for an engine that hangs with its connection
 * open (or a machine gone without closing its sockets, found by TCP keepalives only later).
 *
 * The two-key form: the first key says "a Skein engine" (and keeps these apart from the
 * workflow registration locks), the second is `hashtext('<schema>.<engine_id>')`. Two ids
 * of one hash would share a lock: the one that starts second cannot take it (logged), and each
 * looks alive while the other holds it, so a collision only delays a recovery to the heartbeat's.
 */

/**
 * How long another engine's lock must stay free before it counts as dead. A live engine whose
 * listener's connection was cut (pg_terminate_backend, a failover) reconnects and takes its
 * lock back within this (ready-listener.ts retries within 25 ms, then backs off). It was 250 ms,
 * and fault case b (connections terminated every few hundred ms on a busy machine) then saw a
 * live engine's reconnect take longer: its attempt ran twice. A run twice is worse than a
 * recovery in 2.5 s instead of 0.75 s (it was 30 s before the lock).
 */
export const FREE_LOCK_GRACE_MS = 2000;

/** First key of engine liveness locks: "sken". */
export const ENGINE_LOCK_NAMESPACE = 0x736b656e;

/** The text whose hash is the lock's second key: one name per engine and schema. */
export function engineLockName(schema: string, engineId: string): string {
  return `${schema}.${engineId}`;
}

/**
 * Takes the lock named $1 without waiting: `locked` is false when another session holds it
 * (this session taking it again only counts it twice, which its end releases alike).
 */
export const TAKE_ENGINE_LOCK = `SELECT pg_try_advisory_lock(${ENGINE_LOCK_NAMESPACE}, hashtext($1)) AS locked`;

/**
 * Whether the backend of pid $1 holds the lock named $2: behind a pooler, the check that the
 * listen connection's lock is seen through the pooler (postgres-store.ts).
 */
export const ENGINE_LOCK_HELD_BY = `SELECT EXISTS (
  SELECT 1 FROM pg_locks l
   WHERE l.locktype = 'advisory' AND l.granted AND l.pid = $1 AND l.objsubid = 2
     AND l.classid = ${ENGINE_LOCK_NAMESPACE}::oid AND l.objid = hashtext($2)::oid
     AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS held`;

/**
 * True when no session holds the lock of engine `engineId` (an SQL expression) of schema
 * `schema` (a parameter, text). It reads pg_locks and takes nothing: a sweep that tried the
 * lock instead (pg_try_advisory_lock, then unlock) would hold a live engine's lock for a moment,
 * and an engine reconnecting its listener in that moment would find its own lock taken and run
 * without one. Only granted locks count: a session waiting for a lock does not hold it. The
 * subquery is uncorrelated, so pg_lock_status() is read once per statement into a hash (a
 * correlated NOT EXISTS would read it again for every engine row); objid is never null for an
 * advisory lock, which NOT IN needs.
 */
export function engineLockFreeSql(schema: string, engineId: string): string {
  return `hashtext(${schema}::text || '.' || ${engineId})::oid NOT IN (
    SELECT l.objid FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.objid IS NOT NULL
       AND l.classid = ${ENGINE_LOCK_NAMESPACE}::oid
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))`;
}
