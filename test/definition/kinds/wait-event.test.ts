/** `wait_event`'s rules (DESIGN §11.2–11.3): `{ event, key?, buffer_seconds? }`, plain edges, no decide hook. */
import { describe, expect, it } from "vitest";
import { validateWorkflow } from "../../../src/definition/index.js";
import { errorsOf, expectOneError, expectValid, withNode } from "./helpers.js";

const waiting = (payload: unknown, extra: Record<string, unknown> = {}) =>
  withNode("wait_event", { payload, ...extra }, [], [{ node_id: "after" }]);

describe("wait_event: payload", () => {
  it("accepts an event name, with a key and a buffer, or templates", () => {
    expectValid(waiting({ event: "payment.received" }, { next_on_success: "after" }));
    expectValid(waiting({ event: "paid", key: "order-7", buffer_seconds: 600 }));
    expectValid(waiting({ event: "paid", key: "{{ $string(input.order) }}", buffer_seconds: 86_400 }));
    expectValid(waiting({ event: "{{ input.event }}" }));
  });

  it("refuses a missing or empty event name, with an example", () => {
    expectOneError(
      waiting({}),
      "nodes[0].payload",
      'needs event, the name of the event to wait for (a non-empty string), e.g. { "event": "payment.received" }; got null',
    );
    expectOneError(waiting({ event: "" }), "nodes[0].payload", 'got ""');
    expectOneError(waiting({ event: 7 }), "nodes[0].payload", "got 7");
  });

  it("refuses a key that is not a non-empty string, saying how to make one of a number", () => {
    expectOneError(
      waiting({ event: "paid", key: 42 }),
      "nodes[0].payload",
      "key must be a non-empty string (for a number, write",
    );
    expectOneError(waiting({ event: "paid", key: "" }), "nodes[0].payload", "key must be a non-empty string");
  });

  it("refuses buffer_seconds out of 0..86400, and without a key", () => {
    for (const b of [-1, 86_401, "10"]) {
      expectOneError(
        waiting({ event: "paid", key: "k", buffer_seconds: b }),
        "nodes[0].payload",
        `buffer_seconds must be a number of seconds from 0 to 86400, got ${JSON.stringify(b)}`,
      );
    }
    expectOneError(
      waiting({ event: "paid", buffer_seconds: 60 }),
      "nodes[0].payload",
      "buffer_seconds applies to events by key: give key too",
    );
  });
});

describe("wait_event: edges and hooks", () => {
  it("refuses a decide hook", () => {
    expectOneError(
      waiting({ event: "paid" }, { decide: "pick" }),
      "nodes[0].decide",
      "a wait_event node has no decide hook: its output is the event's payload",
    );
  });

  it('refuses "when" on its edges', () => {
    const branching = waiting({ event: "paid" }, { next_on_success: [{ when: "output.ok", to: "after" }] });
    expectOneError(branching, "nodes[0].next_on_success", 'a wait_event node cannot branch with "when"');
  });

  it("reports every problem of one node", () => {
    const errors = errorsOf(
      waiting({ key: 1 }, { decide: "pick", next_on_success: [{ when: "output.ok", to: "after" }] }),
    );
    expect(errors.map((e) => e.path)).toEqual(["nodes[0].payload", "nodes[0].decide", "nodes[0].next_on_success"]);
  });

  it("refuses a secret in its payload", () => {
    const result = validateWorkflow(waiting({ event: "paid", key: "{{ secrets.KEY }}" }));
    expect(result.ok).toBe(false);
    expect(result.errors.map((e) => e.message).join("\n")).toContain("a wait_event node's payload cannot hold secrets");
  });
});
