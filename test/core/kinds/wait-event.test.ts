/**
 * `wait_event`'s states (DESIGN §11.2–11.3): WAITING until an event of its name is delivered,
 * taken at once from what the flush knows of the run's inbox (`rs.inbox`, filled by its
 * `prepare`) or from the events by key still buffered (`prepared`); `event_timeout` at its due time.
 */
import { describe, expect, it } from "vitest";
import type { RunState } from "../../../src/core/scheduler.js";
import type { InboxEvent, Json } from "../../../src/core/types.js";
import { begin, cur, due, engineStarts, events, fresh, lastEvent, start, T0 } from "./helpers.js";

const nodes = (payload: Record<string, unknown>, extra: Record<string, unknown> = {}) => [
  { node_id: "w", agent_type: "wait_event", payload, next_on_success: "after", next_on_failure: "late", ...extra },
  { node_id: "after" },
  { node_id: "late" },
];

function inboxEvent(id: string, name: string, payload: Json, extra: Partial<InboxEvent> = {}): InboxEvent {
  return {
    event_id: id,
    run_id: "run1",
    name,
    key: null,
    payload,
    idempotency_key: id,
    created_at: 0,
    delivered_to: null,
    delivered_at: null,
    ...extra,
  };
}

/** The run's stored events the wait's `prepare` read, as the flush holds them. */
function withInbox(rs: RunState, ...es: InboxEvent[]): RunState {
  rs.inbox = es;
  return rs;
}

describe("wait_event", async () => {
  it("is started by the engine, not claimed by an agent", async () => {
    expect(engineStarts(start(nodes({ event: "paid" })), "w")).toBe(true);
  });

  it("with no event yet, waits WAITING until its timeout, saying what for", async () => {
    const rs = fresh(start(nodes({ event: "paid", key: "o-1" }, { timeout: 60 })));
    const v = await begin(rs, "w", T0);
    expect(v).toMatchObject({ state: "WAITING", attempt: 1, deadline_at: T0 + 60_000, lease_expires_at: T0 + 60_000 });
    expect(events(rs)).toEqual(["node.waiting:w"]);
    expect(lastEvent(rs, "node.waiting")).toEqual({ attempt: 1, until: T0 + 60_000, event: "paid", key: "o-1" });
  });

  it("without a timeout, waits no longer than the run's TTL", async () => {
    const rs = start(nodes({ event: "paid" }), { timeout: 300 });
    expect((await begin(rs, "w", T0 + 1000)).deadline_at).toBe(rs.run.deadline_at);
    expect(rs.run.deadline_at).toBe(T0 + 300_000);
  });

  it("takes the oldest undelivered event of its name from the run's inbox, at once", async () => {
    const other = inboxEvent("e1", "shipped", { n: 0 });
    const taken = inboxEvent("e2", "paid", { n: 1 });
    const next = inboxEvent("e3", "paid", { n: 2 });
    const rs = fresh(withInbox(start(nodes({ event: "paid" })), other, taken, next));
    const v = await begin(rs, "w", T0 + 5);
    expect(v).toMatchObject({ state: "SUCCEEDED", output: { n: 1 } });
    expect(events(rs)).toEqual([
      "node.waiting:w",
      "event.delivered:w",
      "node.succeeded:w",
      "node.ready:after",
      "node.skipped:late",
    ]);
    expect(lastEvent(rs, "event.delivered")).toEqual({ event_id: "e2", name: "paid" });
    expect(taken).toMatchObject({ delivered_at: T0 + 5, delivered_to: { node_id: "w", visit: 1 } });
    expect(rs.changes.inbox).toEqual([taken]);
    expect(rs.inbox).toEqual([other, next]);
  });

  it("skips an event already delivered", async () => {
    const used = inboxEvent("e1", "paid", { n: 1 }, { delivered_at: 1, delivered_to: { node_id: "x", visit: 1 } });
    const rs = withInbox(start(nodes({ event: "paid" })), used);
    expect((await begin(rs, "w", T0)).state).toBe("WAITING");
  });

  it("takes an event by key still in its buffer when the inbox has none, unless its publisher's scope excludes the run", async () => {
    const keyed = (id: string, scope: string[] | null) =>
      inboxEvent(id, "paid", { id }, { run_id: null, key: "o-1", scope });
    const payload = { event: "paid", key: "o-1", buffer_seconds: 60 };
    const rs = start(nodes(payload));
    const v = await begin(rs, "w", T0, [keyed("k1", ["another-workflow"]), keyed("k2", null)]);
    expect(v).toMatchObject({ state: "SUCCEEDED", output: { id: "k2" } });
    expect(lastEvent(rs, "event.delivered")).toEqual({ event_id: "k2", name: "paid", key: "o-1" });
    expect(rs.changes.inbox).toEqual([]); // an event by key is not the run's row: it stays for other runs

    const scoped = start(nodes(payload));
    expect((await begin(scoped, "w", T0, [keyed("k1", ["another-workflow"])])).state).toBe("WAITING");
  });

  it("no event by its due time: FAILED event_timeout, routed by next_on_failure", async () => {
    const rs = start(nodes({ event: "paid" }, { timeout: 60 }));
    await begin(rs, "w", T0);
    const v = due(rs, "w", T0 + 60_000);
    expect(v).toMatchObject({
      state: "FAILED",
      reason: "event_timeout",
      error: { message: 'no event "paid" arrived within 60 s', reason: "event_timeout" },
    });
    expect(cur(rs, "late").ready_at).toBe(T0 + 60_000);
  });

  it("fails template_error when its resolved payload names no event", async () => {
    const rs = start(nodes({ event: "{{ input.name }}" }));
    cur(rs, "w").payload = { event: 7 };
    expect(await begin(rs, "w", T0)).toMatchObject({
      state: "FAILED",
      reason: "template_error",
      error: { message: "payload needs event (a name)" },
    });
  });
});
