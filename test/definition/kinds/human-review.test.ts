/** `human_review`'s rules (DESIGN §13): assignees fail closed, a list of names or one template. */
import { describe, expect, it } from "vitest";
import { validateWorkflow } from "../../../src/definition/index.js";
import { expectOneError, expectValid, withNode } from "./helpers.js";

const review = (payload: Record<string, unknown>) =>
  withNode("human_review", { payload: { title: "ok?", ...payload } });

describe("human_review: assignees", () => {
  it("accepts no assignees, a list of names, or one whole template", () => {
    expectValid(withNode("human_review", {}));
    expectValid(review({}));
    expectValid(review({ assignees: ["editor", "legal"] }));
    expectValid(review({ assignees: "{{ input.approvers }}" }));
  });

  it("refuses a plain string, saying to write a list of one name", () => {
    expectOneError(review({ assignees: "editor" }), "nodes[0].payload.assignees", 'write ["editor"] for one name');
  });

  it("refuses an empty list, a list with a non-string, and an object", () => {
    for (const assignees of [[], ["editor", 7], { editor: true }]) {
      const result = validateWorkflow(review({ assignees }));
      expect(result.ok).toBe(false);
      expect(result.errors.map((e) => e.path)).toEqual(["nodes[0].payload.assignees"]);
    }
  });

  it("does not refuse a document stored before the rule: its runs fail closed instead", () => {
    expectValid(review({ assignees: "editor" }), { stored: true });
  });

  it("refuses a secret in its payload", () => {
    const result = validateWorkflow(review({ instructions: "{{ secrets.TOKEN }}" }));
    expect(result.ok).toBe(false);
    expect(result.errors.map((e) => e.message).join("\n")).toContain(
      "a human_review node's payload cannot hold secrets",
    );
  });
});
