/**
 * The agent node in a real engine, against the OpenAI-protocol fixture server (on the store the
 * suite runs on): a loop of turns with parallel tool calls, invalid arguments and failed calls
 * going back to the model (or failing the visit), max_turns, a budget, a cancel mid-tool, a
 * redrive that resumes after the last recorded message, and what validation refuses.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentHandler, EngineOptions, WorkflowInput } from "../../../src/index.js";
import { ConflictError, ForbiddenError, NonRetryableError, ValidationError } from "../../../src/index.js";
import { startMcpHttpServer } from "../../fixtures/mcp-server.js";
import { type OpenAIServer, startOpenAIServer } from "../../fixtures/openai-server.js";
import { nextEvent, tempDb, testEngine } from "../../helpers.js";

let server: OpenAIServer;
beforeEach(async () => {
  server = await startOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

const chat = () => server.requestsTo("/v1/chat/completions");
/** The body of the n-th (0-based) chat request; fails the test when there is none. */
function bodyOf(n: number): unknown {
  const request = chat()[n];
  if (!request) throw new Error(`no chat request ${n}: ${chat().length} came`);
  return request.body;
}

function engineWith(agents: Record<string, AgentHandler>, options: EngineOptions = {}) {
  return testEngine({
    llm: { providers: { default: { base_url: server.baseUrl, api_key: "sk-test" } } },
    progressIntervalMs: 0,
    agents,
    ...options,
  });
}

const lookupTool = {
  name: "lookup",
  description: "Finds an order",
  parameters: { type: "object", properties: { order_id: { type: "string" } }, required: ["order_id"] },
  agent_type: "orders",
};

function agentFlow(payload: Record<string, unknown>, node: Record<string, unknown> = {}): WorkflowInput {
  return {
    id: "support",
    nodes: [
      {
        node_id: "assist",
        agent_type: "agent",
        payload: { model: "gpt-test", instructions: "You help.", input: "{{ input.question }}", ...payload },
        ...node,
      },
    ],
  } as WorkflowInput;
}

const call = (id: string, name: string, args: unknown) => ({ id, name, arguments: JSON.stringify(args) });

