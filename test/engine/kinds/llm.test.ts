/**
 * The llm node in a real engine, against the OpenAI-protocol fixture server: progress events,
 * stored output, retries (a dropped stream, a schema mismatch, a 429's Retry-After, a hang), tool
 * calls, an unknown provider, and what validation refuses.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { EngineOptions, LiveEvent, WorkflowInput } from "../../../src/index.js";
import { ValidationError } from "../../../src/index.js";
import { type OpenAIServer, startOpenAIServer } from "../../fixtures/openai-server.js";
import { nextEvent, testEngine } from "../../helpers.js";
import { pour, repeated, startServer } from "../../local-server.js";

let server: OpenAIServer;
beforeEach(async () => {
  server = await startOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

function engineWith(options: EngineOptions = {}) {
  return testEngine({
    llm: {
      providers: { default: { base_url: server.baseUrl, api_key: "sk-test", cost_per_1k: { input: 1, output: 2 } } },
    },
    progressIntervalMs: 0,
    ...options,
  });
}

function oneNode(payload: Record<string, unknown>, node: Record<string, unknown> = {}): WorkflowInput {
  return { id: "ask", nodes: [{ node_id: "ask", agent_type: "llm", payload, ...node }] } as WorkflowInput;
}

const chat = () => server.requestsTo("/v1/chat/completions");

describe("the llm node", () => {
  it("streams its text as node.progress in order, and stores the whole completion as its output", async () => {
    server.reply({ text: ["The ", "ticket ", "is ", "a bug."], usage: { prompt_tokens: 9, completion_tokens: 5 } });
    const { engine } = await engineWith();
    await engine.registerWorkflow(oneNode({ model: "gpt-test", prompt: "Classify: {{ input.ticket }}" }));
    const progress: unknown[] = [];
    engine.subscribe((e: LiveEvent) => {
      if (e.type === "node.progress") progress.push(e.data);
    });
    const started = await engine.startRun("ask", { input: { ticket: "the app crashes" } });
    const run = await engine.waitForRun(started.run_id);

    expect(run.status).toBe("SUCCEEDED");
    expect(progress).toEqual([
      { attempt: 1, progress: { delta: "The " } },
      { attempt: 1, progress: { delta: "ticket " } },
      { attempt: 1, progress: { delta: "is " } },
      { attempt: 1, progress: { delta: "a bug." } },
    ]);
    expect(run.nodes[0]?.output).toEqual({
      content: "The ticket is a bug.",
      parsed: null,
      tool_calls: [],
      usage: { prompt_tokens: 9, completion_tokens: 5, total_tokens: 14 },
      finish_reason: "stop",
      model: "gpt-test",
    });
    expect(chat()[0]?.body).toMatchObject({
      messages: [{ role: "user", content: "Classify: the app crashes" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(chat()[0]?.headers.authorization).toBe("Bearer sk-test");
    // The usage the node reported, priced by the provider's cost_per_1k.
    expect(run.usage).toEqual({ tokens_in: 9, tokens_out: 5, cost: (9 * 1 + 5 * 2) / 1000 });
  });

  it("retries a stream dropped midway with the same execution_id (Idempotency-Key), and the retry's text wins", async () => {
    server.reply({ drop: ["Half an"] }, { text: ["A whole ", "answer"] });
    const { engine } = await engineWith();
    await engine.registerWorkflow(oneNode({ model: "m", prompt: "p" }, { retry_count: 1, retry_interval: 0 }));
    const retrying = nextEvent(engine, (e) => e.type === "node.retrying");
    const run = await engine.waitForRun((await engine.startRun("ask")).run_id);

    expect(run.status).toBe("SUCCEEDED");
    expect(run.nodes[0]?.output).toMatchObject({ content: "A whole answer" });
    expect((await retrying).data).toMatchObject({
      error: { message: expect.stringMatching(/^the stream from provider "default"/) },
    });
    const keys = chat().map((r) => r.headers["idempotency-key"]);
    expect(keys).toEqual([`${run.run_id}:ask:1`, `${run.run_id}:ask:1`]);
  });

  it("retries content that does not match the json_schema, then fails with the validation message", async () => {
    server.reply({ text: '{"category":"weather"}' }, { text: '{"category":"sports"}' });
    const { engine } = await engineWith();
    const response_format = {
      type: "json_schema",
      json_schema: {
        name: "triage",
        strict: true,
        schema: { type: "object", properties: { category: { enum: ["bug", "billing"] } }, required: ["category"] },
      },
    };
    await engine.registerWorkflow(
      oneNode({ model: "m", prompt: "p", response_format }, { retry_count: 1, retry_interval: 0 }),
    );
    const run = await engine.waitForRun((await engine.startRun("ask")).run_id);

    expect(run.status).toBe("FAILED");
    expect(chat()).toHaveLength(2);
    expect(run.nodes[0]).toMatchObject({ state: "FAILED", attempt: 2 });
    expect(run.nodes[0]?.error?.message).toBe(
      'the model\'s JSON does not match the schema "triage": /category must be equal to one of the allowed values ("bug", "billing")',
    );
  });

  it("parses matching JSON content into output.parsed, for a when to route on", async () => {
    server.reply({ text: '{"category":"bug"}' });
    const { engine } = await engineWith({
      agents: { fix: () => ({ fixed: true }), answer: () => ({ answered: true }) },
    });
    await engine.registerWorkflow({
      id: "route",
      nodes: [
        {
          node_id: "classify",
          agent_type: "llm",
          payload: { model: "m", prompt: "p", response_format: { type: "json_object" } },
          next_on_success: [{ when: "output.parsed.category = 'bug'", to: "fix" }, { to: "answer" }],
        },
        { node_id: "fix", agent_type: "fix" },
        { node_id: "answer", agent_type: "answer" },
      ],
    });
    const run = await engine.waitForRun((await engine.startRun("route")).run_id);
    expect(run.status).toBe("SUCCEEDED");
    expect(run.nodes.find((n) => n.node_id === "fix")?.state).toBe("SUCCEEDED");
    expect(run.nodes.find((n) => n.node_id === "answer")?.state).toBe("SKIPPED");
  });

  it("returns the model's tool calls", async () => {
    server.reply({ tool_calls: [{ id: "call_9", name: "refund", arguments: '{"order":"A-17","amount":20}' }] });
    const { engine } = await engineWith();
    const tools = [{ type: "function", function: { name: "refund", parameters: { type: "object" } } }];
    await engine.registerWorkflow(oneNode({ model: "m", messages: [{ role: "user", content: "refund A-17" }], tools }));
    const run = await engine.waitForRun((await engine.startRun("ask")).run_id);
    expect(run.nodes[0]?.output).toMatchObject({
      content: "",
      parsed: null,
      finish_reason: "tool_calls",
      tool_calls: [
        {
          id: "call_9",
          type: "function",
          function: { name: "refund", arguments: '{"order":"A-17","amount":20}' },
          parsed_arguments: { order: "A-17", amount: 20 },
        },
      ],
    });
  });

  it("retries a 429 after its Retry-After, on the engine's clock", async () => {
    server.reply({ status: 429, headers: { "retry-after": "20" } }, { text: "ok" });
    const { engine, clock } = await engineWith();
    await engine.registerWorkflow(
      oneNode({ model: "m", prompt: "p" }, { retry_count: 1, retry_interval: 1, retry_max_interval: 60 }),
    );
    const retrying = nextEvent(engine, (e) => e.type === "node.retrying");
    const started = await engine.startRun("ask");
    const retry = await retrying;
    expect((retry.data.retry_at as number) - retry.at).toBe(20_000);
    await clock.advance(19_999);
    expect(chat()).toHaveLength(1);
    const done = engine.waitForRun(started.run_id);
    await clock.advance(1);
    expect((await done).status).toBe("SUCCEEDED");
    expect(chat()).toHaveLength(2);
  });

  it("an attempt that hangs times out at the node's timeout and is retried", async () => {
    server.reply({ hang: ["thinking"] }, { text: "done" });
    const { engine, clock } = await engineWith();
    await engine.registerWorkflow(
      oneNode({ model: "m", prompt: "p" }, { timeout: 30, retry_count: 1, retry_interval: 0 }),
    );
    const started = await engine.startRun("ask");
    await server.waitForRequest(1);
    const done = engine.waitForRun(started.run_id);
    await clock.advance(30_000);
    const run = await done;
    expect(run.status).toBe("SUCCEEDED");
    expect(run.nodes[0]).toMatchObject({ attempt: 2, output: { content: "done" } });
  });

  it("an endless answer fails the visit invalid_output past its bound, not retried; the provider's connection is closed", async () => {
    let written!: (n: number) => void;
    const closed = new Promise<number>((resolve) => {
      written = resolve;
    });
    const endless = await startServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      const chunk = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "x".repeat(1000) } }] })}\n\n`;
      void pour(res, repeated("", chunk)).then(written);
    });
    try {
      const { engine } = await testEngine({
        llm: { providers: { default: { base_url: `${endless.url}/v1` } } },
        maxPayloadBytes: 10_000,
      });
      await engine.registerWorkflow(oneNode({ model: "m", prompt: "p" }, { retry_count: 3, retry_interval: 0 }));
      const run = await engine.waitForRun((await engine.startRun("ask")).run_id);
      expect(run.status).toBe("FAILED");
      expect(run.nodes[0]).toMatchObject({ state: "FAILED", reason: "invalid_output", attempt: 1 });
      expect(run.nodes[0]?.error).toMatchObject({ reason: "invalid_output" });
      expect(run.nodes[0]?.error?.message).toMatch(/passed 10000 bytes \(maxPayloadBytes\)/);
      expect(await closed).toBeLessThan(64 * 1024 * 1024);
      expect(endless.requests).toHaveLength(1);
    } finally {
      await endless.close();
    }
  });

  it("a provider's redirect is not followed: the visit fails naming it, the other origin receives nothing", async () => {
    const elsewhere = await startServer((_req, res) => res.end("{}"));
    const redirecting = await startServer((_req, res) => {
      res.writeHead(308, { location: `${elsewhere.url}/v1/chat/completions` });
      res.end();
    });
    try {
      const { engine } = await testEngine({
        llm: { providers: { default: { base_url: `${redirecting.url}/v1`, api_key: "sk-test" } } },
      });
      await engine.registerWorkflow(oneNode({ model: "m", prompt: "p" }, { retry_count: 3, retry_interval: 0 }));
      const run = await engine.waitForRun((await engine.startRun("ask")).run_id);
      expect(run.nodes[0]).toMatchObject({ state: "FAILED", reason: "non_retryable", attempt: 1 });
      expect(run.nodes[0]?.error?.message).toMatch(/answered 308 redirecting to .*redirects are not followed/);
      expect(elsewhere.requests).toEqual([]);
    } finally {
      await Promise.all([elsewhere.close(), redirecting.close()]);
    }
  });

  it("an unknown provider fails the node without retries, naming the engine's providers", async () => {
    const { engine } = await engineWith();
    await engine.registerWorkflow(oneNode({ model: "m", prompt: "p", provider: "fast" }, { retry_count: 3 }));
    const run = await engine.waitForRun((await engine.startRun("ask")).run_id);
    expect(run.status).toBe("FAILED");
    expect(run.nodes[0]).toMatchObject({ attempt: 1, reason: "non_retryable" });
    expect(run.nodes[0]?.error?.message).toBe(
      'the llm node asks for provider "fast", which this engine does not have; its providers are "default" (engine option llm.providers)',
    );
    expect(server.requests).toHaveLength(0);
  });

  it("refuses a payload it cannot send, every problem with its path", async () => {
    const { engine } = await engineWith();
    const bad = {
      id: "bad",
      nodes: [
        { node_id: "a", agent_type: "llm", payload: { prompt: "p", temprature: 0.5 } },
        { node_id: "b", agent_type: "llm", payload: { model: "m", messages: [{ role: "robot", content: 1 }] } },
        {
          node_id: "c",
          agent_type: "llm",
          payload: { model: "m", prompt: "p", response_format: { type: "json_schema", json_schema: { name: "x" } } },
        },
      ],
    } as WorkflowInput;
    const error = await engine.registerWorkflow(bad).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).problems).toEqual([
      {
        path: "nodes[0].payload.temprature",
        message: expect.stringMatching(/^is not a field of an llm payload \(did you mean "temperature"\?\)/),
      },
      { path: "nodes[0].payload.model", message: expect.stringMatching(/^is required/) },
      {
        path: "nodes[1].payload.messages[0].role",
        message: expect.stringMatching(/^must be one of system, developer/),
      },
      { path: "nodes[1].payload.messages[0].content", message: expect.stringMatching(/^must be a string/) },
      {
        path: "nodes[2].payload.response_format",
        message: ".json_schema.schema must be a JSON Schema object, got nothing",
      },
    ]);
  });

  it("refuses a templated payload that resolves to one it cannot send (template_error)", async () => {
    const { engine } = await engineWith();
    await engine.registerWorkflow(oneNode({ model: "m", messages: "{{ input.messages }}" }));
    const run = await engine.waitForRun((await engine.startRun("ask", { input: { messages: "hi" } })).run_id);
    expect(run.status).toBe("FAILED");
    expect(run.nodes[0]?.error).toMatchObject({ reason: "template_error" });
    expect(run.nodes[0]?.error?.message).toMatch(/payload\.messages must be a non-empty list of \{ role, content \}/);
  });

  it("keeps the provider's api_key out of the output and the progress (a server that echoes it)", async () => {
    // The key comes in two chunks: the deltas never carry it in two pieces redaction would miss.
    server.reply({ text: ["your key is sk-", "test", " ok"] });
    const { engine } = await engineWith();
    await engine.registerWorkflow(oneNode({ model: "m", prompt: "p" }));
    const progress: unknown[] = [];
    engine.subscribe((e: LiveEvent) => {
      if (e.type === "node.progress") progress.push(e.data.progress);
    });
    const run = await engine.waitForRun((await engine.startRun("ask")).run_id);
    expect(run.nodes[0]?.output).toMatchObject({ content: "your key is [secret llm.providers.default.api_key] ok" });
    const text = progress.map((p) => (p as { delta: string }).delta).join("");
    expect(text).toBe("your key is [secret llm.providers.default.api_key] ok");
    expect(JSON.stringify(progress)).not.toContain("sk-test");
  });

  it("fills {{ secrets.NAME }} into the request only; the stored payload shows its placeholder", async () => {
    server.reply({ text: "ok" });
    const { engine } = await engineWith({ secrets: { CUSTOMER_TOKEN: "tok-123456" } });
    await engine.registerWorkflow(oneNode({ model: "m", prompt: "Check account tok {{ secrets.CUSTOMER_TOKEN }}" }));
    const run = await engine.waitForRun((await engine.startRun("ask")).run_id);
    expect(run.status).toBe("SUCCEEDED");
    expect(chat()[0]?.body).toMatchObject({ messages: [{ role: "user", content: "Check account tok tok-123456" }] });
    expect(run.nodes[0]?.payload).toMatchObject({ prompt: "Check account tok [secret CUSTOMER_TOKEN]" });
  });

  it("createEngine refuses providers that are not valid", async () => {
    await expect(testEngine({ llm: { providers: { default: { base_url: "localhost:11434" } } } })).rejects.toThrow(
      /llm is invalid:\n {2}llm\.providers\.default\.base_url: must be an http\(s\) URL/,
    );
  });
});
