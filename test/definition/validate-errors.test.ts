import { describe, expect, it } from "vitest";
import { parseWorkflowOrThrow, validateWorkflow } from "../../src/definition/index.js";
import type { Problem } from "../../src/errors.js";
import { ValidationError } from "../../src/errors.js";
import { caseStudy, wf } from "./fixtures.js";

function errorsOf(json: unknown, options = {}): Problem[] {
  const result = validateWorkflow(json, options);
  if (result.ok) throw new Error("expected the definition to be invalid");
  return result.errors;
}

/** Asserts exactly one error, at `path`, whose message contains `fragment`. */
function expectOneError(json: unknown, path: string, fragment: string, options = {}): void {
  const errors = errorsOf(json, options);
  expect(errors).toHaveLength(1);
  expect(errors[0]?.path).toBe(path);
  expect(errors[0]?.message).toContain(fragment);
}

describe("schema errors", () => {
  it("reports a bad budget precisely: the figure, the field, the type", () => {
    expectOneError({ ...wf([{ node_id: "a" }]), budget: { max_tokens: -1 } }, "budget.max_tokens", "must be >= 0");
    expectOneError({ ...wf([{ node_id: "a" }]), budget: { max_tokenz: 5 } }, "budget", 'did you mean "max_tokens"');
    expectOneError({ ...wf([{ node_id: "a" }]), budget: { max_cost: "1" } }, "budget.max_cost", "expected a number");
    expect(validateWorkflow({ ...wf([{ node_id: "a" }]), budget: { max_tokens: 1000, max_cost: 2.5 } }).ok).toBe(true);
  });

  it("reports an unknown field with its name", () => {
    expectOneError(wf([{ node_id: "a", retries: 3 }]), "nodes[0]", 'unknown field "retries"');
  });

  it("reports an unknown top-level field at the root", () => {
    expectOneError({ ...wf([{ node_id: "a" }]), owner: "me" }, "", 'unknown field "owner"');
  });

  it("reports a missing required field", () => {
    expectOneError({ id: "x", nodes: [{ node_id: "a" }] }, "nodes[0].agent_type", "is required");
  });

  it("reports a wrong type with what was received", () => {
    expectOneError(
      wf([{ node_id: "a", retry_interval: "30" }]),
      "nodes[0].retry_interval",
      'expected a number, got "30"',
    );
  });

  it("lists the allowed values of an enum", () => {
    expectOneError(wf([{ node_id: "a", join: "some" }]), "nodes[0].join", '"all", "any", "all_done"');
    expectOneError(wf([{ node_id: "a", retry_backoff: "linear" }]), "nodes[0].retry_backoff", '"fixed", "exponential"');
  });

  it("checks ranges: timeouts > 0, retry_count 0..100 and integral, max_visits >= 1", () => {
    expectOneError(wf([{ node_id: "a", timeout: 0 }]), "nodes[0].timeout", "must be > 0");
    expectOneError(wf([{ node_id: "a", retry_count: 101 }]), "nodes[0].retry_count", "must be <= 100");
    expectOneError(wf([{ node_id: "a", retry_count: 1.5 }]), "nodes[0].retry_count", "expected an integer");
    expectOneError(wf([{ node_id: "a", max_visits: 0 }]), "nodes[0].max_visits", "must be >= 1");
    expectOneError(wf([{ node_id: "a" }], { timeout: -1 }), "timeout", "must be > 0");
    expect(validateWorkflow(wf([{ node_id: "a", timeout: 0.5, retry_interval: 0 }])).ok).toBe(true);
  });

  it("checks id formats", () => {
    expectOneError(wf([{ node_id: "a b" }]), "nodes[0].node_id", "letters, digits");
    expectOneError(wf([{ node_id: "a", agent_type: "x/y" }]), "nodes[0].agent_type", "letters, digits");
    expectOneError({ ...wf([{ node_id: "a" }]), id: "Publish" }, "id", "lowercase");
  });

  it("lets defaults hold only the documented fields", () => {
    expectOneError(wf([{ node_id: "a" }], { defaults: { join: "any" } }), "defaults", 'unknown field "join"');
  });

  it("points into a case with a bad field instead of blaming the whole union", () => {
    const def = wf([{ node_id: "a", next_on_success: [{ when: 3, to: "b" }, { to: "b" }] }, { node_id: "b" }]);
    expectOneError(def, "nodes[0].next_on_success[0].when", "expected a string, got 3");
    const extra = wf([{ node_id: "a", next_on_success: [{ to: "b", if: "x" }] }, { node_id: "b" }]);
    expectOneError(extra, "nodes[0].next_on_success[0]", 'unknown field "if"');
  });

  it("names the accepted shapes when next_on_success matches none", () => {
    expectOneError(
      wf([{ node_id: "a", next_on_success: 5 }]),
      "nodes[0].next_on_success",
      "a list of cases {when, to}",
    );
  });
});

