/**
 * `map`'s states (DESIGN §11.1): `begin` only hands the ready visit to the flush, which writes
 * its items and starts their runs in the same transaction (engine/writer/kinds/maps.ts); the
 * visit stays ready until then, with no attempt and no hold of its own.
 */
import { describe, expect, it } from "vitest";
import { statesOf } from "../../../src/core/kinds/index.js";
import { kindOf } from "../../../src/definition/kinds/index.js";
import { begin, complete, cur, engineStarts, events, fresh, start, startsWork, T0 } from "./helpers.js";

const EACH = { agent_type: "worker", payload: { q: "{{ item }}" } };
const nodes = [
  { node_id: "plan" },
  {
    node_id: "each",
    agent_type: "map",
    depends_on: ["plan"],
    payload: { items: "{{ nodes.plan.output }}", each: EACH },
    next_on_success: "after",
  },
  { node_id: "after" },
];

describe("map", async () => {
  it("is started by the engine, not claimed by an agent", async () => {
    expect(engineStarts(start(nodes), "each")).toBe(true);
  });

  it("becomes ready as its dependencies succeed; begin hands it to the flush and changes nothing else", async () => {
    const rs = start(nodes);
    complete(rs, "plan", [1, 2], T0);
    const v = cur(rs, "each");
    expect(v).toMatchObject({ state: "PENDING", ready_at: T0 });
    v.payload = { items: [1, 2], each: EACH }; // the payload as the engine resolved it
    fresh(rs);
    await begin(rs, "each", T0 + 1);
    expect(startsWork(rs)).toEqual([v]);
    expect(v).toMatchObject({ state: "PENDING", ready_at: T0, attempt: 0, holder: null, lease_expires_at: null });
    expect(events(rs)).toEqual([]);
  });

  it("has no due time of its own: the run's TTL bounds it", async () => {
    expect(statesOf(kindOf("map")).due).toBeUndefined();
  });
});