describe("the agent node", () => {
  it("runs three turns with parallel tool calls and answers, each call with its key", async () => {
    const seen: { key: string; payload: unknown }[] = [];
    // The two calls of turn 1 each wait until both have started: run one after the other, they would not end.
    let bothStarted: () => void = () => {};
    const both = new Promise<void>((resolve) => {
      bothStarted = resolve;
    });
    const { engine } = await engineWith({
      orders: async (t) => {
        seen.push({ key: t.execution_id, payload: t.payload });
        if (seen.length === 2) bothStarted();
        if (seen.length <= 2) await both;
        return { order: (t.payload as { order_id: string }).order_id, status: "shipped" };
      },
    });
    await engine.registerWorkflow(agentFlow({ tools: [lookupTool] }));
    server.reply(
      {
        tool_calls: [call("c1", "lookup", { order_id: "A1" }), call("c2", "lookup", { order_id: "B2" })],
        usage: { prompt_tokens: 10, completion_tokens: 4 },
      },
      { tool_calls: [call("c3", "lookup", { order_id: "C3" })], usage: { prompt_tokens: 20, completion_tokens: 3 } },
      { text: "All three shipped.", usage: { prompt_tokens: 30, completion_tokens: 5 } },
    );
    const run = await engine.waitForRun((await engine.startRun("support", { input: { question: "Where?" } })).run_id);

    expect(run.status).toBe("SUCCEEDED");
    const ex = run.nodes[0]?.execution_id as string;
    expect(run.nodes[0]?.output).toEqual({
      content: "All three shipped.",
      parsed: null,
      finish_reason: "stop",
      turns: 3,
      tool_calls: 3,
      usage: { tokens_in: 60, tokens_out: 12 },
    });
    expect(seen.sort((a, b) => a.key.localeCompare(b.key))).toEqual([
      { key: `${ex}:1:0`, payload: { order_id: "A1" } },
      { key: `${ex}:1:1`, payload: { order_id: "B2" } },
      { key: `${ex}:2:0`, payload: { order_id: "C3" } },
    ]);
    // Each request is assembled from the stored messages: the third sees both turns and their results.
    const third = chat()[2]?.body as {
      messages: { role: string; content?: string; tool_call_id?: string }[];
      tools: unknown[];
    };
    expect(third.messages.map((m) => m.role)).toEqual([
      "system",
      "user",
      "assistant",
      "tool",
      "tool",
      "assistant",
      "tool",
    ]);
    expect(third.messages[3]).toEqual({
      role: "tool",
      tool_call_id: "c1",
      content: '{"order":"A1","status":"shipped"}',
    });
    expect(third.tools).toEqual([
      {
        type: "function",
        function: { name: "lookup", description: "Finds an order", parameters: lookupTool.parameters },
      },
    ]);
    // One step a message: 3 turns and 3 calls (the two parallel ones in the order they ended).
    const steps = (await engine.listSteps(run.run_id, "assist")).map((s) => s.name);
    expect(steps.sort()).toEqual(["tool:1:0", "tool:1:1", "tool:2:0", "turn:1", "turn:2", "turn:3"]);
    expect((await engine.getRun(run.run_id)).usage).toMatchObject({ tokens_in: 60, tokens_out: 12 });
  });

  it("runs the calls of a turn one after another when parallel_tool_calls is false", async () => {
    let inFlight = 0;
    let most = 0;
    const { engine } = await engineWith({
      orders: async () => {
        inFlight += 1;
        most = Math.max(most, inFlight);
        await new Promise((resolve) => setImmediate(resolve));
        inFlight -= 1;
        return "ok";
      },
    });
    await engine.registerWorkflow(agentFlow({ tools: [lookupTool], parallel_tool_calls: false }));
    server.reply(
      { tool_calls: [call("c1", "lookup", { order_id: "A1" }), call("c2", "lookup", { order_id: "B2" })] },
      { text: "done" },
    );
    const run = await engine.waitForRun((await engine.startRun("support", { input: { question: "?" } })).run_id);
    expect(run.status).toBe("SUCCEEDED");
    expect(most).toBe(1);
  });

  it("gives invalid arguments, an unknown tool and a failed call back to the model (tool_errors to_model)", async () => {
    let calls = 0;
    const { engine } = await engineWith({
      orders: (t) => {
        calls += 1;
        if ((t.payload as { order_id: string }).order_id === "BAD") throw new Error("no such order");
        return "shipped";
      },
    });
    await engine.registerWorkflow(agentFlow({ tools: [lookupTool] }));
    server.reply(
      {
        tool_calls: [
          call("c1", "lookup", { order: 1 }),
          call("c2", "refund", {}),
          call("c3", "lookup", { order_id: "BAD" }),
          { id: "c4", name: "lookup", arguments: "{not json" },
        ],
      },
      { text: "Sorry." },
    );
    const run = await engine.waitForRun((await engine.startRun("support", { input: { question: "?" } })).run_id);
    expect(run.status).toBe("SUCCEEDED");
    expect(calls).toBe(1); // only the valid call ran
    const tools = (bodyOf(1) as { messages: { role: string; content: string }[] }).messages.filter(
      (m) => m.role === "tool",
    );
    expect(tools.map((m) => m.content)).toEqual([
      expect.stringMatching(/^error: invalid arguments for lookup: arguments must have required property 'order_id'/),
      expect.stringMatching(/^error: there is no tool named "refund"; the tools are lookup/),
      "error: no such order",
      expect.stringMatching(/^error: the arguments are not a JSON object/),
    ]);
  });

  it("fails the visit on a failed call when tool_errors is fail, after the tool's retries", async () => {
    let calls = 0;
    const { engine } = await engineWith({
      orders: () => {
        calls += 1;
        throw new Error("the order service is down");
      },
    });
    await engine.registerWorkflow(
      agentFlow({ tools: [{ ...lookupTool, retry_count: 2 }], tool_errors: "fail" }, { retry_count: 0 }),
    );
    server.reply({ tool_calls: [call("c1", "lookup", { order_id: "A1" })] });
    const run = await engine.waitForRun((await engine.startRun("support", { input: { question: "?" } })).run_id);
    expect(run.status).toBe("FAILED");
    expect(calls).toBe(3);
    expect(run.nodes[0]?.error).toMatchObject({
      reason: "non_retryable",
      message: 'tool "lookup" failed (tool_errors is "fail"): the order service is down',
    });
  });

  it("fails max_turns_exceeded when the model keeps calling tools", async () => {
    const { engine } = await engineWith({ orders: () => "ok" });
    await engine.registerWorkflow(agentFlow({ tools: [lookupTool], max_turns: 2 }));
    server.reply(
      { tool_calls: [call("c1", "lookup", { order_id: "A" })] },
      { tool_calls: [call("c2", "lookup", { order_id: "B" })] },
    );
    const run = await engine.waitForRun((await engine.startRun("support", { input: { question: "?" } })).run_id);
    expect(run.status).toBe("FAILED");
    expect(run.nodes[0]).toMatchObject({ reason: "max_turns_exceeded", error: { reason: "max_turns_exceeded" } });
    expect(chat()).toHaveLength(2);
  });

  it("stops before the next turn once the run's budget is spent", async () => {
    const { engine } = await engineWith({ orders: () => "ok" });
    await engine.registerWorkflow({
      ...agentFlow({ tools: [lookupTool] }),
      budget: { max_tokens: 100 },
    } as WorkflowInput);
    server.reply({
      tool_calls: [call("c1", "lookup", { order_id: "A" })],
      usage: { prompt_tokens: 90, completion_tokens: 20 },
    });
    const run = await engine.waitForRun((await engine.startRun("support", { input: { question: "?" } })).run_id);
    expect(run.status).toBe("FAILED");
    expect(run.nodes[0]).toMatchObject({ reason: "budget_exceeded", error: { reason: "budget_exceeded" } });
    expect(run.nodes[0]?.error?.message).toMatch(
      /110 tokens used .* of max_tokens 100.*\(before tool call lookup of turn 1\)/,
    );
    expect(chat()).toHaveLength(1);
  });

  it("resumes a redriven visit after its last recorded message: no turn asked again, no call run again", async () => {
    const ran: string[] = [];
    const { engine } = await engineWith({
      orders: (t) => {
        ran.push(t.execution_id);
        return "shipped";
      },
    });
    await engine.registerWorkflow(agentFlow({ tools: [lookupTool] }, { retry_count: 0 }));
    server.reply(
      { tool_calls: [call("c1", "lookup", { order_id: "A" })] },
      { status: 400 }, // turn 2 fails the visit (not retried)
      { text: "Shipped." },
    );
    const failed = await engine.waitForRun((await engine.startRun("support", { input: { question: "?" } })).run_id);
    expect(failed.status).toBe("FAILED");
    await engine.retryRun(failed.run_id);
    const run = await engine.waitForRun(failed.run_id);
    expect(run.status).toBe("SUCCEEDED");
    expect(run.nodes[0]?.output).toMatchObject({ content: "Shipped.", turns: 2, tool_calls: 1 });
    expect(ran).toHaveLength(1); // the recorded call did not run again
    expect(chat()).toHaveLength(3); // turn 1 was not asked again
    expect((bodyOf(2) as { messages: unknown[] }).messages).toHaveLength(4);
  });

  it("aborts the running tool call when the run is cancelled, and asks the model nothing more", async () => {
    let started: () => void = () => {};
    const inTool = new Promise<void>((resolve) => {
      started = resolve;
    });
    let aborted: unknown = null;
    const { engine } = await engineWith({
      orders: (t) =>
        new Promise((_, reject) => {
          started();
          t.signal.addEventListener("abort", () => {
            aborted = t.signal.reason;
            reject(t.signal.reason);
          });
        }),
    });
    await engine.registerWorkflow(agentFlow({ tools: [lookupTool] }));
    server.reply({ tool_calls: [call("c1", "lookup", { order_id: "A" })] }, { text: "never asked" });
    const { run_id } = await engine.startRun("support", { input: { question: "?" } });
    await inTool;
    await engine.cancelRun(run_id, { reason: "the user left" });
    const run = await engine.waitForRun(run_id);
    expect(run.status).toBe("CANCELLED");
    expect(String(aborted)).toMatch(/cancel/);
    expect(chat()).toHaveLength(1);
    expect((await engine.listSteps(run_id, "assist")).map((s) => s.name)).toEqual(["turn:1"]);
  });

  it("calls an MCP server's tools with the call's key in _meta, and records the server's tool list with the visit", async () => {
    const mcp = await startMcpHttpServer();
    try {
      const { engine } = await engineWith({}, { mcp: { servers: { shop: { url: mcp.url } } } });
      await engine.registerWorkflow(agentFlow({ tools: [{ mcp: "shop", tools: ["lookup", "fail"] }] }));
      server.reply(
        {
          tool_calls: [
            call("c1", "lookup", { order_id: "A1" }),
            call("c2", "fail", {}),
            call("c3", "add", { a: 1, b: 2 }),
          ],
        },
        { text: "A1 has shipped." },
      );
      const run = await engine.waitForRun((await engine.startRun("support", { input: { question: "?" } })).run_id);
      expect(run.status).toBe("SUCCEEDED");
      const ex = run.nodes[0]?.execution_id as string;
      const calls = mcp.calls.map((c) => [c.tool, c.arguments, c.idempotency_key]);
      expect(calls.sort((a, b) => String(a[2]).localeCompare(String(b[2])))).toEqual([
        ["lookup", { order_id: "A1" }, `${ex}:1:0`],
        ["fail", {}, `${ex}:1:1`],
      ]);
      // The model was offered the two tools asked for, as the server declares them.
      const first = chat()[0]?.body as { tools: { function: { name: string; parameters: unknown } }[] };
      expect(first.tools.map((t) => t.function.name)).toEqual(["lookup", "fail"]);
      expect(first.tools[0]?.function.parameters).toMatchObject({ properties: { order_id: { type: "string" } } });
      const { messages } = await engine.listMessages(run.run_id, "assist");
      expect(messages.filter((m) => m.role === "tool").map((m) => [m.content, m.error ?? false])).toEqual([
        ["order A1: shipped", false],
        ["error: the tool failed", true],
        [expect.stringMatching(/^error: there is no tool named "add"/), true],
      ]);
      const steps = await engine.listSteps(run.run_id, "assist");
      expect(steps[0]?.name).toBe("mcp:shop"); // the list, recorded once: recovery and redrive use it
    } finally {
      await mcp.close();
    }
  });

  it("pages the conversation: instructions, input, each turn and each call with its usage", async () => {
    const { engine } = await engineWith({ orders: () => ({ status: "shipped" }) });
    await engine.registerWorkflow(agentFlow({ tools: [lookupTool] }));
    server.reply(
      { tool_calls: [call("c1", "lookup", { order_id: "A1" })], usage: { prompt_tokens: 10, completion_tokens: 4 } },
      { text: "Shipped.", usage: { prompt_tokens: 20, completion_tokens: 2 } },
    );
    const run = await engine.waitForRun(
      (await engine.startRun("support", { input: { question: "Where is A1?" } })).run_id,
    );
    const page = await engine.listMessages(run.run_id, "assist", { limit: 3 });
    expect(page).toMatchObject({
      visit: 1,
      next_after: 2,
      messages: [
        { seq: 0, role: "system", content: "You help." },
        { seq: 1, role: "user", content: "Where is A1?" },
        {
          seq: 2,
          role: "assistant",
          content: "",
          turn: 1,
          attempt: 1,
          usage: { tokens_in: 10, tokens_out: 4 },
          tool_calls: [{ id: "c1", type: "function", function: { name: "lookup", arguments: '{"order_id":"A1"}' } }],
        },
      ],
    });
    const rest = await engine.listMessages(run.run_id, "assist", { after: 2 });
    expect(rest.next_after).toBeNull();
    expect(rest.messages).toMatchObject([
      { seq: 3, role: "tool", tool_call_id: "c1", name: "lookup", content: '{"status":"shipped"}', turn: 1 },
      { seq: 4, role: "assistant", content: "Shipped.", finish_reason: "stop", turn: 2 },
    ]);
    await expect(engine.listMessages(run.run_id, "nope")).rejects.toThrow(
      /has no agent node "nope": its agent nodes are assist/,
    );
    await expect(engine.listMessages(run.run_id, "assist", { limit: 0 })).rejects.toThrow(ValidationError);
  });

  it("continues a thread across two runs, one visit of the thread at a time", async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started: () => void = () => {};
    const inTool = new Promise<void>((resolve) => {
      started = resolve;
    });
    const { engine } = await engineWith({
      orders: async (t) => {
        started();
        await held;
        return `${(t.payload as { order_id: string }).order_id} shipped`;
      },
    });
    await engine.registerWorkflow(agentFlow({ tools: [lookupTool], thread: "{{ input.user }}" }));
    server.reply(
      { tool_calls: [call("c1", "lookup", { order_id: "A1" })] },
      { text: "A1 has shipped." },
      { text: "You asked about A1." },
    );
    const first = await engine.startRun("support", { input: { question: "Where is A1?", user: "ann" } });
    await inTool;
    // The second run's visit of ann's thread waits while the first runs: its request (below)
    // holds the first one's answer, which did not exist before the first visit ended.
    const second = await engine.startRun("support", { input: { question: "What did I ask?", user: "ann" } });
    release();
    expect((await engine.waitForRun(first.run_id)).status).toBe("SUCCEEDED");
    const done = await engine.waitForRun(second.run_id);
    expect(done.nodes[0]?.output).toMatchObject({ content: "You asked about A1.", turns: 1 });
    // Its request held the thread: the first visit's question, call, result and answer, then its own question.
    const last = chat()[2]?.body as { messages: { role: string; content: string }[] };
    expect(last.messages.map((m) => `${m.role}: ${m.content}`)).toEqual([
      "system: You help.",
      "user: Where is A1?",
      "assistant: ",
      "tool: A1 shipped",
      "assistant: A1 has shipped.",
      "user: What did I ask?",
    ]);
    // Another user's thread starts empty.
    server.reply({ text: "Hello." });
    const other = await engine.waitForRun(
      (await engine.startRun("support", { input: { question: "Hi", user: "bob" } })).run_id,
    );
    expect(other.status).toBe("SUCCEEDED");
    expect((bodyOf(3) as { messages: unknown[] }).messages).toHaveLength(2);
  });

  it("calls an http tool with a payload its templates make from the model's arguments", async () => {
    server.replyAt("/orders/A1", { status: 200, body: { order: "A1", status: "shipped" } });
    const { engine } = await engineWith({});
    const fetchOrder = {
      name: "fetch_order",
      parameters: { type: "object", properties: { order_id: { type: "string" } } },
      agent_type: "http",
      payload: { url: `${server.url}/orders/{{ args.order_id }}` },
    };
    await engine.registerWorkflow(agentFlow({ tools: [fetchOrder] }));
    server.reply({ tool_calls: [call("c1", "fetch_order", { order_id: "A1" })] }, { text: "Shipped." });
    const run = await engine.waitForRun((await engine.startRun("support", { input: { question: "?" } })).run_id);
    expect(run.status).toBe("SUCCEEDED");
    const [request] = server.requestsTo("/orders/A1");
    expect(request?.headers["idempotency-key"]).toBe(`${run.nodes[0]?.execution_id}:1:0`);
    const tool = (await engine.listMessages(run.run_id, "assist")).messages.find((m) => m.role === "tool");
    expect(JSON.parse(String(tool?.content))).toMatchObject({ status: 200, body: { order: "A1", status: "shipped" } });
  });

  it("tells the model a tool's result is too large instead of storing it", async () => {
    const { engine } = await engineWith({ orders: () => "x".repeat(5000) }, { maxPayloadBytes: 4096 });
    await engine.registerWorkflow(agentFlow({ tools: [lookupTool] }));
    server.reply({ tool_calls: [call("c1", "lookup", { order_id: "A" })] }, { text: "Too much." });
    const run = await engine.waitForRun((await engine.startRun("support", { input: { question: "?" } })).run_id);
    expect(run.status).toBe("SUCCEEDED");
    const tool = (await engine.listMessages(run.run_id, "assist")).messages.find((m) => m.role === "tool");
    expect(tool).toMatchObject({
      error: true,
      content: expect.stringMatching(/^error: the result is 5000 bytes, over the limit of 3072/),
    });
  });

  it("undoes the tool's recorded calls, newest first with their keys, when the run's ending compensates", async () => {
    const undone: { key: string; payload: unknown }[] = [];
    const { engine } = await engineWith({
      book: (t) => ({ booking: `B-${(t.payload as { seat: string }).seat}` }),
      unbook: (t) => {
        undone.push({ key: t.execution_id, payload: t.payload });
        return "released";
      },
      boom: () => {
        throw new NonRetryableError("payment declined");
      },
    });
    const bookTool = {
      name: "book",
      parameters: { type: "object", properties: { seat: { type: "string" } } },
      agent_type: "book",
      compensation: { agent_type: "unbook" },
    };
    await engine.registerWorkflow({
      id: "trip",
      nodes: [
        {
          node_id: "assist",
          agent_type: "agent",
          payload: { model: "gpt-test", input: "Book 2 seats", tools: [bookTool] },
        },
        { node_id: "pay", agent_type: "boom", depends_on: ["assist"] },
      ],
    } as WorkflowInput);
    server.reply(
      { tool_calls: [call("c1", "book", { seat: "1A" })] },
      { tool_calls: [call("c2", "book", { seat: "1B" })] },
      { text: "Booked 1A and 1B." },
    );
    const run = await engine.waitForRun((await engine.startRun("trip")).run_id);
    expect(run.status).toBe("FAILED");
    const ex = run.nodes.find((n) => n.node_id === "assist")?.execution_id as string;
    expect(undone).toEqual([
      { key: `${ex}:2:0:compensate`, payload: { tool: "book", args: { seat: "1B" }, result: '{"booking":"B-1B"}' } },
      { key: `${ex}:1:0:compensate`, payload: { tool: "book", args: { seat: "1A" }, result: '{"booking":"B-1A"}' } },
    ]);
    expect(run.compensations).toMatchObject([{ node_id: "assist", state: "SUCCEEDED" }]);
  });

  it("undoes a call that was running when the run was cancelled with compensation, as in flight with its key", async () => {
    const undone: { key: string; payload: unknown }[] = [];
    let started: () => void = () => {};
    const inTool = new Promise<void>((resolve) => {
      started = resolve;
    });
    const { engine } = await engineWith({
      book: (t) =>
        t.payload && (t.payload as { seat: string }).seat === "1A"
          ? { booking: "B-1A" }
          : new Promise((_, reject) => {
              started();
              t.signal.addEventListener("abort", () => reject(t.signal.reason));
            }),
      unbook: (t) => {
        undone.push({ key: t.execution_id, payload: t.payload });
        return "released";
      },
    });
    const bookTool = {
      name: "book",
      parameters: { type: "object", properties: { seat: { type: "string" } } },
      agent_type: "book",
      compensation: { agent_type: "unbook" },
    };
    await engine.registerWorkflow(agentFlow({ tools: [bookTool, refundTool] }));
    server.reply(
      // A booking recorded, a refund its reviewer rejected (the visit waited, then went on), then a booking cut short.
      { tool_calls: [call("c1", "book", { seat: "1A" }), call("c2", "refund", { order_id: "A1" })] },
      { tool_calls: [call("c3", "book", { seat: "1B" })] },
    );
    const { run_id } = await engine.startRun("support", { input: { question: "Book" } });
    await nextEvent(engine, (e) => e.type === "review.requested");
    await engine.review(run_id, "assist", { decision: "reject", by: "ops" });
    await inTool;
    await engine.cancelRun(run_id, { compensate: true });
    const run = await engine.waitForRun(run_id);

    expect(run.status).toBe("CANCELLED");
    const ex = run.nodes[0]?.execution_id as string;
    expect(undone).toEqual([
      { key: `${ex}:2:0:compensate`, payload: { tool: "book", args: { seat: "1B" }, result: null, in_flight: true } },
      { key: `${ex}:1:0:compensate`, payload: { tool: "book", args: { seat: "1A" }, result: '{"booking":"B-1A"}' } },
    ]);
    expect(run.compensations).toMatchObject([{ node_id: "assist", state: "SUCCEEDED" }]);
  });

  it("runs a workflow tool's call as a child run of the visit, keyed by the call, its output the result", async () => {
    const { engine } = await engineWith({ orders: (t) => ({ found: (t.input as { order_id: string }).order_id }) });
    await engine.registerWorkflow({
      id: "find-order",
      input_schema: { type: "object", properties: { order_id: { type: "string" } }, required: ["order_id"] },
      nodes: [{ node_id: "find", agent_type: "orders" }],
    } as WorkflowInput);
    const findTool = {
      name: "find",
      parameters: lookupTool.parameters,
      agent_type: "workflow",
      payload: { workflow_id: "find-order", input: "{{ args }}" },
    };
    await engine.registerWorkflow(agentFlow({ tools: [findTool] }));
    server.reply({ tool_calls: [call("c1", "find", { order_id: "A1" })] }, { text: "Found A1." });
    const run = await engine.waitForRun((await engine.startRun("support", { input: { question: "A1?" } })).run_id);

    expect(run.status).toBe("SUCCEEDED");
    const ex = run.nodes[0]?.execution_id as string;
    // The workflow's output, its ending nodes' by id (as a workflow node's).
    expect(toolMessage("c1")).toEqual({ role: "tool", tool_call_id: "c1", content: '{"find":{"found":"A1"}}' });
    const [child] = await engine.listRuns({ workflow_id: "find-order" });
    expect(child).toMatchObject({
      status: "SUCCEEDED",
      input: { order_id: "A1" },
      idempotency_key: `skein:${ex}:tool:1:0`,
      parent: { run_id: run.run_id, node_id: "assist", visit: 1, call: "1:0" },
    });
    // A workflow tool whose payload names no workflow is refused at registration.
    const bad = engine.registerWorkflow(agentFlow({ tools: [{ ...findTool, payload: { input: "{{ args }}" } }] }));
    await expect(bad).rejects.toThrow(/payload\.tools\[0\]\.payload: a workflow tool's payload names the workflow/);
  });

  it("hands a call no agent of the engine serves to an external worker, as a run of that agent, and waits for it", async () => {
    const { engine } = await engineWith({});
    const stockTool = {
      name: "stock",
      parameters: { type: "object", properties: { sku: { type: "string" } } },
      agent_type: "warehouse",
    };
    await engine.registerWorkflow(agentFlow({ tools: [stockTool] }));
    server.reply({ tool_calls: [call("c1", "stock", { sku: "S-9" })] }, { text: "3 in stock." });
    const { run_id } = await engine.startRun("support", { input: { question: "S-9?" } });
    const [task] = await engine.claimTasks({ agent_types: ["warehouse"], worker_id: "w1", wait_seconds: 30 });
    expect(task).toMatchObject({ agent_type: "warehouse", input: { sku: "S-9" } });
    const child = await engine.getRun(task?.run_id as string);
    expect(child.parent).toMatchObject({ run_id, node_id: "assist", call: "1:0" });
    expect(child.workflow_id).toBe("support/assist/stock");
    await engine.completeTask(task?.execution_id as string, { worker_id: "w1", attempt: 1, output: { count: 3 } });
    const run = await engine.waitForRun(run_id);

    expect(run.status).toBe("SUCCEEDED");
    expect(toolMessage("c1")).toEqual({ role: "tool", tool_call_id: "c1", content: '{"count":3}' });
    expect(run.nodes[0]?.output).toMatchObject({ content: "3 in stock.", tool_calls: 1 });
  });

  it("waits for the same child run in a new engine after the one running the loop stopped mid-call", async () => {
    const database = tempDb();
    const first = await engineWith({}, { database });
    await first.engine.registerWorkflow(agentFlow({ tools: [{ name: "stock", agent_type: "warehouse" }] }));
    server.reply({ tool_calls: [call("c1", "stock", { sku: "S-9" })] }, { text: "3 in stock." });
    const { run_id } = await first.engine.startRun("support", { input: { question: "S-9?" } });
    const [task] = await first.engine.claimTasks({ agent_types: ["warehouse"], worker_id: "w1", wait_seconds: 30 });
    await first.engine.close({ timeoutMs: 100 }); // the loop's attempt is left for the next engine

    const second = await engineWith({}, { database });
    await second.engine.completeTask(task?.execution_id as string, { worker_id: "w1", attempt: 1, output: 3 });
    const run = await second.engine.waitForRun(run_id);

    expect(run.status).toBe("SUCCEEDED");
    expect(toolMessage("c1")?.content).toBe("3");
    expect(chat()).toHaveLength(2); // the recorded turn was not asked again
    expect(await second.engine.listRuns({ workflow_id: "support/assist/stock" })).toHaveLength(1);
  });

  it("cancels a tool's child run when its run is cancelled", async () => {
    const { engine, clock } = await engineWith({});
    await engine.registerWorkflow(agentFlow({ tools: [{ name: "stock", agent_type: "warehouse" }] }));
    server.reply({ tool_calls: [call("c1", "stock", {})] });
    const { run_id } = await engine.startRun("support", { input: { question: "?" } });
    const [task] = await engine.claimTasks({ agent_types: ["warehouse"], worker_id: "w1", wait_seconds: 30 });
    await engine.cancelRun(run_id);
    // The sweep finds the child whose visit has ended.
    const ended = engine.waitForRun(task?.run_id as string);
    await clock.advance(2_000);
    expect((await ended).status).toBe("CANCELLED");
    expect((await engine.waitForRun(run_id)).status).toBe("CANCELLED");
  });

  const refundTool = {
    name: "refund",
    description: "Refunds an order",
    parameters: { type: "object", properties: { order_id: { type: "string" }, amount: { type: "number" } } },
    agent_type: "refunds",
    approval: { assignees: ["ops"], timeout: 600 },
  };

  /** A run whose first turn asks for a refund (approval) and a lookup (none) at once; waits for the review. */
  async function refundWaiting() {
    const refunds: { key: string; payload: unknown }[] = [];
    let lookups = 0;
    const { engine, clock } = await engineWith({
      orders: () => {
        lookups += 1;
        return { status: "shipped" };
      },
      refunds: (t) => {
        refunds.push({ key: t.execution_id, payload: t.payload });
        return { refunded: true };
      },
    });
    await engine.registerWorkflow(agentFlow({ tools: [lookupTool, refundTool] }));
    server.reply(
      { tool_calls: [call("c1", "refund", { order_id: "A1", amount: 30 }), call("c2", "lookup", { order_id: "A1" })] },
      { text: "Done." },
    );
    const requested = nextEvent(engine, (e) => e.type === "review.requested");
    const { run_id } = await engine.startRun("support", { input: { question: "Refund A1" } });
    await requested;
    const ex = (await engine.getRun(run_id)).nodes[0]?.execution_id as string;
    return { engine, clock, run_id, ex, refunds, lookups: () => lookups };
  }

  /** The tool message the model was sent for call `id` in the last request. */
  const toolMessage = (id: string) =>
    (
      bodyOf(chat().length - 1) as { messages: { role: string; tool_call_id?: string; content?: string }[] }
    ).messages.find((m) => m.role === "tool" && m.tool_call_id === id);

  it("waits for approval of a tool's call, shows the tool and its arguments, and runs it once approved", async () => {
    const { engine, run_id, ex, refunds, lookups } = await refundWaiting();
    const run = await engine.getRun(run_id);
    expect(run.nodes[0]?.state).toBe("IN_REVIEW");
    expect(run.waiting_reviews).toBe(1);
    // The call needing no approval ran while the other waits; the refund has not.
    expect(lookups()).toBe(1);
    expect(refunds).toEqual([]);
    expect(await engine.listReviews()).toMatchObject([
      {
        run_id,
        node_id: "assist",
        execution_id: `${ex}:1:0`,
        title: "Approve a call of tool refund",
        assignees: ["ops"],
        data: { tool: "refund", arguments: { order_id: "A1", amount: 30 } },
      },
    ]);
    // Only an assignee decides, and only the round waiting.
    await expect(engine.review(run_id, "assist", { decision: "approve", by: "bob" })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    await expect(
      engine.review(run_id, "assist", { decision: "approve", by: "ops", execution_id: ex }),
    ).rejects.toBeInstanceOf(ConflictError);
    await engine.review(run_id, "assist", { decision: "approve", by: "ops", execution_id: `${ex}:1:0` });
    const done = await engine.waitForRun(run_id);

    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[0]?.output).toMatchObject({ content: "Done.", turns: 2, tool_calls: 2 });
    expect(refunds).toEqual([{ key: `${ex}:1:0`, payload: { order_id: "A1", amount: 30 } }]);
    expect(lookups()).toBe(1); // recorded before the wait: not run again
    expect(chat()).toHaveLength(2); // the first turn was not asked again
    expect(toolMessage("c1")).toEqual({ role: "tool", tool_call_id: "c1", content: '{"refunded":true}' });
    const steps = await engine.listSteps(run_id, "assist");
    expect(steps.find((s) => s.name === "approval:1:0")?.output).toEqual({
      decision: "approve",
      by: "ops",
      comment: null,
    });
    const messages = await engine.listMessages(run_id, "assist");
    expect(messages.messages.find((m) => m.tool_call_id === "c1")).toMatchObject({
      approval: { decision: "approve", by: "ops" },
    });
    expect((await engine.getRun(run_id)).nodes[0]?.failures).toBe(0);
  });

  it("tells the model who rejected a call, and does not run it", async () => {
    const { engine, run_id, refunds } = await refundWaiting();
    await engine.review(run_id, "assist", { decision: "reject", by: "ops", comment: "over the limit" });
    const done = await engine.waitForRun(run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(refunds).toEqual([]);
    expect(toolMessage("c1")?.content).toBe("rejected by ops: over the limit");
  });

  it("tells the model a call was not approved in time once its approval's timeout passes", async () => {
    const { engine, clock, run_id, refunds } = await refundWaiting();
    await clock.advance(599_000);
    expect((await engine.getRun(run_id)).nodes[0]?.state).toBe("IN_REVIEW");
    const done = engine.waitForRun(run_id);
    await clock.advance(1_000);
    expect((await done).status).toBe("SUCCEEDED");
    expect(refunds).toEqual([]);
    expect(toolMessage("c1")?.content).toBe("rejected by timeout: no decision within 600 s");
    await expect(engine.review(run_id, "assist", { decision: "approve", by: "ops" })).rejects.toBeInstanceOf(
      ConflictError,
    );
  });

  it("refuses a payload with precise paths at registration", async () => {
    const { engine } = await engineWith({ orders: () => "ok" });
    const attempt = engine.registerWorkflow(
      agentFlow({
        max_turn: 3,
        tools: [
          lookupTool,
          { ...lookupTool, parameters: { type: "object", properties: { a: { type: "strin" } } } },
          { name: "x", agent_type: "orders", approval: { assignees: [], timeout: 0 }, compensation: "undo" },
          { mcp: "" },
        ],
      }),
    );
    await expect(attempt).rejects.toThrow(ValidationError);
    const problems = await attempt.catch((e: ValidationError) => e.problems.map((p) => `${p.path}: ${p.message}`));
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^nodes\[0\]\.payload\.max_turn: is not a field of an agent payload \(did you mean "max_turns"\?\)/,
        ),
        expect.stringMatching(
          /^nodes\[0\]\.payload\.tools\[1\]\.name: "lookup" is the name of payload\.tools\[0\] too/,
        ),
        expect.stringMatching(/^nodes\[0\]\.payload\.tools\[1\]\.parameters: is not a valid JSON Schema/),
        expect.stringMatching(/^nodes\[0\]\.payload\.tools\[2\]\.approval\.assignees: must name at least one/),
        expect.stringMatching(/^nodes\[0\]\.payload\.tools\[2\]\.approval\.timeout: must be a number of seconds/),
        expect.stringMatching(/^nodes\[0\]\.payload\.tools\[2\]\.compensation: must be \{ "agent_type"/),
        expect.stringMatching(/^nodes\[0\]\.payload\.tools\[3\]\.mcp: must name a server/),
      ]),
    );
  });
});
