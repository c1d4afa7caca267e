/**
 * `wait_event`'s states (DESIGN §11.2–11.3): `prepare` reads the run's oldest events of its
 * name (never the whole inbox) and events by key still in their buffer, `begin` takes the
 * oldest or goes WAITING, `due` fails it `event_timeout`. Sends and publishes reach a waiting
 * visit through `oldestWaiting` and `deliver` (engine/writer/kinds/events.ts).
 */
import { waitEvent as waitEventRules } from "../../definition/kinds/wait-event.js";
import { event, nodeOf, type RunState, wait } from "../run-state.js";
import { scopeAllows } from "../scope.js";
import type { InboxEvent, Json, Visit } from "../types.js";
import type { InboxReader, KindStates, Moves } from "./kind.js";

/** What a wait_event visit waits for, from its resolved payload. */
export interface EventWait {
  event: string;
  key: string | null;
  buffer_seconds: number;
}

export const waitEvent: KindStates = {
  // The run's oldest waiting events of this name (by index, never the whole inbox), and events
  // by key still in the buffer.
  async prepare(rs, v, inbox, now) {
    const w = eventWait(v);
    if (w) await readWaiting(rs, w.event, inbox);
    if (w?.key == null || w.buffer_seconds <= 0) return [];
    return inbox.keyedEvents(w.event, w.key, now - w.buffer_seconds * 1000);
  },
  begin(rs, v, now, prepared, moves) {
    const w = eventWait(v);
    const buffered = (prepared ?? []) as InboxEvent[];
    if (!w) {
      moves.failVisit(
        rs,
        v,
        "template_error",
        { message: "payload needs event (a name)", reason: "template_error" },
        now,
      );
      return;
    }
    const node = nodeOf(rs, v.node_id);
    const what: Record<string, Json> = w.key === null ? { event: w.event } : { event: w.event, key: w.key };
    wait(rs, v, Math.min(now + node.timeout * 1000, rs.run.deadline_at), now, what);
    // The run's own inbox first (oldest first), then an event by key still in its buffer.
    const own = (rs.inbox ?? []).find((e) => e.name === w.event && e.delivered_at === null);
    // An event by key a scoped token published is only for its own workflows' runs (DESIGN §13.1).
    const found = own ?? buffered.find((e) => scopeAllows(e.scope ?? null, rs.run.workflow_id));
    if (found) deliver(rs, v, found, now, moves);
  },
  due(rs, v, now, moves) {
    const w = eventWait(v);
    const seconds = Math.round(((v.deadline_at ?? now) - (v.started_at ?? now)) / 1000);
    moves.failVisit(
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
async function readWaiting(rs: RunState, name: string, inbox: InboxReader): Promise<void> {
  const known = rs.inbox ?? [];
  const delivered = new Set(rs.changes.inbox.filter((e) => e.delivered_at !== null).map((e) => e.event_id));
  const sent = (e: InboxEvent) => rs.changes.inbox.includes(e);
  const stored = known.filter((e) => !sent(e));
  const seen = new Set(known.map((e) => e.event_id));
  const limit = 1 + delivered.size + stored.filter((e) => e.name === name).length;
  const fresh = (await inbox.waitingEvents(rs.run.run_id, name, limit)).filter(
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
    if (v.state !== "WAITING" || nodeOf(rs, v.node_id).kind !== waitEventRules) continue;
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

/**
 * Hands an event to a WAITING wait_event visit: it succeeds with the event's payload. The flush
 * calls it through the scheduler's `deliver`, which passes the moves.
 */
export function deliver(rs: RunState, v: Visit, e: InboxEvent, now: number, moves: Moves): void {
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
  moves.succeed(rs, v, e.payload, { kind: "targets", targets: [...node.successTargets] }, now);
}
