/**
 * `workflow`'s states (DESIGN §11.1): `begin` only asks for the child run; the flush
 * (engine/writer/kinds/children.ts) claims the visit for the child and inserts it in the same
 * transaction, and the child's end is the result of that attempt, as an agent's would be.
 */
import { describe, expect, it } from "vitest";
import { begin, complete, cur, due, engineStarts, events, fresh, start, startsWork, T0 } from "./helpers.js";

const nodes = [
  { node_id: "sub", agent_type: "workflow", payload: { workflow_id: "child" }, next_on_success: "after" },
  { node_id: "after" },
];

describe("workflow", () => {
  it("is started by the engine, not claimed by an agent", () => {
    expect(engineStarts(start(nodes), "sub")).toBe(true);
  });

  it("begin asks the flush for a child run and changes nothing else", () => {
    const rs = fresh(start(nodes));
    const v = begin(rs, "sub", T0);
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

  it("asks for one child per visit that begins, however many visits begin in a change", () => {
    const rs = fresh(
      start([
        { node_id: "one", agent_type: "workflow", payload: { workflow_id: "child" } },
        { node_id: "two", agent_type: "workflow", payload: { workflow_id: "child" } },
      ]),
    );
    const one = begin(rs, "one", T0);
    const two = begin(rs, "two", T0);
    expect(startsWork(rs)).toEqual([one, two]);
  });

  it("its attempt's success, the child's output, fires its edges as an agent's would", () => {
    const rs = start(nodes);
    begin(rs, "sub", T0);
    complete(rs, "sub", { work: 42 }, T0 + 5); // the child ended: the flush settles the attempt
    expect(cur(rs, "sub")).toMatchObject({ state: "SUCCEEDED", output: { work: 42 } });
    expect(cur(rs, "after").ready_at).toBe(T0 + 5);
  });

  it("has no due time of its own: its attempt's timeout applies", () => {
    expect(() => due(start(nodes), "sub", T0)).toThrow("workflow has no due");
  });
});
