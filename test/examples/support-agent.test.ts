/**
 * examples/support-agent end to end, offline, as main.ts runs it: the example's model server
 * (node:http, streamed OpenAI protocol), its help center as a real MCP server on stdio (a child
 * process), the `orders` and `refunds` agents in process, on a real engine; a refund waits for
 * the decision the test gives as the person approving it.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { refunded } from "../../examples/support-agent/agents.js";
import { runSupportAgent } from "../../examples/support-agent/main.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

// The example's own model server, not a real model a developer's environment may name.
beforeEach(() => {
  vi.stubEnv("SKEIN_LLM_BASE_URL", undefined);
  vi.stubEnv("SKEIN_LLM_API_KEY", undefined);
});
afterEach(() => {
  vi.unstubAllEnvs();
});

describe("examples/support-agent", () => {
  it("looks the order up and searches the help center in one turn, then answers from both", async () => {
    const { run, messages } = await runSupportAgent("Where is my order A1001, and how do returns work?");

    expect(run.status).toBe("SUCCEEDED");
    expect(messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "tool", "assistant"]);
    // Turn 1: both calls at once, one to a tool of this process, one to the MCP server.
    const calls = messages[2]?.tool_calls as { function: { name: string; arguments: string } }[];
    expect(calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)])).toEqual([
      ["lookup_order", { order_id: "A1001" }],
      ["search_articles", { query: "returns" }],
    ]);
    const [lookup, search] = messages.slice(3, 5);
    expect(lookup).toMatchObject({ name: "lookup_order", turn: 1 });
    expect(JSON.parse(lookup?.content as string)).toMatchObject({ order_id: "A1001", status: "shipped" });
    expect(search).toMatchObject({ name: "search_articles", turn: 1 });
    expect(search?.content).toMatch(/^Returns: You can return unworn items within 30 days/);
    expect(messages.some((m) => m.error)).toBe(false);

    const output = run.nodes.find((n) => n.node_id === "assist")?.output as Record<string, unknown>;
    expect(output).toMatchObject({ turns: 2, tool_calls: 2, finish_reason: "stop" });
    expect(output.content).toMatch(/Your order A1001 .* is shipped/);
    expect(output.content).toMatch(/return unworn items within 30 days/);
    expect(run.usage.tokens_in).toBeGreaterThan(0);
    expect(run.usage.tokens_in + run.usage.tokens_out).toBeLessThanOrEqual(4000);
  });

  it("gives an unknown order id back to the model as the tool's error; the run still succeeds", async () => {
    const { run, messages } = await runSupportAgent("Has my order A9999 shipped?");

    expect(run.status).toBe("SUCCEEDED");
    const lookup = messages.find((m) => m.role === "tool" && m.name === "lookup_order");
    expect(lookup).toMatchObject({ error: true, content: "error: no order A9999" });
    const answer = messages[messages.length - 1];
    expect(answer).toMatchObject({ role: "assistant", finish_reason: "stop" });
    expect(answer?.content).toMatch(/could not find order A9999/);
  });

  it("refunds an order only once a person approves the call, with the call's key", async () => {
    const seen: unknown[] = [];
    const { run, messages } = await runSupportAgent("Please refund order A1002", {
      decide: (review) => {
        seen.push({ title: review.title, data: review.data, assignees: review.assignees });
        return { decision: "approve" };
      },
    });

    expect(run.status).toBe("SUCCEEDED");
    expect(seen).toEqual([
      {
        title: "Approve a call of tool refund_order",
        data: { tool: "refund_order", arguments: { order_id: "A1002", reason: "Please refund order A1002" } },
        assignees: ["support-lead"],
      },
    ]);
    const refund = messages.find((m) => m.role === "tool" && m.name === "refund_order");
    expect(refund).toMatchObject({ approval: { decision: "approve", by: "support-lead" } });
    expect(JSON.parse(refund?.content as string)).toEqual({ order_id: "A1002", refunded: true });
    const ex = run.nodes.find((n) => n.node_id === "assist")?.execution_id;
    expect(refunded.get("A1002")?.key).toBe(`${ex}:1:0`);
    expect(messages[messages.length - 1]?.content).toMatch(/Order A1002 is refunded in full/);
  });

  it("tells the customer a refund was not approved, and refunds nothing", async () => {
    const { run, messages } = await runSupportAgent("Refund my order A1003", {
      decide: () => ({ decision: "reject", comment: "still processing: cancel it instead" }),
    });

    expect(run.status).toBe("SUCCEEDED");
    expect(refunded.has("A1003")).toBe(false);
    const refund = messages.find((m) => m.role === "tool" && m.name === "refund_order");
    expect(refund?.content).toBe("rejected by support-lead: still processing: cancel it instead");
    expect(messages[messages.length - 1]?.content).toMatch(/could not refund order A1003/);
  });

  it("fails budget_exceeded when the run's budget is spent by the first turn: no tool runs", async () => {
    // The first turn costs about 67 tokens (the instructions and the message, then the calls).
    const { run, messages } = await runSupportAgent("Where is my order A1001, and how do returns work?", {
      budget: { max_tokens: 50 },
    });

    expect(run.status).toBe("FAILED");
    const node = run.nodes.find((n) => n.node_id === "assist");
    // The loop's own check, before the turn's first call: the visit's error names the reason.
    expect(node).toMatchObject({ state: "FAILED", error: { reason: "budget_exceeded" } });
    expect(node?.error?.message).toMatch(/of max_tokens 50.*\(before tool call lookup_order of turn 1\)/);
    expect(messages.map((m) => m.role)).toEqual(["system", "user", "assistant"]);
  });

  it("runs from the command line as the README says, printing the conversation", async () => {
    const { stdout } = await promisify(execFile)(
      "npx",
      ["tsx", "examples/support-agent/main.ts", "Where is my order A1002?"],
      { cwd: ROOT, env: { ...process.env, NO_COLOR: "1" } },
    );
    expect(stdout).toMatch(
      /^assistant \(turn 1\) {2}\[\d+ tokens in, \d+ out\]\n {2}calls lookup_order\(\{"order_id":"A1002"\}\)$/m,
    );
    expect(stdout).toMatch(/^tool lookup_order\n {2}\{"order_id":"A1002","status":"delivered"/m);
    expect(stdout).toMatch(/^run \S+ SUCCEEDED$/m);
  });
});
