/**
 * LISTEN on the schema's ready channel over a connection of its own (a pooled one would be
 * handed to other users between notifications). When the connection drops it reconnects with
 * backoff, LISTENs again, and tells the listeners `*` once: notifications sent meanwhile are
 * lost, so everything is worth a look. The first connection does the same, which also tells a
 * caller when listening has begun.
 *
 * An engine's store also holds the engine's liveness lock on this connection (engine-lock.ts),
 * taken again on every reconnect: it lives as long as the connection, as the lock must. While a
 * reconnect is pending the lock is free; other engines give a free lock FREE_LOCK_GRACE_MS
 * before they take this one for dead, so with a lock held it retries within 25 ms. Should it
 * stay away longer, its attempts are re-run elsewhere (their results here are then fenced) and
 * the heartbeat revives its row.
 */

import pg from "pg";
import type { Logger } from "pino";
import type { ReadyNotice } from "../runs.js";
import { TAKE_ENGINE_LOCK } from "./engine-lock.js";

const EVERYTHING: ReadyNotice = { agentType: "*", runIds: [] };

/**
 * More run ids than this in one notice: the listener is told to look in the database instead.
 * (A payload must stay under 8,000 bytes; a run id is 36.)
 */
const MAX_NOTICE_RUNS = 100;

/** A notice as a NOTIFY payload: the agent type, then the run ids, separated by spaces (agent types have none). */
export function noticePayload({ agentType, runIds }: ReadyNotice): string {
  return runIds.length === 0 || runIds.length > MAX_NOTICE_RUNS ? agentType : `${agentType} ${runIds.join(" ")}`;
}

function readyNotice(payload: string): ReadyNotice {
  const [agentType = "*", ...runIds] = payload.split(" ");
  return { agentType, runIds };
}

const FIRST_RETRY_MS = 100;
const MAX_RETRY_MS = 30_000;
const FIRST_LOCKED_RETRY_MS = 25;
const MAX_LOCKED_RETRY_MS = 1_000;

export class ReadyListener {
  private readonly listeners = new Set<(notice: ReadyNotice) => void>();
  private client: pg.Client | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private failures = 0;
  private started = false;
  private closed = false;
  /** The liveness lock this connection holds (engine-lock.ts), once an engine asked for one. */
  private lockName: string | null = null;
  /** True once the current client listens (and holds the lock, if any). */
  private connected = false;

  /** True while the connection is up (listening, and holding the lock if one was asked for). */
  get listening(): boolean {
    return this.connected;
  }
  /**
   * The server process of the connection while it is up (pg_locks' pid of its lock), else null:
   * the id the server gave at startup (BackendKeyData; pg keeps it untyped as `processID`). A
   * pooler gives an id of its own there, which no server process has.
   */
  get backendPid(): number | null {
    const client = this.client as (pg.Client & { processID?: number | null }) | null;
    return this.connected ? (client?.processID ?? null) : null;
  }
  /** Those waiting for the next connection attempt's outcome (holdLock). */
  private waiting: { resolve: () => void; reject: (e: Error) => void }[] = [];

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly channel: string,
    private readonly channelSql: string,
    private readonly logger: Pick<Logger, "warn" | "error">,
    /** Called each time the connection is (again) up, before the listeners hear `*`. */
    private readonly onConnected: () => void = () => {},
    /**
     * Whether a server process is one of this engine's own connections: its notices are left out
     * (the engine knows what it made ready; hearing itself would only cost a flush). Behind a
     * transaction-mode pooler the ids differ and every notice is heard.
     */
    private readonly isOwn: (processId: number) => boolean = () => false,
  ) {}

  add(listener: (notice: ReadyNotice) => void): void {
    this.listeners.add(listener);
    this.start();
  }

  /**
   * Holds the advisory lock `name` on this connection from now on, and again after every
   * reconnect. Resolves once it is held (or found held by another session: logged, since that
   * is a bug or a hash collision, and the engine runs on, found dead by its heartbeat only).
   * @throws the connection's error when it cannot be opened (reconnecting goes on meanwhile).
   */
  holdLock(name: string): Promise<void> {
    this.lockName = name;
    const client = this.client;
    if (client && this.connected) return this.takeLock(client).then(() => undefined);
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.start();
    });
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    void this.connect();
  }

  /** Takes the lock asked for, if any, on `client`; returns its name. */
  private async takeLock(client: pg.Client): Promise<string | null> {
    const name = this.lockName;
    if (name === null) return null;
    const { rows } = await client.query<{ locked: boolean }>(TAKE_ENGINE_LOCK, [name]);
    if (rows[0]?.locked !== true) {
      this.logger.error(
        { lock: name },
        "skein: another PostgreSQL session holds this engine's liveness lock: two engines share this engine id (give each its own engineId), or two ids share a hash; other engines will find this one dead only once its heartbeat expires",
      );
    }
    return name;
  }

  private settleWaiting(err?: Error): void {
    for (const w of this.waiting.splice(0)) {
      if (err) w.reject(err);
      else w.resolve();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.connected = false;
    this.settleWaiting(new Error("skein: the store was closed before its listener connected"));
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    this.retryTimer = null;
    if (this.closed) return;
    const client = new pg.Client(this.config);
    this.client = client;
    let lost = false;
    const onLost = (err?: Error) => {
      if (lost) return;
      lost = true;
      this.lost(client, err);
    };
    client.on("error", onLost);
    client.on("end", () => onLost());
    client.on("notification", (n) => {
      if (n.channel === this.channel && !this.isOwn(n.processId)) this.emit(readyNotice(n.payload ?? "*"));
    });
    try {
      await client.connect();
      // The lock before LISTEN: once this connection counts as up, it holds the lock.
      const locked = await this.takeLock(client);
      await client.query(`LISTEN ${this.channelSql}`);
      // Asked for while this connection was being set up (after the lock above): take it now.
      if (this.lockName !== locked) await this.takeLock(client);
    } catch (e) {
      this.settleWaiting(e as Error);
      onLost(e as Error);
      return;
    }
    if (this.client !== client) return; // closed meanwhile
    this.failures = 0;
    this.connected = true;
    this.settleWaiting();
    this.onConnected();
    this.emit(EVERYTHING);
  }

  private lost(client: pg.Client, err: Error | undefined): void {
    if (this.client !== client) return;
    this.client = null;
    this.connected = false;
    client.end().catch(() => undefined);
    if (this.closed) return;
    // An engine's lock is free until the listener is back, and others take the engine for dead
    // once it has been free for FREE_LOCK_GRACE_MS: a connection cut while the server is up is
    // back well within that, and after an outage the lock is back within a second.
    const delay =
      this.lockName === null
        ? Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** this.failures)
        : Math.min(MAX_LOCKED_RETRY_MS, FIRST_LOCKED_RETRY_MS * 2 ** this.failures);
    this.failures += 1;
    this.logger.warn(
      { err, retry_ms: delay },
      "skein: lost the PostgreSQL connection that listens for ready visits; reconnecting",
    );
    this.retryTimer = setTimeout(() => void this.connect(), delay);
    // A store left open must not keep the process alive just to reconnect.
    this.retryTimer.unref();
  }

  private emit(notice: ReadyNotice): void {
    for (const listener of this.listeners) {
      try {
        listener(notice);
      } catch (err) {
        this.logger.warn({ err }, "skein: a ready listener threw");
      }
    }
  }
}
