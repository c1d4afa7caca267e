/**
 * Progress of running attempts (DESIGN §11.6, §15): `task.progress` in process and a worker's
 * `POST /v1/tasks/{execution_id}/progress`, kept as the run's `node.progress` events: a flush
 * input each, written with whatever else the flush writes (never a write per token), fenced like
 * a step (an attempt that no longer holds its visit adds nothing), delivered to subscribers once
 * committed and replayed with the rest of the run's history.
 *
 * Per attempt, the first value goes at once; values offered within `intervalMs` after it wait
 * for the window's end (on the engine's clock, so ManualClock tests are deterministic). Text
 * deltas (`{ delta: "..." }`, with the same other fields) offered meanwhile are joined, in order:
 * no text is lost. Any other value replaces the one waiting (the latest wins). When the attempt
 * ends, what waits goes before its result. The caller offers only values of attempts it knows
 * to be held.
 */
import type { Logger } from "pino";
import type { Clock, TimerHandle } from "../../clock.js";
import { isTextDelta } from "../../core/progress.js";
import type { EventType, Json, RunEvent } from "../../core/types.js";
import { jsonProblem } from "../json.js";
import type { Input } from "../writer/inputs.js";

/** Events after which the attempt they name no longer holds its visit. */
const ATTEMPT_ENDS: ReadonlySet<EventType> = new Set<EventType>([
  "node.succeeded",
  "node.failed",
  "node.retrying",
  "node.interrupted",
  "node.cancelled",
  "compensation.succeeded",
  "compensation.retrying",
  "compensation.failed",
]);

/** The attempt a progress value comes from. */
export interface ProgressSource {
  run_id: string;
  node_id: string;
  visit: number;
  attempt: number;
  execution_id: string;
  trace_id: string;
}

interface Stream {
  attempt: number;
  /** Until when a new value waits for the window's end (epoch ms). */
  windowEnds: number;
  timer: TimerHandle | null;
  /** The value waiting for the window's end. */
  pending: { progress: Json } | null;
  /** A non-JSON value was logged for this attempt: later ones are dropped quietly. */
  warned: boolean;
  /** A worker's attempt: the holder checked, and when (null: in process, held in memory). */
  checked: { holder: string; at: number } | null;
}

/**
 * Attempts with a stream kept at once. Streams end with their attempt; one whose end this
 * engine never hears (another engine applied a worker's report) is forgotten, oldest first.
 */
const KEPT = 10_000;
/**
 * How long a worker's holder check stands for its later progress, ms: within it a post of the
 * same holder reads nothing. Bounds how long a stream whose end this engine did not hear (another
 * engine applied the report, or the end committed while the check read the row) is taken for live.
 */
const CHECK_STANDS_MS = 1000;

export class ProgressStreams {
  /** By execution_id: a visit runs one attempt at a time. */
  private readonly streams = new Map<string, Stream>();

  constructor(
    private readonly o: {
      clock: Clock;
      /** 0: every value is kept. */
      intervalMs: number;
      /** The writer's port: each kept value is a `progress` input. */
      submit: (input: Extract<Input, { kind: "progress" }>) => void;
      logger: Logger;
      /** Largest value, in bytes of JSON (the engine's maxPayloadBytes). */
      maxBytes: number;
    },
  ) {}

  /**
   * Offers a value of a held attempt: false when it was dropped (not JSON, or too large: one
   * warning per attempt is logged). The value is copied: later changes to it are not seen.
   * `checkedHolder`: a worker's holder, just checked against the database (see `heldBy`).
   */
  offer(source: ProgressSource, data: unknown, checkedHolder?: string): boolean {
    let stream = this.streams.get(source.execution_id);
    if (stream === undefined || stream.attempt !== source.attempt) {
      if (stream) this.end(source.execution_id);
      stream = { attempt: source.attempt, windowEnds: 0, timer: null, pending: null, warned: false, checked: null };
      this.streams.set(source.execution_id, stream);
      if (this.streams.size > KEPT) this.end(this.streams.keys().next().value as string);
    }
    if (checkedHolder !== undefined) stream.checked = { holder: checkedHolder, at: this.o.clock.now() };
    const progress = this.copy(source, stream, data);
    if (progress === null) return false;
    const now = this.o.clock.now();
    if (this.o.intervalMs <= 0 || (stream.timer === null && now >= stream.windowEnds)) {
      stream.windowEnds = now + this.o.intervalMs;
      this.keep(source.execution_id, stream, progress);
      return true;
    }
    const waiting = stream.pending?.progress;
    const both = waiting === undefined ? null : joined(waiting, progress, this.o.maxBytes);
    // A waiting delta that cannot take this one goes now: text is never dropped.
    if (both === null && waiting !== undefined && isTextDelta(waiting)) this.keep(source.execution_id, stream, waiting);
    stream.pending = { progress: both ?? progress };
    if (stream.timer === null) {
      const open = stream;
      const id = source.execution_id;
      stream.timer = this.o.clock.setTimeout(() => this.windowEnded(id, open), stream.windowEnds - now);
    }
    return true;
  }

