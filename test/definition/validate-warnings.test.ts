import { describe, expect, it } from "vitest";
import { type ValidateOptions, validateWorkflow } from "../../src/definition/index.js";
import type { Problem } from "../../src/errors.js";
import { caseStudy, wf } from "./fixtures.js";

function warningsOf(json: unknown, options: ValidateOptions = {}): Problem[] {
  const result = validateWorkflow(json, options);
  if (!result.ok) throw new Error(`expected a valid definition: ${JSON.stringify(result.errors)}`);
  return result.warnings;
}

function expectOneWarning(json: unknown, path: string, fragment: string, options: ValidateOptions = {}): void {
  const warnings = warningsOf(json, options);
  expect(warnings).toHaveLength(1);
  expect(warnings[0]?.path).toBe(path);
  expect(warnings[0]?.message).toContain(fragment);
}

describe("warnings", () => {
  it("has none for the DESIGN case study when every agent is known", () => {
    const known = ["collector", "content_reviewer", "publisher", "unpublisher"];
    expect(warningsOf(caseStudy(), { knownAgentTypes: known })).toEqual([]);
  });

  it("warns about an agent_type with no handler, built-ins always known", () => {
    const def = wf([
      { node_id: "a", agent_type: "collector" },
      { node_id: "b", agent_type: "human_review", depends_on: ["a"] },
      { node_id: "c", agent_type: "aggregator", depends_on: ["b"] },
      { node_id: "d", agent_type: "writter", depends_on: ["c"] },
    ]);
    expectOneWarning(def, "nodes[3].agent_type", 'no agent is registered for agent_type "writter"', {
      knownAgentTypes: ["collector"],
    });
    expect(warningsOf(def)).toEqual([]);
  });

  it("warns about a compensation agent_type with no handler", () => {
    const def = wf([{ node_id: "a", compensation: { agent_type: "undo" } }]);
    expectOneWarning(def, "nodes[0].compensation.agent_type", '"undo"', { knownAgentTypes: ["worker"] });
  });

  it("warns about a node timeout at or above the workflow timeout", () => {
    expectOneWarning(
      wf([{ node_id: "a", timeout: 600 }], { timeout: 600 }),
      "nodes[0].timeout",
      "at or above the workflow timeout",
    );
    expect(warningsOf(wf([{ node_id: "a", timeout: 599.5 }], { timeout: 600 }))).toEqual([]);
    expectOneWarning(
      wf([{ node_id: "a" }], { timeout: 60, defaults: { timeout: 120 } }),
      "defaults.timeout",
      "at or above",
    );
  });

  it("warns about a sleep, an event wait or a review that reaches past the workflow timeout, saying to raise it", () => {
    const raise = "raise the workflow's timeout";
    const sleeps = (payload: object) => wf([{ node_id: "s", agent_type: "sleep", payload }], { timeout: 3600 });
    expectOneWarning(sleeps({ seconds: 7200 }), "nodes[0].payload.seconds", raise);
    expectOneWarning(sleeps({ seconds: 3600 }), "nodes[0].payload.seconds", "expires before it wakes");
    expect(warningsOf(sleeps({ seconds: 3599 }))).toEqual([]);
    // A fixed time is judged against a run started at `now`.
    const now = Date.parse("2030-01-01T00:00:00Z");
    expectOneWarning(sleeps({ until: "2030-01-01T02:00:00Z" }), "nodes[0].payload.until", raise, { now });
    expectOneWarning(sleeps({ until: now + 3_600_000 }), "nodes[0].payload.until", "a run started now", { now });
    expect(warningsOf(sleeps({ until: "2030-01-01T00:30:00Z" }), { now })).toEqual([]);
    // Known only when it resolves: no warning.
    expect(warningsOf(sleeps({ seconds: "{{ input.wait }}" }))).toEqual([]);
    const waits = wf([{ node_id: "w", agent_type: "wait_event", payload: { event: "paid" }, timeout: 7200 }], {
      timeout: 3600,
    });
    expectOneWarning(
      waits,
      "nodes[0].timeout",
      `waits up to 7200 s for its event, at or above the workflow timeout (3600 s): the run expires first; ${raise}`,
    );
    const review = wf([{ node_id: "r", agent_type: "human_review", timeout: 5000 }], { timeout: 3600 });
    expectOneWarning(review, "nodes[0].timeout", `the review waits up to 5000 s`);
    expectOneWarning(review, "nodes[0].timeout", raise);
  });

  it("does not warn for a human_review left to the workflow timeout", () => {
    expect(warningsOf(wf([{ node_id: "a", agent_type: "human_review" }]))).toEqual([]);
  });

  it("warns about a case list without a default case", () => {
    const def = wf([{ node_id: "a", next_on_success: [{ when: "output.ok", to: "b" }] }, { node_id: "b" }]);
    expectOneWarning(def, "nodes[0].next_on_success", "no default case");
    const plain = wf([{ node_id: "a", next_on_success: ["b"] }, { node_id: "b" }]);
    expect(warningsOf(plain)).toEqual([]);
  });

  it("warns about a template reading a node that is not an ancestor", () => {
    const def = wf([
      { node_id: "a" },
      { node_id: "b" },
      { node_id: "c", depends_on: ["a"], payload: { x: "{{ nodes.a.output }}", y: ["{{ nodes.b.output }}"] } },
    ]);
    expectOneWarning(def, "nodes[2].payload.y[0]", '"b" is not an ancestor of "c"');
  });

  it("counts forward edges as ancestry and warns about unknown nodes read", () => {
    const def = wf([
      { node_id: "a", next_on_success: "b" },
      { node_id: "b", payload: { v: "from {{ nodes.a.output.v }} and {{ nodes.zz.output }}" } },
    ]);
    expectOneWarning(def, "nodes[1].payload.v", 'there is no node "zz"');
  });

  it("warns about a when reading a non-ancestor, but not about reading itself", () => {
    const def = wf([
      { node_id: "a" },
      {
        node_id: "b",
        depends_on: ["a"],
        next_on_success: [{ when: "nodes.b.status = 'SUCCEEDED' and nodes.c.output", to: "c" }, { to: "c" }],
      },
      { node_id: "c" },
    ]);
    expectOneWarning(def, "nodes[1].next_on_success[0].when", '"c" is not an ancestor of "b"');
  });

  it("warns about a payload reading its own node: the payload is resolved before it runs", () => {
    const def = wf([{ node_id: "a", payload: { last: "{{ $$.nodes.a.output }}" } }]);
    expectOneWarning(def, "nodes[0].payload.last", '"a" is not an ancestor of "a"');
  });

  it("lets a compensation payload read its own node", () => {
    const def = wf([
      { node_id: "a", compensation: { agent_type: "undo", payload: { id: "{{ nodes.a.output.id }}" } } },
    ]);
    expect(warningsOf(def)).toEqual([]);
  });

  it("warns about reading a node only reached through a loop-back", () => {
    // review reads the reviewer's comment: absent on the first round.
    const def = caseStudy();
    const review = def.nodes[3] as Record<string, unknown>;
    review.payload = { comment: "{{ nodes.human_check.output.comment }}" };
    expectOneWarning(def, "nodes[3].payload.comment", '"human_check" is not an ancestor of "review"');
  });
});