describe("graph errors", () => {
  it("reports duplicate node ids", () => {
    expectOneError(
      wf([{ node_id: "a" }, { node_id: "a", depends_on: ["a"] }]),
      "nodes[1].node_id",
      'duplicate node id "a"',
    );
  });

  it("reports an unknown node in depends_on, as in DESIGN", () => {
    const def = caseStudy();
    def.nodes[3] = { ...def.nodes[3], depends_on: ["fetch_a", "fetch_x", "fetch_c"] } as (typeof def.nodes)[number];
    const errors = errorsOf(def);
    expect(errors).toEqual([
      { path: "nodes[3].depends_on[1]", message: 'unknown node "fetch_x" (did you mean "fetch_a"?)' },
    ]);
  });

  it("reports unknown nodes in every edge form", () => {
    const def = wf([
      { node_id: "a", next_on_success: "x1", next_on_failure: ["b", "x2"] },
      { node_id: "b", next_on_success: ["x3"] },
      { node_id: "c", depends_on: ["a"], next_on_success: [{ when: "true", to: ["x4"] }, { to: "x5" }] },
    ]);
    expect(errorsOf(def).map((e) => [e.path, e.message])).toEqual([
      ["nodes[0].next_on_success", 'unknown node "x1"'],
      ["nodes[0].next_on_failure[1]", 'unknown node "x2"'],
      ["nodes[1].next_on_success[0]", 'unknown node "x3"'],
      ["nodes[2].next_on_success[0].to[0]", 'unknown node "x4"'],
      ["nodes[2].next_on_success[1].to", 'unknown node "x5"'],
    ]);
  });

  it("reports an unknown aggregator source", () => {
    const def = wf([
      { node_id: "a" },
      { node_id: "s", agent_type: "aggregator", depends_on: ["a"], payload: { sources: ["a", "zz"] } },
    ]);
    expectOneError(def, "nodes[1].payload.sources[1]", 'unknown node "zz"');
  });

  it("names a cycle through depends_on", () => {
    const def = wf([{ node_id: "s" }, { node_id: "a", depends_on: ["s", "b"] }, { node_id: "b", depends_on: ["a"] }]);
    expectOneError(def, "nodes[1].depends_on[1]", "cycle a -> b -> a");
  });

  it("names a cycle through depends_on and forward edges together", () => {
    const def = wf([
      { node_id: "s" },
      { node_id: "a", depends_on: ["s", "b"], next_on_success: "b" },
      { node_id: "b" },
    ]);
    expectOneError(def, "nodes[1].depends_on[1]", "cycle a -> b -> a");
  });

  it("reports each distinct cycle once", () => {
    const def = wf([
      { node_id: "s" },
      { node_id: "a", depends_on: ["s", "c"] },
      { node_id: "b", depends_on: ["a", "c"] },
      { node_id: "c", depends_on: ["a"] },
    ]);
    const messages = errorsOf(def).map((e) => e.message);
    expect(messages.filter((m) => m.startsWith("cycle a -> c -> a"))).toHaveLength(1);
    expect(messages.every((m) => m.startsWith("cycle"))).toBe(true);
  });

  it("reports a node depending on itself as a cycle", () => {
    expectOneError(
      wf([{ node_id: "s" }, { node_id: "a", depends_on: ["s", "a"] }]),
      "nodes[1].depends_on[1]",
      "cycle a -> a",
    );
  });

  it("reports a loop-back edge that closes no cycle, as in DESIGN", () => {
    const def = wf([{ node_id: "review" }, { node_id: "fetch", next_on_success: "review" }]);
    expectOneError(
      def,
      "nodes[1].next_on_success",
      "edge fetch -> review goes back up the list but no path leads from review to fetch: list review after fetch",
    );
  });

  it("accepts a self-loop and a loop-back that closes a cycle", () => {
    expect(validateWorkflow(wf([{ node_id: "a", next_on_failure: "a" }])).ok).toBe(true);
    expect(validateWorkflow(caseStudy()).ok).toBe(true);
  });

  it("rejects one decision mixing a loop-back and a forward edge", () => {
    const def = wf([
      { node_id: "a" },
      { node_id: "b", depends_on: ["a"], next_on_success: [{ when: "output.x", to: ["a", "c"] }, { to: "c" }] },
      { node_id: "c" },
    ]);
    expectOneError(def, "nodes[1].next_on_success[0].to", '"a" loops back');
    const plain = wf([
      { node_id: "a" },
      { node_id: "b", depends_on: ["a"], next_on_failure: ["c", "a"] },
      { node_id: "c" },
    ]);
    expectOneError(plain, "nodes[1].next_on_failure", "either one loop-back edge or only forward edges");
  });

  it("accepts loop-back and forward targets in different cases", () => {
    const def = wf([
      { node_id: "a" },
      { node_id: "b", depends_on: ["a"], next_on_success: [{ when: "output.again", to: "a" }, { to: "c" }] },
      { node_id: "c" },
    ]);
    expect(validateWorkflow(def).ok).toBe(true);
  });

  it("reports nodes no start node can reach", () => {
    const def = wf([
      { node_id: "s" },
      { node_id: "a", depends_on: ["b"] },
      { node_id: "b", depends_on: ["a"] },
      { node_id: "c", depends_on: ["b"] },
      { node_id: "d", depends_on: ["ghost"] },
      { node_id: "e", depends_on: ["d"] },
    ]);
    // a and b are on a cycle, d depends on an unknown node: both are reported as such. c and
    // e come after them and can never run.
    const errors = errorsOf(def);
    expect(errors.map((e) => e.path)).toEqual([
      "nodes[4].depends_on[0]",
      "nodes[1].depends_on[0]",
      "nodes[3]",
      "nodes[5]",
    ]);
    expect(errors[2]?.message).toContain('node "c" cannot be reached from any start node (s)');
  });

  it("reports a workflow without start nodes", () => {
    const def = wf([
      { node_id: "a", depends_on: ["b"] },
      { node_id: "b", depends_on: ["a"] },
    ]);
    const errors = errorsOf(def);
    expect(errors.map((e) => e.path)).toEqual(["nodes[0].depends_on[0]", "nodes"]);
    expect(errors[1]?.message).toContain("no start node");
  });

  it("reports templates and when expressions that do not parse", () => {
    const def = wf([
      {
        node_id: "a",
        payload: { x: [1, { topic: "about {{ input.( }}" }] },
        next_on_success: [{ when: "output.ok = ", to: "b" }, { to: "b" }],
      },
      { node_id: "b", compensation: { agent_type: "undo", payload: { id: "{{ }}" } } },
    ]);
    const errors = errorsOf(def);
    expect(errors.map((e) => e.path)).toEqual([
      "nodes[0].next_on_success[0].when",
      "nodes[0].payload.x[1].topic",
      "nodes[1].compensation.payload.id",
    ]);
    expect(errors[0]?.message).toContain('cannot parse "output.ok ="');
    expect(errors[1]?.message).toContain('cannot parse "input.("');
    expect(errors[2]?.message).toBe("empty expression");
  });

  it("requires the default case to come last", () => {
    const def = wf([
      { node_id: "a", next_on_success: [{ to: "b" }, { when: "output.x", to: "c" }] },
      { node_id: "b" },
      { node_id: "c" },
    ]);
    expectOneError(def, "nodes[0].next_on_success[0]", "must be the last case");
  });

  it("allows only one default case", () => {
    const def = wf([
      { node_id: "a", next_on_success: [{ when: "output.x", to: "c" }, { to: "b" }, { to: "c" }] },
      { node_id: "b" },
      { node_id: "c" },
    ]);
    const errors = errorsOf(def);
    expect(errors.map((e) => e.path)).toEqual(["nodes[0].next_on_success[1]", "nodes[0].next_on_success[2]"]);
    expect(errors[1]?.message).toContain("only one default case");
  });

  it("reports aggregator sources outside depends_on", () => {
    const def = wf([
      { node_id: "a" },
      { node_id: "b" },
      { node_id: "s", agent_type: "aggregator", depends_on: ["a"], payload: { sources: ["a", "b"] } },
    ]);
    expectOneError(def, "nodes[2].payload.sources[1]", 'source "b" is not in depends_on');
    const bad = wf([
      { node_id: "a" },
      { node_id: "s", agent_type: "aggregator", depends_on: ["a"], payload: { sources: "a" } },
    ]);
    expectOneError(bad, "nodes[1].payload.sources", "must be a list of node ids");
  });

  it("reports a decide hook that is not registered, only when hooks are given", () => {
    const def = wf([{ node_id: "a", decide: "pick", next_on_success: ["b"] }, { node_id: "b" }]);
    expectOneError(def, "nodes[0].decide", 'unknown decide hook "pick" (registered hooks: choose)', {
      decideHooks: ["choose"],
    });
    expect(validateWorkflow(def).ok).toBe(true);
    expect(validateWorkflow(def, { decideHooks: new Set(["pick"]) }).ok).toBe(true);
  });

  it("reports every problem at once", () => {
    const def = wf([
      { node_id: "a", depends_on: ["ghost"] },
      { node_id: "a" },
      { node_id: "c", payload: { q: "{{ ) }}" } },
    ]);
    const errors = errorsOf(def);
    expect(errors).toHaveLength(3);
    expect(errors.map((e) => e.path).sort()).toEqual([
      "nodes[0].depends_on[0]",
      "nodes[1].node_id",
      "nodes[2].payload.q",
    ]);
  });

  it("reports every schema problem at once", () => {
    const errors = errorsOf({ id: "BAD", nodes: [{ node_id: "a", agent_type: "w", retry_count: -1, extra: true }] });
    expect(errors.map((e) => e.path)).toEqual(["id", "nodes[0].retry_count", "nodes[0]"]);
  });
});

