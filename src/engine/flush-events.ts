/**
 * Events as flush inputs (DESIGN §11.2–11.3): an event sent to a run goes to its oldest WAITING
 * wait_event for that name, else into its inbox for the next wait; an event by key goes to every
 * run waiting on (name, key) and is kept for waits that buffer it. The run is locked, as for a
 * review, so a wait that begins in another transaction sees the event either waiting or taken.
 */
import { deliver, MAX_BUFFER_SECONDS, oldestWaiting } from "../core/kinds/wait-event.js";
import { eventRefusal } from "../core/preconditions.js";
import { event } from "../core/scheduler.js";
import type { InboxEvent } from "../core/types.js";
import { NotFoundError } from "../errors.js";
import type { Flush } from "./flush.js";
import type { Input, SendEventAnswer } from "./inputs.js";
import { scopeAllows } from "./scope.js";

export async function sendEvent(f: Flush, input: Extract<Input, { kind: "send_event" }>): Promise<void> {
  const { run_id, done } = input;
  const rs = await f.load(run_id);
  if (!rs) {
    f.out.callbacks.push(() => done.reject(new NotFoundError(`run ${run_id} does not exist; check the run id`)));
    return;
  }
  const e: InboxEvent = { ...input.event, created_at: f.now };
  // The same idempotency key again (or this input applied again after a lost commit): the first answer.
  const pending = rs.changes.inbox.find((x) => x.idempotency_key === e.idempotency_key);
  const seen =
    pending ??
    (await f.tx.inboxByIdempotencyKey({ run_id }, e.idempotency_key)) ??
    rs.inbox?.find((x) => x.idempotency_key === e.idempotency_key);
  if (seen) {
    const answer = answerOf(seen, true);
    f.out.callbacks.push(() => done.resolve(answer));
    return;
  }
  const refused = eventRefusal(rs.run, e.name);
  if (refused) {
    f.out.callbacks.push(() => done.reject(refused));
    return;
  }
  event(rs, "event.received", null, f.now, {
    event_id: e.event_id,
    name: e.name,
    idempotency_key: e.idempotency_key,
  });
  const v = oldestWaiting(rs, e.name, null);
  if (v) {
    deliver(rs, v, e, f.now);
  } else {
    // Kept for the next wait: the inbox in memory stays what the table holds.
    rs.inbox ??= await f.tx.inbox(run_id);
    rs.inbox.push(e);
    rs.changes.inbox.push(e);
  }
  const answer = answerOf(e, false);
  f.out.callbacks.push(() => done.resolve(answer));
}

export async function publishEvent(f: Flush, input: Extract<Input, { kind: "publish_event" }>): Promise<void> {
  const { done } = input;
  const e: InboxEvent = { ...input.event, created_at: f.now };
  const key = e.key as string;
  const seen =
    f.keyed.find((x) => x.name === e.name && x.key === key && x.idempotency_key === e.idempotency_key) ??
    (await f.tx.inboxByIdempotencyKey({ run_id: null, name: e.name, key }, e.idempotency_key));
  if (seen) {
    const answer = { event_id: seen.event_id, delivered_to: [], duplicate: true };
    f.out.callbacks.push(() => done.resolve(answer));
    return;
  }
  const delivered_to: { run_id: string; node_id: string; visit: number }[] = [];
  for (const runId of input.run_ids) {
    const rs = await f.load(runId);
    if (!rs || rs.run.ended_at !== null || !scopeAllows(input.scope, rs.run.workflow_id)) continue;
    // Every wait of the run on (name, key): a run may wait on the same key in two branches.
    for (let v = oldestWaiting(rs, e.name, key); v; v = oldestWaiting(rs, e.name, key)) {
      event(rs, "event.received", null, f.now, { event_id: e.event_id, name: e.name, key });
      deliver(rs, v, e, f.now);
      delivered_to.push({ run_id: runId, node_id: v.node_id, visit: v.visit });
    }
  }
  // Events by key are kept for the longest buffer_seconds, then pruned (once per flush).
  if (f.keyed.length === 0) await f.tx.pruneKeyed(f.now - MAX_BUFFER_SECONDS * 1000);
  // A scoped publisher's event is kept (its idempotency key holds) but too old for any buffer:
  // a wait that starts later may be another tenant's.
  f.keyed.push(input.scope === null ? e : { ...e, created_at: f.now - MAX_BUFFER_SECONDS * 1000 - 1 });
  const answer = { event_id: e.event_id, delivered_to, duplicate: false };
  f.out.callbacks.push(() => done.resolve(answer));
}

function answerOf(e: InboxEvent, duplicate: boolean): SendEventAnswer {
  return { event_id: e.event_id, delivered_to: e.delivered_to, buffered: e.delivered_to === null, duplicate };
}
