/**
 * The checks of `sendEvent` and `publishEvent` (DESIGN §11.2–11.3) before they are queued: a
 * name, a key, a JSON payload within the size limit, an idempotency key. What they do is in
 * engine/writer/kinds/events.ts.
 */
import type { InboxEvent, Json } from "../core/types.js";
import { type Problem, ValidationError } from "../errors.js";
import { uuidv7 } from "../ids.js";
import { jsonProblem } from "./json.js";

export interface SendEventOptions {
  /** The same key sent again to the same run (or the same name and key) is delivered once. */
  idempotency_key?: string;
}

/** publishEvent's options. */
export interface PublishEventOptions extends SendEventOptions {
  /**
   * The publisher's scope (DESIGN §13.1): only runs of the workflows these patterns cover
   * receive the event, and it is not kept for waits that start later (a buffered event would
   * reach whichever run waits next); only those workflows' triggers start runs, which record
   * this scope. The HTTP API sets it to a scoped token's `workflows`.
   * @defaultValue every workflow
   */
  scope?: readonly string[];
}

const MAX_NAME = 200;

/** The inbox row of an event to queue, or a ValidationError naming each problem. */
export function newEvent(
  what: { run_id: string | null; name: unknown; key?: unknown; payload: unknown; idempotency_key?: unknown },
  limits: { maxPayloadBytes: number; now: number },
): InboxEvent {
  const problems: Problem[] = [];
  const text = (path: string, v: unknown) => {
    if (typeof v !== "string" || v.length === 0 || v.length > MAX_NAME) {
      problems.push({
        path,
        message: `must be a non-empty string of at most ${MAX_NAME} characters, got ${JSON.stringify(v ?? null)}`,
      });
    }
  };
  text("name", what.name);
  if (what.run_id === null) text("key", what.key);
  if (what.idempotency_key !== undefined) text("idempotency_key", what.idempotency_key);
  const payload = (what.payload ?? null) as Json;
  const problem = jsonProblem(payload, "payload");
  if (problem) problems.push({ path: "payload", message: problem });
  else {
    const bytes = Buffer.byteLength(JSON.stringify(payload));
    if (bytes > limits.maxPayloadBytes) {
      problems.push({
        path: "payload",
        message: `is ${bytes} bytes, over the limit of ${limits.maxPayloadBytes} (maxPayloadBytes); send a reference to large data instead`,
      });
    }
  }
  if (problems.length > 0) throw new ValidationError("Event is invalid", problems);
  const event_id = uuidv7(limits.now);
  return {
    event_id,
    run_id: what.run_id,
    name: what.name as string,
    key: what.run_id === null ? (what.key as string) : null,
    payload,
    idempotency_key: (what.idempotency_key as string | undefined) ?? event_id,
    created_at: limits.now,
    delivered_to: null,
    delivered_at: null,
  };
}