describe("parseWorkflowOrThrow", () => {
  it("throws a ValidationError listing every problem", () => {
    const def = wf([{ node_id: "a", depends_on: ["x"] }, { node_id: "a" }]);
    let thrown: unknown;
    try {
      parseWorkflowOrThrow(def);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ValidationError);
    const error = thrown as ValidationError;
    expect(error.problems).toHaveLength(2);
    expect(error.message).toContain("Workflow definition is invalid");
    expect(error.message).toContain('nodes[0].depends_on[0]: unknown node "x"');
  });

  it("returns the workflow, its graph and warnings", () => {
    const { workflow, graph, warnings } = parseWorkflowOrThrow(caseStudy(), {
      knownAgentTypes: ["collector", "content_reviewer", "publisher", "unpublisher"],
    });
    expect(workflow.id).toBe("content-publish");
    expect(graph.order).toHaveLength(9);
    expect(warnings).toEqual([]);
  });
});

describe("review assignees (they fail closed)", () => {
  const review = (assignees: unknown) =>
    wf([{ node_id: "r", agent_type: "human_review", payload: { title: "ok?", assignees } }]);

  it("accepts a list of names, one template, or no assignees at all", () => {
    expect(validateWorkflow(review(["alice", "bob"])).ok).toBe(true);
    expect(validateWorkflow(review("{{ input.approvers }}")).ok).toBe(true);
    expect(validateWorkflow(review(["{{ input.approver }}", "ops"])).ok).toBe(true);
    expect(validateWorkflow(wf([{ node_id: "r", agent_type: "human_review" }])).ok).toBe(true);
  });

  it("refuses a plain string, which let anyone decide", () => {
    expectOneError(review("alice"), "nodes[0].payload.assignees", 'must be a list of names, got "alice"');
    expectOneError(review("alice"), "nodes[0].payload.assignees", 'write ["alice"] for one name');
    expectOneError(review("team {{ input.team }}"), "nodes[0].payload.assignees", "only as one template");
  });

  it("refuses an object, an empty list and a list holding a non-name", () => {
    expectOneError(review({ alice: true }), "nodes[0].payload.assignees", "got an object");
    expectOneError(review([]), "nodes[0].payload.assignees", "at least one assignee");
    expectOneError(review(["alice", ""]), "nodes[0].payload.assignees", 'item 1 is ""');
    expectOneError(review(["alice", 3]), "nodes[0].payload.assignees", "item 1 is 3");
  });

  it("leaves other agents' payload.assignees alone", () => {
    expect(validateWorkflow(wf([{ node_id: "a", payload: { assignees: "whoever" } }])).ok).toBe(true);
  });
});

