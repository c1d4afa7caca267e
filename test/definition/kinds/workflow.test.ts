/** `workflow`'s rules (DESIGN §11.1): `{ workflow_id, version?, input? }`, plain edges, no decide hook. */
import { describe, expect, it } from "vitest";
import { validateWorkflow } from "../../../src/definition/index.js";
import { errorsOf, expectOneError, expectValid, withNode } from "./helpers.js";

const child = (payload: unknown, extra: Record<string, unknown> = {}) =>
  withNode("workflow", { payload, ...extra }, [], [{ node_id: "after" }]);

describe("workflow: payload", () => {
  it("accepts a workflow id, with a version, a templated version, and an input", () => {
    expectValid(child({ workflow_id: "summarise" }, { next_on_success: "after" }));
    expectValid(child({ workflow_id: "summarise", version: 3, input: { text: "{{ input.text }}" } }));
    expectValid(child({ workflow_id: "summarise", version: "{{ input.version }}" }));
    expectValid(child({ workflow_id: "summarise", version: null }));
  });

  it("refuses a missing or empty workflow_id, with an example", () => {
    expectOneError(
      child({}),
      "nodes[0].payload",
      'needs workflow_id (the id of the workflow to run as a child run), got null, e.g. { "workflow_id": "summarise"',
    );
    expectOneError(child({ workflow_id: "" }), "nodes[0].payload", 'got ""');
    expectOneError(child({ workflow_id: 5 }), "nodes[0].payload", "got 5");
  });

  it("refuses a version that is not an integer of 1 or more", () => {
    for (const version of [0, 1.5, "2"]) {
      expectOneError(
        child({ workflow_id: "w", version }),
        "nodes[0].payload",
        `version must be a version number (an integer, 1 or more) or left out for the latest, got ${JSON.stringify(version)}`,
      );
    }
  });
});

describe("workflow: edges and hooks", () => {
  it("refuses a decide hook: its output is the child run's", () => {
    expectOneError(
      child({ workflow_id: "w" }, { decide: "pick" }),
      "nodes[0].decide",
      "a workflow node has no decide hook",
    );
  });

  it('refuses "when" on its edges', () => {
    const branching = child({ workflow_id: "w" }, { next_on_success: [{ when: "output.ok", to: "after" }] });
    expectOneError(branching, "nodes[0].next_on_success", 'a workflow node cannot branch with "when" yet');
  });

  it("reports every problem of one node", () => {
    const errors = errorsOf(child({}, { decide: "pick", next_on_success: [{ when: "output.ok", to: "after" }] }));
    expect(errors.map((e) => e.path)).toEqual(["nodes[0].payload", "nodes[0].decide", "nodes[0].next_on_success"]);
  });

  it("refuses a secret in its payload: the child run would store it", () => {
    const result = validateWorkflow(child({ workflow_id: "w", input: { token: "{{ secrets.TOKEN }}" } }));
    expect(result.ok).toBe(false);
    expect(result.errors.map((e) => e.message).join("\n")).toContain("a workflow node's payload cannot hold secrets");
  });
});
