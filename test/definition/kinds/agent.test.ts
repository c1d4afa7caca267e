/** `agent`'s rules: the model settings of an llm node, `instructions`, `input`, `tools`, `max_turns`, `parallel_tool_calls`, `tool_errors`, `thread`. */
import { describe, expect, it } from "vitest";
import { validateWorkflow } from "../../../src/definition/index.js";
import { agent } from "../../../src/definition/kinds/agent.js";
import { errorsOf, expectOneError, expectValid, withNode } from "./helpers.js";

const loop = (payload: Record<string, unknown>) =>
  withNode("agent", { payload: { model: "gpt-4o-mini", input: "hi", ...payload } });
const LOOKUP = {
  name: "lookup",
  parameters: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
  agent_type: "orders",
};

describe("agent: payload", () => {
  it("accepts tools of agents and of MCP servers, with templates", () => {
    expectValid(
      loop({
        instructions: "Help {{ input.user }}.",
        input: [{ role: "user", content: "{{ input.question }}" }],
        tools: [
          LOOKUP,
          { name: "fetch", agent_type: "http", payload: { url: "https://example.com/{{ args.id }}" }, timeout: 5 },
          { mcp: "docs", tools: ["search"] },
        ],
        max_turns: "{{ input.turns }}",
        parallel_tool_calls: false,
        tool_errors: "fail",
        thread: "{{ input.user }}",
      }),
    );
  });

  it("refuses a missing input, an unknown field with a suggestion, and the llm fields' own mistakes", () => {
    expectOneError(withNode("agent", { payload: { model: "m" } }), "nodes[0].payload.input", "is required");
    expectOneError(loop({ max_turn: 3 }), "nodes[0].payload.max_turn", 'did you mean "max_turns"');
    expectOneError(loop({ temperature: 9 }), "nodes[0].payload.temperature", "must be a number from 0 to 2");
    expectOneError(loop({ max_turns: 0 }), "nodes[0].payload.max_turns", "must be a whole number from 1 to 1000");
    expectOneError(loop({ tool_errors: "ignore" }), "nodes[0].payload.tool_errors", 'must be "to_model"');
    expectOneError(loop({ thread: "" }), "nodes[0].payload.thread", "must be a string of 1 to 128 characters");
  });

  it("refuses tools with duplicate names, bad schemas, unknown fields, and malformed approvals", () => {
    expectOneError(
      loop({ tools: [LOOKUP, LOOKUP] }),
      "nodes[0].payload.tools[1].name",
      "is the name of payload.tools[0] too",
    );
    expectOneError(
      loop({ tools: [{ ...LOOKUP, parameters: { type: "array" } }] }),
      "nodes[0].payload.tools[0].parameters",
      "must describe an object",
    );
    expectOneError(
      loop({ tools: [{ ...LOOKUP, parameters: { type: "object", required: "id" } }] }),
      "nodes[0].payload.tools[0].parameters",
      "is not a valid JSON Schema",
    );
    expectOneError(
      loop({ tools: [{ ...LOOKUP, agent: "x" }] }),
      "nodes[0].payload.tools[0].agent",
      "is not a field of a tool",
    );
    expectOneError(
      loop({ tools: [{ ...LOOKUP, approval: { assignee: ["ops"] } }] }),
      "nodes[0].payload.tools[0].approval.assignee",
      "is not a field of a tool's approval",
    );
    expectOneError(
      loop({ tools: [{ mcp: "docs", approval: { timeout: 31 * 86_400 } }] }),
      "nodes[0].payload.tools[0].approval.timeout",
      "at most 2592000 (30 days)",
    );
    expectOneError(
      loop({ tools: [{ ...LOOKUP, approval: "yes" }] }),
      "nodes[0].payload.tools[0].approval",
      "must be {",
    );
    expect(validateWorkflow(loop({ tools: [{ ...LOOKUP, approval: { assignees: ["ops"], timeout: 600 } }] })).ok).toBe(
      true,
    );
    expectOneError(loop({ tools: [{ mcp: "docs", tools: [] }] }), "nodes[0].payload.tools[0].tools", "non-empty list");
    const [secret] = errorsOf(loop({ tools: [{ ...LOOKUP, payload: { key: "{{ secrets.KEY }}" } }] }));
    expect(secret?.message).toContain("a tool's payload cannot read secrets");
  });

  it("warns of a tool's agent_type, or its compensation's, that no agent serves", () => {
    const result = validateWorkflow(
      loop({ tools: [{ ...LOOKUP, agent_type: "order", compensation: { agent_type: "undo" } }] }),
      { knownAgentTypes: ["orders"] },
    );
    if (!result.ok) throw new Error("expected a valid workflow");
    expect(result.warnings.map((w) => `${w.path}: ${w.message}`)).toEqual([
      expect.stringMatching(
        /^nodes\[0\]\.payload\.tools\[0\]\.agent_type: no agent is registered for agent_type "order" \(did you mean "orders"\?\)/,
      ),
      expect.stringMatching(
        /^nodes\[0\]\.payload\.tools\[0\]\.compensation\.agent_type: no agent is registered for agent_type "undo"/,
      ),
    ]);
  });

  it("makes a thread the node's concurrency key, one visit at a time, unless the node gives one", () => {
    const threaded = validateWorkflow(loop({ thread: "{{ input.user }}" }));
    if (!threaded.ok) throw new Error("expected a valid workflow");
    expect(threaded.graph.nodes.get("k")?.concurrency?.limit).toBe(1);
    expect(agent.impliedConcurrency?.({ node_id: "n", agent_type: "agent", payload: {} } as never)).toBeNull();
  });
});