describe("every problem at once (schema and graph together)", () => {
  it("reports the graph's and the templates' problems beside the schema's", () => {
    const def = wf([
      { node_id: "s", retry_count: "3" },
      { node_id: "a", depends_on: ["s", "b"], timout: 5 },
      { node_id: "b", depends_on: ["a"] },
      { node_id: "b", depends_on: ["fetch_x", 7] },
      { node_id: "t", payload: { x: "{{ input. }}" }, join: "some" },
    ]);
    const found = errorsOf(def).map((e) => [e.path, e.message]);
    const has = (fragment: string) => expect.stringContaining(fragment);
    expect(found).toEqual([
      ["nodes[0].retry_count", has('expected a number, got "3"')],
      ["nodes[1]", has('unknown field "timout" (did you mean "timeout"?)')],
      ["nodes[3].depends_on[1]", has("expected a string, got 7")],
      ["nodes[4].join", has('must be one of "all", "any", "all_done"')],
      ["nodes[3].node_id", has('duplicate node id "b"')],
      ["nodes[3].depends_on[0]", has('unknown node "fetch_x"')],
      ["nodes[4].payload.x", has('cannot parse "input."')],
      ["nodes[1].depends_on[1]", has("cycle a -> b -> a")],
    ]);
  });

  it("suggests the nearest known field for an unknown one, wherever it is", () => {
    expectOneError(wf([{ node_id: "a", timout: 5 }]), "nodes[0]", 'unknown field "timout" (did you mean "timeout"?)');
    expectOneError(
      wf([{ node_id: "a" }], { defaults: { retry_cont: 1 } }),
      "defaults",
      'unknown field "retry_cont" (did you mean "retry_count"?)',
    );
    expectOneError(
      wf([{ node_id: "a", next_on_success: [{ wen: "true", to: "b" }] }, { node_id: "b" }]),
      "nodes[0].next_on_success[0]",
      'unknown field "wen" (did you mean "when"?)',
    );
    expectOneError({ ...wf([{ node_id: "a" }]), descripton: "x" }, "", '(did you mean "description"?)');
    // Nothing near: no guess.
    expectOneError(wf([{ node_id: "a", owner: "me" }]), "nodes[0]", 'unknown field "owner"');
    expect(errorsOf(wf([{ node_id: "a", owner: "me" }]))[0]?.message).not.toContain("did you mean");
  });

  it("keeps to the schema's problems when the nodes have no usable ids", () => {
    const errors = errorsOf(
      wf([
        { node_id: 3, depends_on: ["x"] },
        { node_id: "b", depends_on: ["b"] },
      ]),
    );
    expect(errors.map((e) => e.path)).toEqual(["nodes[0].node_id"]);
  });
});

