/**
 * A workflow's triggers without an engine (definition/triggers.ts): which trigger an event
 * matches, the input it makes, and what validation refuses.
 */
import { describe, expect, it } from "vitest";
import {
  compileTriggers,
  matchingTrigger,
  type TriggerEvent,
  triggerEvents,
  triggerInput,
} from "../../src/definition/triggers.js";
import { parseWorkflowOrThrow, validateWorkflow } from "../../src/definition/validate.js";

const NODES = [{ node_id: "a", agent_type: "echo" }];
const RUN = { run_id: "r-1", trace_id: "t-1" };

function compiled(triggers: unknown[]) {
  return compileTriggers(parseWorkflowOrThrow({ id: "w", triggers, nodes: NODES }).workflow);
}

function event(key: string, payload: unknown = { total: 5 }): TriggerEvent {
  return { name: "paid", key, payload, idempotency_key: "k-1", event_id: "e-1" };
}

describe("triggers", () => {
  it("an event takes the first trigger of its name whose key matches; other names take none", () => {
    const triggers = compiled([{ event: "paid", key: "gold" }, { event: "refunded" }, { event: "paid" }]);
    expect(matchingTrigger(triggers, "paid", "gold")?.index).toBe(0);
    expect(matchingTrigger(triggers, "paid", "silver")?.index).toBe(2);
    expect(matchingTrigger(triggers, "refunded", "x")?.index).toBe(1);
    expect(matchingTrigger(triggers, "shipped", "gold")).toBeNull();
    expect(
      triggerEvents(
        parseWorkflowOrThrow({ id: "w", triggers: [{ event: "paid", key: "gold" }, { event: "paid" }], nodes: NODES })
          .workflow,
      ),
    ).toEqual(["paid"]);
  });

  it("makes the input from templates over the event, a literal, or the event's payload", async () => {
    const [templated, literal, bare] = compiled([
      {
        event: "a",
        input: {
          order: "{{ event.key }}",
          total: "{{ event.payload.total }}",
          run: "{{ run.run_id }}",
          note: "paid {{ event.payload.total }}",
        },
      },
      { event: "b", input: { fixed: true } },
      { event: "c" },
    ]);
    expect(await triggerInput(templated!, event("o-1"), RUN)).toEqual({
      order: "o-1",
      total: 5,
      run: "r-1",
      note: "paid 5",
    });
    expect(await triggerInput(literal!, event("o-1"), RUN)).toEqual({ fixed: true });
    expect(await triggerInput(bare!, event("o-1", [1, 2]), RUN)).toEqual([1, 2]);
    // A whole template may make any JSON value; one that reads nothing makes null.
    const [whole] = compiled([{ event: "a", input: "{{ event.payload.missing }}" }]);
    expect(await triggerInput(whole!, event("o-1"), RUN)).toBeNull();
  });

  it("refuses, with their paths, a trigger the earlier ones always take, templates that read nodes or secrets, and bad fields", () => {
    const result = validateWorkflow({
      id: "w",
      triggers: [
        { event: "paid" },
        { event: "paid", key: "gold" },
        { event: "refunded", key: "a" },
        { event: "refunded", key: "a" },
        { event: "shipped", input: { from: "{{ nodes.a.output }}" } },
        { event: "lost", input: "{{ secrets.KEY }}" },
      ],
      nodes: NODES,
    });
    expect(result.ok).toBe(false);
    expect(result.errors.map((p) => p.path)).toEqual([
      "triggers[1]",
      "triggers[3]",
      "triggers[4].input.from",
      "triggers[5].input",
    ]);
    expect(validateWorkflow({ id: "w", triggers: [{ event: "x".repeat(201) }], nodes: NODES }).errors).toMatchObject([
      { path: "triggers[0].event" },
    ]);
    expect(validateWorkflow({ id: "w", triggers: {}, nodes: NODES }).errors).toMatchObject([{ path: "triggers" }]);
  });
});
