/**
 * Live events from `GET /v1/stream` (Server-Sent Events). EventSource cannot send an
 * Authorization header, and a token must never go in a URL, so the stream is read with fetch()
 * and parsed here. A dropped stream reconnects with a growing delay; a run's stream resumes
 * after the last event it delivered (`after`), so nothing is missed or repeated. Progress
 * (`event: node.progress`) is stored and replayed like the rest, and goes to `onProgress` only;
 * text sent as deltas (`{ delta }`) arrives there as the attempt's text so far (`{ content }`).
 */
import { authHeaders, errorOf, query, storedToken } from "./api.js";
import type { ProgressEvent, RunEvent } from "./types.js";

export interface StreamOptions {
  /** Only this run's events. */
  runId?: string;
  /** With runId: first replay the run's whole history, then follow it live. */
  replay?: boolean;
  onEvent(event: RunEvent): void;
  /** A running attempt's progress (left out when not given). */
  onProgress?(event: ProgressEvent): void;
  /** Called on each (re)connection: events of the time without a stream are not replayed unless `replay`. */
  onOpen?(): void;
}

const MAX_RETRY_MS = 10_000;

/** Opens the stream; the returned function closes it for good. */
export function openStream(options: StreamOptions): () => void {
  const controller = new AbortController();
  let lastSeq = options.replay ? 0 : undefined;
  let failures = 0;
  let retry: ReturnType<typeof setTimeout> | undefined;
  const texts = new TextSoFar();

  const connect = async () => {
    try {
      const path = `/v1/stream${query({ run_id: options.runId, after: options.runId ? lastSeq : undefined })}`;
      const token = storedToken();
      const res = await fetch(path, {
        headers: { accept: "text/event-stream", ...authHeaders(token) },
        signal: controller.signal,
        cache: "no-store",
      });
      if (!res.ok || !res.body) {
        const error = await errorOf(res, token);
        // No token, a refused one or an unknown run: trying again would get the same answer.
        if (res.status === 401 || res.status === 403 || res.status === 404) return;
        throw error;
      }
      failures = 0;
      options.onOpen?.();
      await readEvents(res.body, (name, data) => {
        if (name === "node.progress") {
          const event = JSON.parse(data) as ProgressEvent;
          if (typeof event.seq === "number") lastSeq = event.seq;
          options.onProgress?.(texts.add(event));
          return;
        }
        const event = JSON.parse(data) as RunEvent;
        lastSeq = event.seq;
        options.onEvent(event);
      });
    } catch {
      // A dropped connection or a server restart: reconnect below.
    }
    if (controller.signal.aborted) return;
    failures += 1;
    retry = setTimeout(connect, Math.min(MAX_RETRY_MS, 250 * 2 ** failures));
  };
  void connect();
  return () => {
    controller.abort();
    clearTimeout(retry);
  };
}

/**
 * Joins an attempt's text deltas (`{ delta }`, `{ turn, delta }`): each event comes out as its
 * stream's text so far (`{ content }`), which the views show. A new attempt, visit or turn
 * starts again (an attempt that was retried is superseded).
 */
class TextSoFar {
  private readonly texts = new Map<string, { key: string; text: string }>();

  add(e: ProgressEvent): ProgressEvent {
    const p = e.data.progress;
    if (p === null || typeof p !== "object" || Array.isArray(p) || typeof p.delta !== "string") return e;
    const { delta, ...rest } = p;
    const key = `${e.visit}:${e.data.attempt}:${JSON.stringify(rest)}`;
    const kept = this.texts.get(e.node_id);
    const text = (kept?.key === key ? kept.text : "") + delta;
    this.texts.set(e.node_id, { key, text });
    return { ...e, data: { ...e.data, progress: { ...rest, content: text } } };
  }
}

/** Calls `onData` with the name (`event:`, null without one) and data of each event of an SSE body (comments and ids skipped) until it ends. */
async function readEvents(
  body: ReadableStream<Uint8Array>,
  onData: (name: string | null, data: string) => void,
): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  let name: string | null = null;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    const lines = buffer.split(/\r?\n/);
    buffer = lines.pop() ?? "";
    for (const line of lines) {
      if (line === "") {
        if (data.length > 0) onData(name, data.join("\n"));
        data = [];
        name = null;
      } else if (line.startsWith("event:")) {
        name = line.slice(line.startsWith("event: ") ? 7 : 6);
      } else if (line.startsWith("data:")) {
        data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      }
    }
  }
}
