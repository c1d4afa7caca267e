/**
 * `task.step(name, fn)` (DESIGN §14.1), for one attempt: the names it used, the steps its visit
 * recorded before (read on the first call), and recording a new one before its value returns.
 * In process the record goes through the writer; a worker's goes over HTTP (worker/http-worker.ts):
 * `StepRecorder` is the difference.
 */
import type { StepContext } from "../../agents/task.js";
import type { Json } from "../../core/types.js";
import { ConflictError, NonRetryableError } from "../../errors.js";
import { jsonProblem } from "../json.js";
import { inStepSpan } from "../telemetry/tracing.js";

/** Where an attempt's steps are read from and recorded to. */
export interface StepRecorder {
  /** The steps the visit recorded before this attempt's first call, by name. */
  recorded(): Promise<ReadonlyMap<string, Json>>;
  /**
   * Records one; answers, once committed, what is recorded under its name and by which attempt
   * (an earlier record wins). Rejects with ConflictError when the attempt no longer holds its visit.
   */
  record(name: string, output: Json, size: number): Promise<{ output: Json; attempt: number }>;
  /** Whether the attempt still holds its visit as far as this process knows (a step not to call when it does not). */
  held(): boolean;
  /** Called when a record was refused: the attempt's signal is aborted. */
  lost(reason: string): void;
}

/** The longest step name, in characters. */
const MAX_NAME = 200;

export class StepJournal {
  private readonly used = new Set<string>();
  private before: Promise<ReadonlyMap<string, Json>> | null = null;

  constructor(
    private readonly at: { execution_id: string; attempt: number },
    private readonly recorder: StepRecorder,
    private readonly o: {
      signal: () => AbortSignal;
      /** Largest result, in bytes of JSON. */
      maxBytes: number;
      /** What is stored of a value (secrets' values replaced by their placeholders). */
      redact: (value: Json) => Json;
    },
  ) {}

  async step<T>(name: string, fn: (step: StepContext) => T | Promise<T>): Promise<T> {
    const { execution_id, attempt } = this.at;
    const badName = stepNameProblem(name);
    if (badName !== null) throw new NonRetryableError(`task.step: the name ${badName}`);
    if (typeof fn !== "function") throw new NonRetryableError(`task.step("${name}", fn): fn must be a function`);
    if (this.used.has(name)) {
      throw new NonRetryableError(
        `task.step("${name}") was called twice in attempt ${attempt} of ${execution_id}: a step's name is unique within its visit; give each call its own (e.g. "search:" + i)`,
      );
    }
    this.used.add(name);
    this.before ??= this.recorder.recorded();
    const recorded = (await this.before).get(name);
    if (recorded !== undefined) return copy(recorded) as T;
    if (!this.recorder.held()) throw notHeld(this.at, name);
    return inStepSpan({ execution_id, attempt, name }, async (span) => {
      const value = await fn({ idempotency_key: `${execution_id}:${name}`, signal: this.o.signal() });
      const checked = stepOutput(name, value, this.o.maxBytes);
      if ("problem" in checked) throw new NonRetryableError(checked.problem);
      const { text, output } = checked;
      const stored = this.o.redact(output);
      const storedText = stored === output ? text : JSON.stringify(stored);
      const size = Buffer.byteLength(storedText);
      span.setAttribute("skein.step.size", size);
      let kept: { output: Json; attempt: number };
      try {
        kept = await this.recorder.record(name, stored, size);
      } catch (e) {
        if (e instanceof ConflictError) this.recorder.lost(e.message);
        throw e;
      }
      // The first call returns what a replay will, the value as JSON (unredacted: this attempt
      // holds it); or the one another attempt recorded under this name first.
      return (kept.attempt === attempt ? JSON.parse(text) : copy(kept.output)) as T;
    });
  }
}

/** Why `name` cannot name a step, or null. */
export function stepNameProblem(name: unknown): string | null {
  if (typeof name === "string" && name.length > 0 && name.length <= MAX_NAME) return null;
  return `must be a string of 1 to ${MAX_NAME} characters, unique within the visit (e.g. "search:" + i); got ${JSON.stringify(name) ?? String(name)}`;
}

/** A step's result as stored: JSON (`undefined` is null) within `maxBytes`, copied; or why it cannot be. */
export function stepOutput(
  name: string,
  value: unknown,
  maxBytes: number,
): { output: Json; text: string } | { problem: string } {
  const output = value === undefined ? null : value;
  const problem = jsonProblem(output, `the result of step "${name}"`);
  if (problem !== null) return { problem: `${problem}; a step's result is stored as JSON` };
  const text = JSON.stringify(output);
  const size = Buffer.byteLength(text);
  if (size > maxBytes) {
    return {
      problem: `the result of step "${name}" is ${size} bytes, over the limit of ${maxBytes} (maxPayloadBytes); store a large result elsewhere and return a reference to it`,
    };
  }
  return { output: JSON.parse(text) as Json, text };
}

function copy(value: Json): Json {
  return value === null || typeof value !== "object" ? value : (JSON.parse(JSON.stringify(value)) as Json);
}

function notHeld(at: { execution_id: string; attempt: number }, name: string): ConflictError {
  return new ConflictError(
    `attempt ${at.attempt} of ${at.execution_id} no longer holds its visit: step "${name}" was not run`,
  );
}
