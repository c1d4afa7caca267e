/**
 * `wait_event` (DESIGN §11.2–11.3): WAITING until an event named `payload.event` is sent to the
 * run (`sendEvent`) or, with `payload.key`, published by key (`publishEvent`). An event that
 * arrived before the wait began is in the run's inbox and taken at once, oldest first (and an
 * event by key published within `payload.buffer_seconds`). The output is the event's payload;
 * no event by the node's timeout (default: the run's remaining TTL) fails it `event_timeout`
 * (core/kinds/wait-event.ts; its inputs in engine/writer/kinds/events.ts). Its rules: the payload.
 */
import type { Problem } from "../../errors.js";
import type { Json } from "../../json-text.js";
import { type KindRules, plainEdgesOnly } from "./kind.js";

/** The longest `buffer_seconds`: events by key are kept (then pruned) for this long. */
export const MAX_BUFFER_SECONDS = 86_400;

export const waitEvent: KindRules = {
  name: "wait_event",
  start: "engine",
  notClaimable: "wait for an event sent to the run",
  retries: false,
  validate(node, checks) {
    const problems: Problem[] = [];
    const at = `${checks.at}.payload`;
    const p = node.payload;
    const template = (v: unknown) => typeof v === "string" && v.includes("{{");
    if (!template(p.event) && !template(p.key) && !template(p.buffer_seconds)) {
      const problem = payloadProblem(p as Json);
      if (problem) problems.push({ path: at, message: problem });
    }
    problems.push(
      ...plainEdgesOnly(
        node,
        checks,
        "wait_event",
        "the event's payload",
        ": list plain targets, and branch on its output in the node after it",
      ),
    );
    return problems;
  },
  checkResolved(payload) {
    const problem = payloadProblem(payload);
    return problem === null ? null : `payload ${problem}`;
  },
};

/** Why a wait_event's payload is not `{ event, key?, buffer_seconds? }`, or null. */
function payloadProblem(payload: Json): string | null {
  const p = payload !== null && typeof payload === "object" && !Array.isArray(payload) ? payload : {};
  if (typeof p.event !== "string" || p.event === "") {
    return `needs event, the name of the event to wait for (a non-empty string), e.g. { "event": "payment.received" }; got ${JSON.stringify(p.event ?? null)}`;
  }
  if ("key" in p && (typeof p.key !== "string" || p.key === "")) {
    return `key must be a non-empty string (for a number, write "{{ $string(input.order_id) }}"), got ${JSON.stringify(p.key)}`;
  }
  if ("buffer_seconds" in p) {
    const b = p.buffer_seconds;
    if (typeof b !== "number" || !Number.isFinite(b) || b < 0 || b > MAX_BUFFER_SECONDS) {
      return `buffer_seconds must be a number of seconds from 0 to ${MAX_BUFFER_SECONDS}, got ${JSON.stringify(b)}`;
    }
    if (!("key" in p)) return "buffer_seconds applies to events by key: give key too, or leave buffer_seconds out";
  }
  return null;
}
