/**
 * `workflow`'s states (DESIGN §11.1): `begin` only asks for the child run; the flush
 * (engine/writer/kinds/children.ts) claims the visit for the child and inserts it in the same
 * transaction, and the child's end is the result of that attempt, as an agent's would be.
 */
import { describe, expect, it } from "vitest";
import { statesOf } from "../../../src/core/kinds/index.js";
import { kindOf } from "../../../src/definition/kinds/index.js";
import { begin, complete, cur, engineStarts, events, fresh, start, startsWork, T0 } from "./helpers.js";

const nodes = [
  { node_id: "sub", agent_type: "workflow", payload: { workflow_id: "child" }, next_on_success: "after" },
  { node_id: "after" },
];

describe("workflow", async () => {
  it("is started by the engine, not claimed by an agent", async () => {
    expect(engineStarts(start(nodes), "sub")).toBe(true);
  });

  it("begin asks the flush for a child run and changes nothing else", async () => {
    const rs = fresh(start(nodes));
    const v = await begin(rs, "sub", T0);
    expect(startsWork(rs)).toEqual([v]);
    expect(v).toMatchObject({
      state: "PENDING",
      ready_at: T0,
      attempt: 0,
      holder: null,
      payload: { workflow_id: "child" },
    });
    expect(events(rs)).toEqual([]);
  });

  it("asks for one child per visit that begins, however many visits begin in a change", async () => {
    const rs = fresh(
      start([
        { node_id: "one", agent_type: "workflow", payload: { workflow_id: "child" } },
        { node_id: "two", agent_type: "workflow", payload: { workflow_id: "child" } },
      ]),
    );
    const one = await begin(rs, "one", T0);
    const two = await begin(rs, "two", T0);
    expect(startsWork(rs)).toEqual([one, two]);
  });

  it("its attempt's success, the child's output, fires its edges as an agent's would", async () => {
    const rs = start(nodes);
    await begin(rs, "sub", T0);
    complete(rs, "sub", { work: 42 }, T0 + 5); // the child ended: the flush settles the attempt
    expect(cur(rs, "sub")).toMatchObject({ state: "SUCCEEDED", output: { work: 42 } });
    expect(cur(rs, "after").ready_at).toBe(T0 + 5);
  });

  it("has no due time of its own: its attempt's timeout applies", async () => {
    expect(statesOf(kindOf("workflow")).due).toBeUndefined();
  });
});