  /**
   * Whether `holder` was found to hold this running attempt less than CHECK_STANDS_MS ago and its
   * end has not been heard since: its next progress needs no read.
   */
  heldBy(executionId: string, attempt: number, holder: string): boolean {
    const stream = this.streams.get(executionId);
    const checked = stream?.attempt === attempt ? stream.checked : null;
    return checked !== null && checked.holder === holder && this.o.clock.now() - checked.at < CHECK_STANDS_MS;
  }

  /**
   * The attempt's stream ends (its result is about to be submitted, it was aborted, its lease
   * lost): what waits is submitted first, so it lands before the result (or is fenced).
   */
  end(executionId: string, attempt?: number): void {
    const stream = this.streams.get(executionId);
    if (!stream || (attempt !== undefined && stream.attempt !== attempt)) return;
    if (stream.timer !== null) this.o.clock.clearTimeout(stream.timer);
    stream.timer = null;
    if (stream.pending) this.keep(executionId, stream, stream.pending.progress);
    this.streams.delete(executionId);
  }

  /**
   * Ends the streams of attempts that committed events end (a worker's report, a lease or
   * deadline passed, a cancel): for external attempts, whose end this engine learns from them.
   */
  ended(events: readonly RunEvent[]): void {
    if (this.streams.size === 0) return;
    for (const e of events) {
      if (!ATTEMPT_ENDS.has(e.type) || e.node_id === null || e.visit === null) continue;
      const named = e.data.execution_id;
      this.end(typeof named === "string" ? named : `${e.run_id}:${e.node_id}:${e.visit}`);
    }
  }

  /** Drops every stream and what waits in it (the engine closes: nothing is written after). */
  clear(): void {
    for (const stream of this.streams.values()) if (stream.timer !== null) this.o.clock.clearTimeout(stream.timer);
    this.streams.clear();
  }

  private windowEnded(executionId: string, stream: Stream): void {
    stream.timer = null;
    if (stream.pending === null) return;
    stream.windowEnds = this.o.clock.now() + this.o.intervalMs;
    this.keep(executionId, stream, stream.pending.progress);
  }

  private keep(executionId: string, stream: Stream, progress: Json): void {
    stream.pending = null;
    this.o.submit({ kind: "progress", execution_id: executionId, attempt: stream.attempt, progress });
  }

  /** The value as JSON, copied; null (and a warning, once per attempt) when it is not JSON or too large. */
  private copy(source: ProgressSource, stream: Stream, data: unknown): Json | null {
    const flat = flatCopy(data, this.o.maxBytes);
    if (flat !== undefined) return flat;
    const problem = jsonProblem(data, "progress");
    const text = problem === null ? JSON.stringify(data) : "";
    const tooLarge = problem === null && text.length * 3 > this.o.maxBytes && Buffer.byteLength(text) > this.o.maxBytes;
    if (problem === null && !tooLarge && text !== undefined) return JSON.parse(text) as Json;
    if (!stream.warned) {
      stream.warned = true;
      const why = problem ?? `the progress is ${Buffer.byteLength(text)} bytes, over the limit of ${this.o.maxBytes}`;
      this.o.logger.warn(
        { run_id: source.run_id, node_id: source.node_id, execution_id: source.execution_id, attempt: source.attempt },
        `skein: progress dropped: ${why}; send plain JSON (objects, arrays, strings, numbers, booleans, null). Later bad values of this attempt are dropped without a warning`,
      );
    }
    return null;
  }
}

/** Two deltas of the same stream (their other fields equal) as one, within `maxBytes`; else null. */
function joined(a: Json, b: Json, maxBytes: number): Json | null {
  if (!isTextDelta(a) || !isTextDelta(b)) return null;
  const { delta: first, ...restA } = a;
  const { delta: second, ...restB } = b;
  if (JSON.stringify(restA) !== JSON.stringify(restB)) return null;
  const delta = first + second;
  if (delta.length * 3 > maxBytes && Buffer.byteLength(delta) > maxBytes - 1024) return null;
  return { ...a, delta };
}

/**
 * The common value, a string or a flat object of strings, finite numbers, booleans and nulls
 * (`{ delta }`, `{ turn, delta }`), copied without a JSON round trip, while it is surely within
 * `maxBytes` (6 bytes of JSON a character at most: `\u0000`); undefined for anything else (the
 * full check runs).
 */
function flatCopy(data: unknown, maxBytes: number): Json | undefined {
  if (typeof data === "string") return data.length * 6 + 2 <= maxBytes ? data : undefined;
  if (data === null || typeof data !== "object" || Object.getPrototypeOf(data) !== Object.prototype) return undefined;
  const out: { [field: string]: Json } = {};
  let chars = 2;
  for (const key of Object.keys(data)) {
    const v = (data as Record<string, unknown>)[key];
    const ok =
      typeof v === "string" || typeof v === "boolean" || v === null || (typeof v === "number" && Number.isFinite(v));
    // "__proto__" would set the copy's prototype, not a member: the JSON round trip keeps it a member.
    if (!ok || key === "__proto__") return undefined;
    chars += key.length + (typeof v === "string" ? v.length : 24) + 6;
    out[key] = v as Json;
  }
  return chars * 6 <= maxBytes ? out : undefined;
}
