/**
 * A client of `GET /v1/stream` for tests: a real HTTP connection read as server-sent events, with
 * waits on what has arrived (no sleeps). Close every stream a test opened: `afterEach(closeStreams)`.
 */
import { get, type IncomingMessage } from "node:http";
import type { LiveEvent, RunEvent } from "../../src/index.js";
import { resendOnReset } from "../../src/worker/connection-reset.js";

/** One event as sent: its `event:` and `id:` lines (null when absent) and its parsed `data:`. */
export interface SseMessage {
  event: string | null;
  id: string | null;
  data: LiveEvent;
}

export class SseStream {
  messages: SseMessage[] = [];
  /** Comment lines (`: connected`, `: heartbeat`), without the colon. */
  comments: string[] = [];
  ended = false;
  private buffer = "";
  private readonly waiters = new Set<() => void>();

  constructor(
    readonly status: number,
    readonly res: IncomingMessage,
  ) {
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => {
      this.buffer += chunk;
      for (let i = this.buffer.indexOf("\n\n"); i >= 0; i = this.buffer.indexOf("\n\n")) {
        this.parse(this.buffer.slice(0, i));
        this.buffer = this.buffer.slice(i + 2);
      }
      this.notify();
    });
    res.on("end", () => {
      this.ended = true;
      this.notify();
    });
  }

  /** The run events sent (progress left out), in order. */
  get events(): RunEvent[] {
    return this.messages.flatMap((m) => (m.data.type === "node.progress" ? [] : [m.data]));
  }

  /** The `id:` of every event that had one. */
  get ids(): string[] {
    return this.messages.flatMap((m) => (m.id === null ? [] : [m.id]));
  }

  /** Resolves once `check` holds; rejects at once on a stream the server refused. */
  until(check: (s: SseStream) => boolean): Promise<void> {
    if (this.status !== 200) return Promise.reject(new Error(`the stream was refused: status ${this.status}`));
    return new Promise((resolve) => {
      const waiter = () => {
        if (!check(this)) return;
        this.waiters.delete(waiter);
        resolve();
      };
      this.waiters.add(waiter);
      waiter();
    });
  }

  close(): void {
    this.res.destroy();
  }

  private parse(block: string): void {
    const lines = block.split("\n");
    for (const line of lines) if (line.startsWith(":")) this.comments.push(line.slice(1).trim());
    const data = lines.find((l) => l.startsWith("data: "));
    if (data === undefined) return;
    this.messages.push({
      event: lines.find((l) => l.startsWith("event: "))?.slice(7) ?? null,
      id: lines.find((l) => l.startsWith("id: "))?.slice(4) ?? null,
      data: JSON.parse(data.slice(6)) as LiveEvent,
    });
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }
}

const open: SseStream[] = [];

/** Closes every stream opened since the last call. */
export function closeStreams(): void {
  for (const s of open.splice(0)) s.close();
}

/**
 * Opens `base + path` with `headers`; resolves once the server has started the stream (its
 * `: connected` comment), or at once with the status when it refused it.
 */
export function openStream(base: string, path: string, headers: Record<string, string>): Promise<SseStream> {
  // A GET: sent again once when a reset connection cut it before any answer (connection-reset.ts).
  return resendOnReset(true, () => requestStream(base, path, headers));
}

function requestStream(base: string, path: string, headers: Record<string, string>): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const req = get(`${base}${path}`, { headers }, (res) => {
      const stream = new SseStream(res.statusCode ?? 0, res);
      open.push(stream);
      if (stream.status !== 200) {
        res.resume();
        resolve(stream);
        return;
      }
      stream.until((s) => s.comments.includes("connected")).then(() => resolve(stream), reject);
    });
    req.on("error", reject);
  });
}
