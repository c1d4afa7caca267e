/**
 * LISTEN on the schema's ready channel over a connection of its own (a pooled one would be
 * handed to other users between notifications). When the connection drops it reconnects with
 * backoff, LISTENs again, and tells the listeners `*` once: notifications sent meanwhile are
 * lost, so everything is worth a look. The first connection does the same, which also tells a
 * caller when listening has begun.
 */

import pg from "pg";
import type { Logger } from "pino";
import type { ReadyNotice } from "../store.js";

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

export class ReadyListener {
  private readonly listeners = new Set<(notice: ReadyNotice) => void>();
  private client: pg.Client | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private failures = 0;
  private started = false;
  private closed = false;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly channel: string,
    private readonly channelSql: string,
    private readonly logger: Pick<Logger, "warn">,
  ) {}

  add(listener: (notice: ReadyNotice) => void): void {
    this.listeners.add(listener);
    if (!this.started) {
      this.started = true;
      void this.connect();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
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
      if (n.channel === this.channel) this.emit(readyNotice(n.payload ?? "*"));
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channelSql}`);
    } catch (e) {
      onLost(e as Error);
      return;
    }
    if (this.client !== client) return; // closed meanwhile
    this.failures = 0;
    this.emit(EVERYTHING);
  }

  private lost(client: pg.Client, err: Error | undefined): void {
    if (this.client !== client) return;
    this.client = null;
    client.end().catch(() => undefined);
    if (this.closed) return;
    const delay = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** this.failures);
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
