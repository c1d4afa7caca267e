/**
 * `wait_event` (DESIGN §11.2–11.3): WAITING until an event named `payload.event` is sent to the
 * run (`sendEvent`) or, with `payload.key`, published by key (`publishEvent`). An event that
 * arrived before the wait began is in the run's inbox and taken at once, oldest first (and an
 * event by key published within `payload.buffer_seconds`). The output is the event's payload;
 * no event by the node's timeout (default: the run's remaining TTL) fails it `event_timeout`.
 */
import type { Problem } from "../../errors.js";
import type { InboxTx } from "../../store/store.js";
import { event, failVisit, nodeOf, type RunState, succeed, wait } from "../scheduler.js";
import { scopeAllows } from "../scope.js";
import type { InboxEvent, Json, Visit } from "../types.js";
import type { NodeKind } from "./kind.js";

/** The longest `buffer_seconds`: events by key are kept (then pruned) for this long. */
export const MAX_BUFFER_SECONDS = 86_400;

/** What a wait_event visit waits for, from its resolved payload. */
export interface EventWait {
  event: string;
  key: string | null;
  buffer_seconds: number;
}

export const waitEvent: NodeKind = {
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
    if (node.decide !== undefined) {
      problems.push({
        path: `${checks.at}.decide`,
        message: "a wait_event node has no decide hook: its output is the event's payload; decide on the node after it",
      });
    }
    const next = node.next_on_success;
    if (Array.isArray(next) && next.some((c) => typeof c === "object" && c.when !== undefined)) {
      problems.push({
        path: `${checks.at}.next_on_success`,
        message:
          'a wait_event node cannot branch with "when": list plain targets, and branch on its output in the node after it',
      });
    }
    return problems;
  },
  checkResolved(payload) {
    const problem = payloadProblem(payload);
    return problem === null ? null : `payload ${problem}`;
  },
  // The run's oldest waiting events of this name (by index, never the whole inbox), and events
  // by key still in the buffer.
  async prepare(rs, v, tx, now) {
    const w = eventWait(v);
    if (w) await readWaiting(rs, w.event, tx);
    if (w?.key == null || w.buffer_seconds <= 0) return [];
    return tx.keyedEvents(w.event, w.key, now - w.buffer_seconds * 1000);
  },
  begin(rs, v, now, prepared) {
    const w = eventWait(v);
    const buffered = (prepared ?? []) as InboxEvent[];
    if (!w) {
      failVisit(rs, v, "template_error", { message: "payload needs event (a name)", reason: "template_error" }, now);
      return;
    }
    const node = nodeOf(rs, v.node_id);
    const what: Record<string, Json> = w.key === null ? { event: w.event } : { event: w.event, key: w.key };
    wait(rs, v, Math.min(now + node.timeout * 1000, rs.run.deadline_at), now, what);
    // The run's own inbox first (oldest first), then an event by key still in its buffer.
    const own = (rs.inbox ?? []).find((e) => e.name === w.event && e.delivered_at === null);
    // An event by key a scoped token published is only for its own workflows' runs (DESIGN §13.1).
    const found = own ?? buffered.find((e) => scopeAllows(e.scope ?? null, rs.run.workflow_id));
    if (found) deliver(rs, v, found, now);
  },
  due(rs, v, now) {
    const w = eventWait(v);
    const seconds = Math.round(((v.deadline_at ?? now) - (v.started_at ?? now)) / 1000);
    failVisit(
      rs,
      v,
      "event_timeout",
      { message: `no event "${w?.event ?? "?"}" arrived within ${seconds} s`, reason: "event_timeout" },
      now,
    );
  },
};

/**
 * Puts the run's oldest stored events named `name` that no wait took yet into `rs.inbox`, the
 * events this flush knows of (engine/writer/kinds/events.ts keeps it: sends of this flush, not written yet, at
 * the end; cleared as the flush writes). Reads one more than this flush already delivered or
 * knows of that name, so the next one in arrival order is among them.
 */
async function readWaiting(rs: RunState, name: string, tx: InboxTx): Promise<void> {
  const known = rs.inbox ?? [];
  const delivered = new Set(rs.changes.inbox.filter((e) => e.delivered_at !== null).map((e) => e.event_id));
  const sent = (e: InboxEvent) => rs.changes.inbox.includes(e);
  const stored = known.filter((e) => !sent(e));
  const seen = new Set(known.map((e) => e.event_id));
  const limit = 1 + delivered.size + stored.filter((e) => e.name === name).length;
  const fresh = (await tx.waitingEvents(rs.run.run_id, name, limit)).filter(
    (e) => !delivered.has(e.event_id) && !seen.has(e.event_id),
  );
  rs.inbox = [...stored, ...fresh, ...known.filter(sent)];
}

/** What a visit of a wait_event node waits for, or null when its payload does not say. */
export function eventWait(v: Visit): EventWait | null {
  const p = v.payload;
  if (p === null || typeof p !== "object" || Array.isArray(p) || typeof p.event !== "string") return null;
  return {
    event: p.event,
    key: typeof p.key === "string" ? p.key : null,
    buffer_seconds: typeof p.buffer_seconds === "number" ? p.buffer_seconds : 0,
  };
}

/**
 * The oldest WAITING wait_event visit of the run for this event name (and, for an event by
 * key, that key), or undefined.
 */
export function oldestWaiting(rs: RunState, name: string, key: string | null): Visit | undefined {
  let oldest: Visit | undefined;
  for (const v of rs.current.values()) {
    if (v.state !== "WAITING" || nodeOf(rs, v.node_id).kind !== waitEvent) continue;
    const w = eventWait(v);
    if (!w || w.event !== name || (key !== null && w.key !== key)) continue;
    const older =
      oldest === undefined ||
      (v.started_at ?? 0) < (oldest.started_at ?? 0) ||
      ((v.started_at ?? 0) === (oldest.started_at ?? 0) &&
        nodeOf(rs, v.node_id).index < nodeOf(rs, oldest.node_id).index);
    if (older) oldest = v;
  }
  return oldest;
}

/** Hands an event to a WAITING wait_event visit: it succeeds with the event's payload. */
export function deliver(rs: RunState, v: Visit, e: InboxEvent, now: number): void {
  if (e.run_id !== null) {
    e.delivered_to = { node_id: v.node_id, visit: v.visit };
    e.delivered_at = now;
    rs.changes.inbox.push(e);
    if (rs.inbox) rs.inbox = rs.inbox.filter((x) => x !== e);
  }
  event(rs, "event.delivered", v, now, {
    event_id: e.event_id,
    name: e.name,
    ...(e.key === null ? {} : { key: e.key }),
  });
  const node = nodeOf(rs, v.node_id);
  succeed(rs, v, e.payload, { kind: "targets", targets: [...node.successTargets] }, now);
}

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
