/** `sleep`'s states (DESIGN §11.4): WAITING until its due time, then SUCCEEDED with { slept_until }. */
import { describe, expect, it } from "vitest";
import { begin, cur, due, engineStarts, events, fresh, lastEvent, start, T0 } from "./helpers.js";

const nodes = (payload: Record<string, unknown>) => [
  { node_id: "nap", agent_type: "sleep", payload, next_on_success: "after" },
  { node_id: "after" },
];

describe("sleep", async () => {
  it("is started by the engine, not claimed by an agent", async () => {
    expect(engineStarts(start(nodes({ seconds: 1 })), "nap")).toBe(true);
  });

  it("waits WAITING for payload.seconds from when it begins, its due time in lease_expires_at", async () => {
    const rs = fresh(start(nodes({ seconds: 30 })));
    const v = await begin(rs, "nap", T0 + 5);
    expect(v).toMatchObject({
      state: "WAITING",
      attempt: 1,
      ready_at: null,
      started_at: T0 + 5,
      deadline_at: T0 + 5 + 30_000,
      lease_expires_at: T0 + 5 + 30_000,
    });
    expect(events(rs)).toEqual(["node.waiting:nap"]);
    expect(lastEvent(rs, "node.waiting")).toEqual({ attempt: 1, until: T0 + 5 + 30_000 });
    expect(cur(rs, "after").ready_at).toBeNull();
  });

  it("wakes at its due time: SUCCEEDED with slept_until, its successor ready", async () => {
    const rs = start(nodes({ seconds: 30 }));
    await begin(rs, "nap", T0);
    fresh(rs);
    const wake = T0 + 30_000;
    const v = due(rs, "nap", wake + 7); // the sweep comes a little after the due time
    expect(v).toMatchObject({ state: "SUCCEEDED", ended_at: wake + 7 });
    expect(v.output).toEqual({ slept_until: new Date(wake).toISOString() });
    expect(events(rs)).toEqual(["node.succeeded:nap", "node.ready:after"]);
    expect(cur(rs, "after").ready_at).toBe(wake + 7);
  });

  it("finishes at once when until is already past", async () => {
    const until = "1970-01-01T00:00:00.500Z";
    const rs = fresh(start(nodes({ until })));
    const v = await begin(rs, "nap", T0);
    expect(v.state).toBe("SUCCEEDED");
    expect(v.output).toEqual({ slept_until: until });
    expect(events(rs)).toEqual(["node.waiting:nap", "node.succeeded:nap", "node.ready:after"]);
  });

  it("waits until an epoch-ms until in the future, whenever it begins", async () => {
    const rs = start(nodes({ until: T0 + 60_000 }));
    expect(await begin(rs, "nap", T0 + 10)).toMatchObject({ state: "WAITING", lease_expires_at: T0 + 60_000 });
  });

  it("fails template_error when its resolved payload gives no valid time", async () => {
    const rs = start(nodes({ seconds: "{{ input.wait }}" }));
    cur(rs, "nap").payload = { seconds: -1 }; // what the engine resolved the template to
    const v = await begin(rs, "nap", T0);
    expect(v).toMatchObject({ state: "FAILED", reason: "template_error" });
    expect(v.error).toMatchObject({ message: expect.stringContaining("payload seconds must be a number of seconds") });
  });
});
