/**
 * `skein status` of a run with an agent node (DESIGN §14.2): a line per agent node with its model
 * turns and tool calls in its current visit (and the failed calls), read by the built CLI from a
 * database an engine ran the loop on against the OpenAI-protocol fixture server; --json stays the
 * run with its nodes. The line itself is tested in process next to the steps table.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { conversationLine } from "../../src/cli/summary.js";
import { createEngine, type WorkflowInput } from "../../src/index.js";
import { type OpenAIServer, startOpenAIServer } from "../fixtures/openai-server.js";
import { json, requireBuiltCli, skein, workspace } from "./helpers.js";

requireBuiltCli();

let server: OpenAIServer;
beforeEach(async () => {
  server = await startOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

const SUPPORT = {
  id: "support",
  nodes: [
    {
      node_id: "assist",
      agent_type: "agent",
      payload: {
        model: "gpt-test",
        instructions: "You help.",
        input: "{{ input.q }}",
        tools: [
          {
            name: "lookup",
            parameters: { type: "object", properties: { order_id: { type: "string" } } },
            agent_type: "orders",
          },
        ],
      },
    },
    { node_id: "after", agent_type: "orders", depends_on: ["assist"] },
  ],
} as WorkflowInput;

const call = (id: string, name: string, args: unknown) => ({ id, name, arguments: JSON.stringify(args) });

describe("skein status of an agent node", () => {
  it("says how many turns and tool calls its current visit made, and how many failed", async () => {
    const ws = workspace();
    const engine = await createEngine({
      database: ws.db,
      agents: { orders: () => ({ status: "shipped" }) },
      llm: { providers: { default: { base_url: server.baseUrl, api_key: "sk-test" } } },
    });
    let runId: string;
    try {
      await engine.registerWorkflow(SUPPORT);
      server.reply(
        // Turn 1: two lookups and a tool the node does not have (an error message back to the model).
        {
          tool_calls: [
            call("c1", "lookup", { order_id: "A1" }),
            call("c2", "lookup", { order_id: "B2" }),
            call("c3", "refund", { order_id: "A1" }),
          ],
        },
        { tool_calls: [call("c4", "lookup", { order_id: "C3" })] },
        { text: "A1, B2 and C3 have shipped." },
      );
      const run = await engine.waitForRun((await engine.startRun("support", { input: { q: "Where?" } })).run_id);
      expect(run.status).toBe("SUCCEEDED");
      runId = run.run_id;
    } finally {
      await engine.close();
    }

    const text = await skein(["status", runId, "--db", ws.db], ws.dir);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain("\n\nassist: agent 3 turns, 4 tool calls, 1 failed\n");
    expect(text.stdout).not.toMatch(/^after: agent/m);
    // The steps table still lists the loop's steps.
    expect(text.stdout).toMatch(/\nsteps:\nnode +step +attempt +size +recorded\nassist#1 +turn:1 +1 /);

    const asJson = json<Record<string, unknown>>(await skein(["status", runId, "--json", "--db", ws.db], ws.dir));
    expect(asJson).toMatchObject({ run_id: runId, status: "SUCCEEDED" });
    expect(asJson).not.toHaveProperty("messages");
  });

  it("words the line in the singular, leaves failures out when none failed, and says a call waits for approval", () => {
    const m = (role: string, error?: boolean) => ({ seq: 0, role, content: "", ...(error ? { error } : {}) });
    expect(conversationLine({ node_id: "a", messages: [m("system"), m("user"), m("assistant"), m("tool")] })).toBe(
      "a: agent 1 turn, 1 tool call",
    );
    expect(conversationLine({ node_id: "b", messages: [m("user")] })).toBe("b: agent 0 turns, 0 tool calls");
    expect(conversationLine({ node_id: "c", messages: [m("assistant"), m("tool", true), m("tool", true)] })).toBe(
      "c: agent 1 turn, 2 tool calls, 2 failed",
    );
    // A rejected call is not a failure; a call waiting for approval counts, and says so.
    const rejected = { ...m("tool", true), approval: { decision: "reject", by: "ops", comment: null } };
    expect(conversationLine({ node_id: "d", messages: [m("assistant"), rejected], waiting: true })).toBe(
      "d: agent 1 turn, 2 tool calls (1 waiting for approval)",
    );
  });
});
