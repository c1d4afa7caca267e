/**
 * Events as flush inputs (DESIGN §11.2–11.3): an event sent to a run goes to its oldest WAITING
 * wait_event for that name, else into its inbox for the next wait; an event by key goes to every
 * run waiting on (name, key) and is kept for waits that buffer it. The run is locked, as for a
 * review, so a wait that begins in another transaction sees the event either waiting or taken.
 * An event by key also starts the runs of the workflows whose triggers declare it (DESIGN §17,
 * writer/triggers.ts), in the same transaction. `Events` is the flush's step for them: it keeps
 * the events published by key until the write.
 */
import { oldestWaiting } from "../../../core/kinds/wait-event.js";
import { eventRefusal } from "../../../core/preconditions.js";
import { deliver, event, type RunState } from "../../../core/scheduler.js";
import { scopeAllows } from "../../../core/scope.js";
import type { InboxEvent } from "../../../core/types.js";
import { MAX_BUFFER_SECONDS } from "../../../definition/kinds/wait-event.js";
import { LimitError, NotFoundError } from "../../../errors.js";
import type { FlushContext } from "../context.js";
import type { Input, SendEventAnswer } from "../inputs.js";
import { startedBefore, startTriggered } from "../triggers.js";

/** A run's inbox holds at most this many events no wait_event took yet (DESIGN §13.1), */
export const MAX_INBOX_EVENTS = 1000;
/** and at most this many bytes of their payloads (JSON text). */
export const MAX_INBOX_BYTES = 16 * 1024 * 1024;
/** A full inbox empties only as the run's waits take events: a send is refused with this Retry-After. */
const INBOX_RETRY_AFTER_SECONDS = 5;

/** The flush's step for events sent and published. */
export class Events {
  /** Events published by key in this transaction (no run holds them): written with the rest (`written`). */
  private readonly keyed: InboxEvent[] = [];

  constructor(private readonly f: FlushContext) {}

  /** The events by key this flush published, to write with the rest; none are left. */
  written(): InboxEvent[] {
    return this.keyed.splice(0);
  }

  async send(input: Extract<Input, { kind: "send_event" }>): Promise<void> {
    const f = this.f;
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
    const v = oldestWaiting(rs, e.name, null);
    // Kept for the next wait only if the inbox has room (its size read from the index, never the events).
    const full = v ? null : await inboxRefusal(f, rs, e);
    if (full) {
      f.out.callbacks.push(() => done.reject(full));
      return;
    }
    event(rs, "event.received", null, f.now, {
      event_id: e.event_id,
      name: e.name,
      idempotency_key: e.idempotency_key,
    });
    if (v) {
      deliver(rs, v, e, f.now);
    } else {
      (rs.inbox ??= []).push(e);
      rs.changes.inbox.push(e);
    }
    const answer = answerOf(e, false);
    f.out.callbacks.push(() => done.resolve(answer));
  }

  async publish(input: Extract<Input, { kind: "publish_event" }>): Promise<void> {
    const f = this.f;
    const { done } = input;
    const e: InboxEvent = { ...input.event, created_at: f.now };
    const key = e.key as string;
    const seen =
      this.keyed.find((x) => x.name === e.name && x.key === key && x.idempotency_key === e.idempotency_key) ??
      (await f.tx.inboxByIdempotencyKey({ run_id: null, name: e.name, key }, e.idempotency_key));
    if (seen) {
      const started = await startedBefore(f, input);
      const answer = { event_id: seen.event_id, delivered_to: [], duplicate: true, started, not_started: [] };
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
    if (this.keyed.length === 0) await f.tx.pruneKeyed(f.now - MAX_BUFFER_SECONDS * 1000);
    // Kept for waits that start within their buffer_seconds: with a scoped publisher's scope, so
    // that only its own workflows' runs take it (wait-event.ts).
    this.keyed.push(input.scope === null ? e : { ...e, scope: input.scope });
    const answer = { event_id: e.event_id, delivered_to, duplicate: false, ...(await startTriggered(f, input)) };
    f.out.callbacks.push(() => done.resolve(answer));
  }
}

/**
 * Why the run's inbox cannot keep one more event (DESIGN §13.1: at most MAX_INBOX_EVENTS events
 * and MAX_INBOX_BYTES of payloads no wait_event took yet), or null. Counts what the table holds
 * and what this flush added to it.
 */
async function inboxRefusal(f: FlushContext, rs: RunState, e: InboxEvent): Promise<LimitError | null> {
  const stored = await f.tx.inboxSize(rs.run.run_id);
  const added = rs.changes.inbox.filter((x) => x.delivered_at === null);
  const events = stored.events + added.length + 1;
  const bytes = [...added, e].reduce((n, x) => n + Buffer.byteLength(JSON.stringify(x.payload)), stored.bytes);
  if (events <= MAX_INBOX_EVENTS && bytes <= MAX_INBOX_BYTES) return null;
  const what =
    events > MAX_INBOX_EVENTS
      ? `${MAX_INBOX_EVENTS} events`
      : `${MAX_INBOX_BYTES} bytes of payloads (it holds ${stored.bytes} bytes; this event is ${Buffer.byteLength(JSON.stringify(e.payload))})`;
  return new LimitError(
    `the inbox of run ${rs.run.run_id} is full: it holds at most ${what} that no wait_event took yet; ` +
      `send "${e.name}" again once a wait_event of the run has taken events, or send a reference to large data`,
    "client",
    INBOX_RETRY_AFTER_SECONDS,
  );
}

function answerOf(e: InboxEvent, duplicate: boolean): SendEventAnswer {
  return { event_id: e.event_id, delivered_to: e.delivered_to, buffered: e.delivered_to === null, duplicate };
}
