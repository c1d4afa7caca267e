/**
 * Progress of running attempts (DESIGN §11.6): `task.progress(data)` in process and a worker's
 * `POST /v1/tasks/{execution_id}/progress`, delivered live to subscribers as `node.progress`,
 * never stored and never a flush input. Per attempt, the first value goes out at once; values
 * offered within `intervalMs` after a delivery replace one another, and the latest goes out
 * when the window ends (on the engine's clock, so ManualClock tests are deterministic). The
 * caller offers only values of attempts it knows to be held; `end` drops what is pending once
 * an attempt is no longer held.
 */
import type { Logger } from "pino";
import type { Clock, TimerHandle } from "../../clock.js";
import type { EventType, Json, ProgressEvent, RunEvent } from "../../core/types.js";
import { jsonProblem } from "../json.js";
import type { Subscribers } from "../subscribers.js";

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
  pending: ProgressEvent | null;
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
      /** 0: every value is delivered. */
      intervalMs: number;
      subscribers: Subscribers;
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
    if (!this.o.subscribers.listens(source.run_id)) return true; // nobody to tell: nothing to build
    const event: ProgressEvent = {
      run_id: source.run_id,
      type: "node.progress",
      node_id: source.node_id,
      visit: source.visit,
      trace_id: source.trace_id,
      at: this.o.clock.now(),
      data: { attempt: source.attempt, progress },
    };
    if (this.o.intervalMs <= 0) {
      this.o.subscribers.publishProgress(event);
      return true;
    }
    if (stream.timer === null && event.at >= stream.windowEnds) {
      stream.windowEnds = event.at + this.o.intervalMs;
      this.o.subscribers.publishProgress(event);
      return true;
    }
    stream.pending = event;
    if (stream.timer === null) {
      const open = stream;
      stream.timer = this.o.clock.setTimeout(() => this.windowEnded(open), stream.windowEnds - event.at);
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

  /** The attempt no longer holds its visit (ended, aborted, lease lost): what is pending is dropped. */
  end(executionId: string, attempt?: number): void {
    const stream = this.streams.get(executionId);
    if (!stream || (attempt !== undefined && stream.attempt !== attempt)) return;
    if (stream.timer !== null) this.o.clock.clearTimeout(stream.timer);
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

  /** Drops every stream (the engine closes). */
  clear(): void {
    for (const id of [...this.streams.keys()]) this.end(id);
  }

  private windowEnded(stream: Stream): void {
    stream.timer = null;
    const event = stream.pending;
    if (event === null) return;
    stream.pending = null;
    stream.windowEnds = this.o.clock.now() + this.o.intervalMs;
    this.o.subscribers.publishProgress(event);
  }

  /** The value as JSON, copied; null (and a warning, once per attempt) when it is not JSON or too large. */
  private copy(source: ProgressSource, stream: Stream, data: unknown): Json | null {
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