describe("kinds whose output is fixed take plain edges only", () => {
  const cases = [
    {
      kind: "sleep",
      payload: { seconds: 5 },
      decide: "a sleep node has no decide hook: its output is always { slept_until }; decide on the node after it",
      when: 'a sleep node cannot branch with "when": its output is always { slept_until }; list plain targets',
    },
    {
      kind: "wait_event",
      payload: { event: "paid" },
      decide: "a wait_event node has no decide hook: its output is the event's payload; decide on the node after it",
      when: 'a wait_event node cannot branch with "when": list plain targets, and branch on its output in the node after it',
    },
    {
      kind: "workflow",
      payload: { workflow_id: "child" },
      decide: "a workflow node has no decide hook: its output is the child run's; decide on the node after it",
      when: 'a workflow node cannot branch with "when" yet: list plain targets and branch on the node after it',
    },
    {
      kind: "map",
      payload: { items: [1, 2], each: { agent_type: "worker" } },
      decide:
        "a map node has no decide hook: its output is the list of its items' outputs; decide on the node after it",
      when: 'a map node cannot branch with "when" yet: list plain targets and branch on the node after it',
    },
  ];
  for (const c of cases) {
    it(`refuses a decide hook and a "when" on a ${c.kind} node, each with its path`, () => {
      const def = wf([
        {
          node_id: "a",
          agent_type: c.kind,
          payload: c.payload,
          decide: "pick",
          next_on_success: [{ when: "true", to: "b" }],
        },
        { node_id: "b" },
      ]);
      expect(errorsOf(def)).toEqual([
        { path: "nodes[0].decide", message: c.decide },
        { path: "nodes[0].next_on_success", message: c.when },
      ]);
    });
  }
});
