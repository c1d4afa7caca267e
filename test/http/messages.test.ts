/**
 * An agent node's conversation over HTTP (DESIGN §14.2): GET /v1/runs/{id}/nodes/{node_id}/messages
 * pages through a visit's messages (instructions, input, each turn and tool call) against the
 * OpenAI-protocol fixture server, answers 400 for bad paging and 404 for an unknown run or a node
 * that is not an agent node, and is refused like the run for a token scoped elsewhere.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { TokenEntry } from "../../src/http/auth.js";
import { MessageSchema } from "../../src/http/schemas.js";
import { type OpenAIServer, startOpenAIServer } from "../fixtures/openai-server.js";
import { bearer, TOKEN_LIST, TOKENS, testApi } from "./helpers.js";

const SUPPORT_READER = "support-reader-0123456789abcdef";
const TOKENS_WITH_SCOPE: TokenEntry[] = [
  ...TOKEN_LIST,
  { token: SUPPORT_READER, role: "reviewer", name: "support", workflows: ["support"] },
];

let server: OpenAIServer;
beforeEach(async () => {
  server = await startOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

const flow = (id: string) => ({
  id,
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
});

async function agentRun(workflowId = "support") {
  const t = await testApi({
    engine: {
      agents: { orders: () => ({ status: "shipped" }) },
      llm: { providers: { default: { base_url: server.baseUrl, api_key: "sk-test" } } },
    },
    server: { tokens: TOKENS_WITH_SCOPE },
  });
  await t.engine.registerWorkflow(flow(workflowId));
  server.reply(
    {
      tool_calls: [{ id: "c1", name: "lookup", arguments: '{"order_id":"A1"}' }],
      usage: { prompt_tokens: 10, completion_tokens: 4 },
    },
    { text: "A1 has shipped.", usage: { prompt_tokens: 20, completion_tokens: 3 } },
  );
  const started = await t.engine.startRun(workflowId, { input: { q: "Where is A1?" } });
  const run = await t.engine.waitForRun(started.run_id);
  expect(run.status).toBe("SUCCEEDED");
  const get = (url: string, token: string = TOKENS.admin) =>
    t.app.inject({ method: "GET", url, headers: bearer(token) });
  return { ...t, runId: run.run_id, get };
}

describe("GET /v1/runs/{run_id}/nodes/{node_id}/messages", () => {
  it("pages through the current visit's conversation: instructions, input, each turn and tool call", async () => {
    const { runId, get } = await agentRun();
    const first = await get(`/v1/runs/${runId}/nodes/assist/messages?limit=3`);
    expect(first.statusCode, first.body).toBe(200);
    const page = first.json();
    expect(page.visit).toBe(1);
    expect(page.next_after).toBe(2);
    for (const m of page.messages) MessageSchema.parse(m);
    expect(page.messages).toMatchObject([
      { seq: 0, role: "system", content: "You help." },
      { seq: 1, role: "user", content: "Where is A1?" },
      {
        seq: 2,
        role: "assistant",
        turn: 1,
        attempt: 1,
        usage: { tokens_in: 10, tokens_out: 4 },
        tool_calls: [{ id: "c1", type: "function", function: { name: "lookup", arguments: '{"order_id":"A1"}' } }],
      },
    ]);
    expect(page.messages[0]).not.toHaveProperty("attempt");

    const rest = await get(`/v1/runs/${runId}/nodes/assist/messages?after=2&visit=1`);
    expect(rest.statusCode, rest.body).toBe(200);
    expect(rest.json()).toMatchObject({
      visit: 1,
      next_after: null,
      messages: [
        { seq: 3, role: "tool", tool_call_id: "c1", name: "lookup", content: '{"status":"shipped"}', turn: 1 },
        { seq: 4, role: "assistant", content: "A1 has shipped.", finish_reason: "stop", turn: 2 },
      ],
    });
    // A visit the node never had: nothing to read.
    const none = await get(`/v1/runs/${runId}/nodes/assist/messages?visit=2`);
    expect(none.json()).toEqual({ visit: null, messages: [], next_after: null });
  });

  it("refuses bad paging (400), and a node that is not an agent node or an unknown run (404)", async () => {
    const { runId, get } = await agentRun();
    const big = await get(`/v1/runs/${runId}/nodes/assist/messages?limit=1001`);
    expect(big.statusCode).toBe(400);
    expect(big.json().error.details.problems).toEqual([
      { path: "query.limit", message: expect.stringContaining("1000") },
    ]);
    const before = await get(`/v1/runs/${runId}/nodes/assist/messages?after=-2&visit=0`);
    expect(before.statusCode).toBe(400);
    expect(
      before
        .json()
        .error.details.problems.map((p: { path: string }) => p.path)
        .sort(),
    ).toEqual(["query.after", "query.visit"]);
    const notAgent = await get(`/v1/runs/${runId}/nodes/after/messages`);
    expect(notAgent.statusCode).toBe(404);
    expect(notAgent.json().error.message).toContain('has no agent node "after": its agent nodes are assist');
    expect((await get("/v1/runs/no-such-run/nodes/assist/messages")).statusCode).toBe(404);
  });

  it("is scoped like the run: readable with its workflow's token, 404 for another workflow's run", async () => {
    const support = await agentRun("support");
    const own = await support.get(`/v1/runs/${support.runId}/nodes/assist/messages`, SUPPORT_READER);
    expect(own.statusCode, own.body).toBe(200);
    expect(own.json().messages).toHaveLength(5);

    await support.engine.registerWorkflow(flow("payroll"));
    server.reply({ text: "Paid." });
    const payroll = await support.engine.startRun("payroll", { input: { q: "Pay?" } });
    await support.engine.waitForRun(payroll.run_id);
    const other = await support.get(`/v1/runs/${payroll.run_id}/nodes/assist/messages`, SUPPORT_READER);
    expect(other.statusCode).toBe(404);
    expect(other.json().error.message).toBe(`run ${payroll.run_id} does not exist; check the run id and the database`);
  });
});
