/**
 * An agent node's conversation in the admin page (DESIGN §14.2): the node's details list its
 * current visit's messages (instructions, input, each turn with its tool calls as
 * `name(arguments)` and its usage, each tool result with its tool, a failed one marked), and while
 * the node runs, the model's text so far from its progress. The model is the OpenAI-protocol
 * fixture server in the test process, which `skein serve` reaches through SKEIN_LLM_BASE_URL; the
 * tool's agent is the test agents module's `echo`.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type OpenAIServer, startOpenAIServer } from "../fixtures/openai-server.js";
import { expectAccessible, nodeInState, serve, signIn } from "./helpers.js";

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
            agent_type: "echo",
          },
        ],
      },
    },
  ],
};

let model: OpenAIServer;
beforeEach(async () => {
  model = await startOpenAIServer();
});
afterEach(async () => {
  await model.close();
});

describe("an agent node's conversation in the admin page", { timeout: 90_000 }, () => {
  it("lists the recorded messages, streams the running turn's text, and keeps the messages once it ends", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    model.reply(
      // Turn 1, held until the page follows the run: a lookup and a tool the node does not have.
      {
        tool_calls: [
          { id: "c1", name: "lookup", arguments: '{"order_id":"A1"}' },
          { id: "c2", name: "refund", arguments: '{"order_id":"A1"}' },
        ],
        usage: { prompt_tokens: 10, completion_tokens: 4 },
        after: gate,
      },
      // Turn 2 streams its text, then never ends: the node stays RUNNING.
      { hang: ["Your order ", "<b>has</b> shipped."] },
    );
    const s = await serve({ env: { SKEIN_LLM_BASE_URL: model.baseUrl, SKEIN_LLM_API_KEY: "sk-test" } });
    await s.api("PUT", "/v1/workflows/support", SUPPORT);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", {
      workflow_id: "support",
      input: { q: "Where is A1?" },
    });

    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}?node=assist`);
    await nodeInState(page, "assist", "RUNNING");
    const details = page.getByRole("article", { name: "node assist" });
    // Events come only through the run's stream: once one shows, live progress reaches the page.
    await details.getByRole("table", { name: "events" }).getByText("node.started").waitFor();
    const conversation = details.getByRole("region", { name: "conversation" });
    const items = conversation.getByRole("list", { name: "messages" }).locator(":scope > li");
    await expect
      .poll(() => items.evaluateAll((li) => li.map((e) => e.getAttribute("data-role"))))
      .toEqual(["system", "user"]);
    expect(await items.nth(0).locator(".message-content").textContent()).toBe("You help.");
    expect(await items.nth(1).locator(".message-content").textContent()).toBe("Where is A1?");

    release();
    const reply = conversation.getByRole("log", { name: "model's reply so far" });
    await reply.filter({ hasText: "shipped." }).waitFor();
    expect(await reply.textContent()).toBe("Your order <b>has</b> shipped.");
    expect(await reply.locator("b").count()).toBe(0); // text, never markup
    await expect
      .poll(() => items.evaluateAll((li) => li.map((e) => e.getAttribute("data-role"))))
      .toEqual(["system", "user", "assistant", "tool", "tool", "assistant"]);
    const turn1 = items.nth(2);
    expect(await turn1.getByRole("list", { name: "tool calls" }).locator("li").allTextContents()).toEqual([
      'lookup({"order_id":"A1"})',
      'refund({"order_id":"A1"})',
    ]);
    expect(await turn1.locator(".usage").textContent()).toContain("tokens in 10, out 4");
    const lookup = items.nth(3);
    expect(await lookup.locator(".tool-name").textContent()).toBe("lookup");
    expect(await lookup.locator(".message-content").textContent()).toContain('"node":"assist"');
    expect(await lookup.locator(".message-error").count()).toBe(0);
    const refund = items.nth(4);
    expect(await refund.locator(".tool-name").textContent()).toBe("refund");
    expect(await refund.locator(".message-error").textContent()).toContain("error");
    expect(await refund.locator(".message-content").textContent()).toContain('there is no tool named "refund"');
    // The agent node's progress shows in the conversation, not in a Progress box of its own.
    expect(await details.getByRole("log", { name: "progress" }).count()).toBe(0);
    await expectAccessible(page, "a run page with an agent node's conversation");

    // Cancelled mid-turn: the text so far goes, the recorded messages stay.
    await s.api("POST", `/v1/runs/${run.run_id}/cancel`, {});
    await nodeInState(page, "assist", "CANCELLED");
    await reply.waitFor({ state: "detached" });
    await expect
      .poll(() => items.evaluateAll((li) => li.map((e) => e.getAttribute("data-role"))))
      .toEqual(["system", "user", "assistant", "tool", "tool"]);
  });

  it("shows the call that waits for approval, then the decision beside its result", async () => {
    model.reply({ tool_calls: [{ id: "c1", name: "refund", arguments: '{"order_id":"A1"}' }] }, { text: "Refunded." });
    const s = await serve({ env: { SKEIN_LLM_BASE_URL: model.baseUrl, SKEIN_LLM_API_KEY: "sk-test" } });
    const tool = { name: "refund", agent_type: "echo", approval: { assignees: ["ops"], timeout: 3600 } };
    const flow = {
      ...SUPPORT,
      nodes: [{ ...SUPPORT.nodes[0], payload: { ...SUPPORT.nodes[0]?.payload, tools: [tool] } }],
    };
    await s.api("PUT", "/v1/workflows/support", flow);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", {
      workflow_id: "support",
      input: { q: "Refund A1" },
    });

    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}?node=assist`);
    await nodeInState(page, "assist", "IN_REVIEW");
    const conversation = page
      .getByRole("article", { name: "node assist" })
      .getByRole("region", { name: "conversation" });
    const waiting = conversation.locator('li[data-waiting="true"]');
    await waiting.waitFor();
    expect(await waiting.locator(".tool-name").textContent()).toBe("refund");
    expect(await waiting.locator(".approval").textContent()).toBe("waiting for approval");
    expect(await waiting.textContent()).toContain("by ops");
    expect(await waiting.locator(".message-content").textContent()).toContain('"order_id": "A1"');

    const [review] = (await s.api<{ reviews: { execution_id: string }[] }>("GET", "/v1/reviews")).reviews;
    await s.api("POST", `/v1/runs/${run.run_id}/nodes/assist/review`, {
      decision: "approve",
      by: "ops",
      execution_id: review?.execution_id,
    });
    await nodeInState(page, "assist", "SUCCEEDED");
    const refund = conversation.locator('li[data-role="tool"]');
    await expect.poll(() => refund.locator(".approval").allTextContents()).toEqual([" approved by ops"]);
    expect(await conversation.locator('li[data-waiting="true"]').count()).toBe(0);
    await expectAccessible(page, "a conversation with an approved tool call");
  });
});
