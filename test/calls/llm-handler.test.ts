/**
 * The llm node's handler against the OpenAI-protocol fixture, through a Task that records its
 * progress and usage calls (the engine's delivery of them is tested in test/engine/kinds/llm.test.ts).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Task } from "../../src/agents/task.js";
import { llmHandler } from "../../src/calls/llm/handler.js";
import type { LlmOptions } from "../../src/calls/llm/providers.js";
import type { Json, Usage } from "../../src/core/types.js";
import { NonRetryableError, RetryableError, ValidationError } from "../../src/errors.js";
import { type OpenAIServer, startOpenAIServer } from "../fixtures/openai-server.js";
import { pour, repeated, startServer, type TestServer } from "../local-server.js";

let server: OpenAIServer;
beforeEach(async () => {
  server = await startOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

interface Recorded {
  task: Task;
  progress: unknown[];
  usage: Usage[];
}

function taskOf(payload: Record<string, unknown>, signal = new AbortController().signal): Recorded {
  const progress: unknown[] = [];
  const usage: Usage[] = [];
  const task: Task = {
    run_id: "run-1",
    node_id: "ask",
    agent_type: "llm",
    visit: 1,
    attempt: 1,
    execution_id: "run-1:ask:1",
    payload: payload as Json,
    input: null,
    deps: {},
    trigger: null,
    trace_id: "0af7651916cd43dd8448eb211c80319c",
    traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    signal,
    heartbeat: async () => true,
    progress: (data) => progress.push(data),
    reportUsage: (u) => usage.push(u),
    step: () => {
      throw new Error("not used");
    },
    route: () => {
      throw new Error("not used");
    },
  };
  return { task, progress, usage };
}

function handler(llm: Partial<LlmOptions["providers"]["default"]> = {}, maxOutputBytes = 1024 * 1024) {
  return llmHandler({
    llm: { providers: { default: { base_url: server.baseUrl, ...llm } } },
    maxOutputBytes,
    now: () => Date.UTC(2026, 0, 1),
  });
}

describe("llm handler", () => {
  it("streams the completion: progress with each chunk's text (a delta), in order; the usage reported; the whole output", async () => {
    server.reply({ text: ["Du", "rable ", "agents"], usage: { prompt_tokens: 12, completion_tokens: 3 } });
    const r = taskOf({ model: "gpt-test", prompt: "Say it", temperature: 0.2, max_tokens: 50 });
    const output = await handler({ api_key: "sk-test", headers: { "x-team": "triage" } })(r.task);

    expect(r.progress).toEqual([{ delta: "Du" }, { delta: "rable " }, { delta: "agents" }]);
    expect(r.usage).toEqual([{ tokens_in: 12, tokens_out: 3 }]);
    expect(output).toEqual({
      content: "Durable agents",
      parsed: null,
      tool_calls: [],
      usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 },
      finish_reason: "stop",
      model: "gpt-test",
    });
    const [request] = server.requestsTo("/v1/chat/completions");
    expect(request?.body).toEqual({
      model: "gpt-test",
      messages: [{ role: "user", content: "Say it" }],
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0.2,
      max_tokens: 50,
    });
    expect(request?.headers).toMatchObject({
      authorization: "Bearer sk-test",
      "idempotency-key": "run-1:ask:1",
      "x-team": "triage",
    });
  });

  it("prices the usage with the provider's cost_per_1k", async () => {
    server.reply({ text: "ok", usage: { prompt_tokens: 2000, completion_tokens: 500 } });
    const r = taskOf({ model: "m", prompt: "p" });
    await handler({ cost_per_1k: { input: 0.5, output: 2 } })(r.task);
    expect(r.usage).toEqual([{ tokens_in: 2000, tokens_out: 500, cost: 2 }]);
  });

  it("assembles streamed tool-call fragments by index, with the arguments as sent and parsed", async () => {
    server.reply({
      tool_calls: [
        { id: "call_1", name: "lookup", arguments: '{"order":"A-17"}' },
        { id: "call_2", name: "note", arguments: "not json" },
      ],
    });
    const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }];
    const r = taskOf({ model: "m", prompt: "p", tools, tool_choice: "auto" });
    const output = (await handler()(r.task)) as Record<string, unknown>;
    expect(output.finish_reason).toBe("tool_calls");
    expect(output.tool_calls).toEqual([
      {
        id: "call_1",
        type: "function",
        function: { name: "lookup", arguments: '{"order":"A-17"}' },
        parsed_arguments: { order: "A-17" },
      },
      { id: "call_2", type: "function", function: { name: "note", arguments: "not json" }, parsed_arguments: null },
    ]);
    expect(server.requestsTo("/v1/chat/completions")[0]?.body).toMatchObject({ tools, tool_choice: "auto" });
  });

  it("sends an earlier node's tool_calls back without the parsed_arguments it added", async () => {
    server.reply({ text: "done" });
    const call = { id: "c1", type: "function", function: { name: "f", arguments: "{}" }, parsed_arguments: {} };
    const messages = [
      { role: "user", content: "go" },
      { role: "assistant", tool_calls: [call] },
      { role: "tool", tool_call_id: "c1", content: "42" },
    ];
    await handler()(taskOf({ model: "m", messages }).task);
    const sent = server.requestsTo("/v1/chat/completions")[0]?.body as { messages: unknown[] };
    expect(sent.messages[1]).toEqual({
      role: "assistant",
      tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }],
    });
  });

  it("parses and checks JSON content against the json_schema; a mismatch is retryable and names the errors", async () => {
    const response_format = {
      type: "json_schema",
      json_schema: {
        name: "triage",
        schema: {
          type: "object",
          properties: { category: { enum: ["bug", "billing"] } },
          required: ["category"],
        },
      },
    };
    server.reply({ text: '{"category":"bug"}' }, { text: '{"category":"weather"}' }, { text: "I think it is a bug" });
    const ok = (await handler()(taskOf({ model: "m", prompt: "p", response_format }).task)) as { parsed: unknown };
    expect(ok.parsed).toEqual({ category: "bug" });

    const mismatch = handler()(taskOf({ model: "m", prompt: "p", response_format }).task);
    await expect(mismatch).rejects.toBeInstanceOf(RetryableError);
    await expect(mismatch).rejects.toThrow(
      'the model\'s JSON does not match the schema "triage": /category must be equal to one of the allowed values ("bug", "billing")',
    );
    const notJson = handler()(taskOf({ model: "m", prompt: "p", response_format }).task);
    await expect(notJson).rejects.toThrow(/is not JSON, as response_format json_schema asks .*"I think it is a bug"/);
  });

  it("json_object: content parsed (a ```json fence taken off), with no schema", async () => {
    server.reply({ text: '```json\n{"a":1}\n```' });
    const output = (await handler()(
      taskOf({ model: "m", prompt: "p", response_format: { type: "json_object" } }).task,
    )) as {
      parsed: unknown;
    };
    expect(output.parsed).toEqual({ a: 1 });
  });

  it("429 and 5xx are retryable, with Retry-After as retryAfterMs; other 4xx are not, with the provider's message", async () => {
    server.reply(
      { status: 429, headers: { "retry-after": "7" }, body: { error: { message: "Rate limit reached" } } },
      { status: 503, headers: { "retry-after": "Thu, 01 Jan 2026 00:00:03 GMT" } },
      { status: 500 },
      { status: 400, body: { error: { message: "model 'nope' does not exist", type: "invalid_request_error" } } },
    );
    const call = () => handler()(taskOf({ model: "m", prompt: "p" }).task) as Promise<unknown>;
    const limited = await call().catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(RetryableError);
    expect(limited).toMatchObject({
      retryAfterMs: 7000,
      message: 'provider "default" answered 429: Rate limit reached',
    });
    expect(await call().catch((e: unknown) => e)).toMatchObject({ retryAfterMs: 3000 });
    const failed = await call().catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(RetryableError);
    expect(failed).toMatchObject({ retryAfterMs: undefined, message: 'provider "default" answered 500: scripted 500' });
    const refused = await call().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(NonRetryableError);
    expect((refused as Error).message).toBe(`provider "default" answered 400: model 'nope' does not exist`);
  });

  it("a connection dropped mid-stream is retryable, after the text that came as progress", async () => {
    server.reply({ drop: ["Once upon", " a time"] });
    const r = taskOf({ model: "m", prompt: "p" });
    const error = await (handler()(r.task) as Promise<unknown>).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as Error).message).toMatch(
      /^the stream from provider "default" (broke off|ended before the completion did)/,
    );
    expect(r.progress).toEqual([{ delta: "Once upon" }, { delta: " a time" }]);
    expect(r.usage).toEqual([]);
  });

  it("an unreachable provider is retryable", async () => {
    const base = server.baseUrl;
    await server.close();
    const h = llmHandler({ llm: { providers: { default: { base_url: base } } }, maxOutputBytes: 1000, now: Date.now });
    const error = await (h(taskOf({ model: "m", prompt: "p" }).task) as Promise<unknown>).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as Error).message).toMatch(
      /^could not reach provider "default" at http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions: connect ECONNREFUSED/,
    );
    server = await startOpenAIServer(); // for afterEach
  });

  it("a hang ends with the task's signal, with its reason", async () => {
    server.reply({ hang: ["partial"] });
    const controller = new AbortController();
    const r = taskOf({ model: "m", prompt: "p" }, controller.signal);
    const pending = (handler()(r.task) as Promise<unknown>).catch((e: unknown) => e);
    await server.waitForRequest(1);
    const reason = new Error("attempt 1 of run-1:ask:1 was timed out");
    controller.abort(reason);
    expect(await pending).toBe(reason);
  });

  it("content past maxPayloadBytes fails the attempt for good", async () => {
    server.reply({ text: ["x".repeat(600), "y".repeat(600)] });
    const error = await (handler({}, 1000)(taskOf({ model: "m", prompt: "p" }).task) as Promise<unknown>).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(NonRetryableError);
    expect((error as Error).message).toMatch(/passed 1000 bytes \(maxPayloadBytes\)/);
  });

  it("an unknown provider fails for good, naming the configured ones", async () => {
    const h = llmHandler({
      llm: { providers: { default: { base_url: server.baseUrl }, fast: { base_url: server.baseUrl } } },
      maxOutputBytes: 1000,
      now: Date.now,
    });
    const error = await (h(taskOf({ model: "m", prompt: "p", provider: "slow" }).task) as Promise<unknown>).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(NonRetryableError);
    expect((error as Error).message).toBe(
      'the llm node asks for provider "slow", which this engine does not have; its providers are "default", "fast" (engine option llm.providers)',
    );
    expect(server.requests).toHaveLength(0);
  });

  it("a provider that answers with one JSON completion (no stream) is read as well", async () => {
    const completion = {
      model: "m-2",
      choices: [{ index: 0, message: { role: "assistant", content: "plain" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
    };
    server.reply({ status: 200, body: completion });
    const r = taskOf({ model: "m", prompt: "p" });
    const output = await handler()(r.task);
    expect(output).toMatchObject({ content: "plain", finish_reason: "stop", model: "m-2" });
    expect(r.usage).toEqual([{ tokens_in: 3, tokens_out: 1 }]);
  });

  it("an error the provider sends with a 200, as JSON or inside the stream, is retryable", async () => {
    server.reply({ status: 200, body: { error: { message: "overloaded" } } });
    const error = await (handler()(taskOf({ model: "m", prompt: "p" }).task) as Promise<unknown>).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as Error).message).toBe('provider "default" answered with an error: overloaded');
  });

  it("refuses providers that are not valid, every problem with its path", () => {
    expect(() =>
      llmHandler({
        llm: {
          providers: { default: { base_url: "ftp://x" }, b: { base_url: "http://x", cost_per_1k: { input: -1 } } },
        },
        maxOutputBytes: 1000,
        now: Date.now,
      } as never),
    ).toThrow(ValidationError);
  });
});

/**
 * Answers that never end or are far over the bounds, from a real server that produces them as
 * they are read (a generator): the attempt fails once past the bound, and the server's count of
 * bytes written when the client closed shows the rest was never read.
 */
describe("llm handler: bounded reads", () => {
  const MAX = 1000; // maxOutputBytes: the stream bound is 256 × 1000 + 64 KiB, one event 2 × 1000 + 64 KiB
  /** Far below the endless answers, far above the bound plus what sockets buffer on loopback. */
  const READ_AT_MOST = 64 * 1024 * 1024;
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });

  /** A provider whose every answer is `answer`; resolves `written` with the bytes it wrote when the client left. */
  async function provider(status: number, type: string, chunks: () => Iterable<string>) {
    let written!: (n: number) => void;
    const done = new Promise<number>((resolve) => {
      written = resolve;
    });
    const s = await startServer((_req, res) => {
      res.writeHead(status, { "content-type": type });
      void pour(res, chunks()).then(written);
    });
    servers.push(s);
    const h = llmHandler({
      llm: { providers: { default: { base_url: `${s.url}/v1` } } },
      maxOutputBytes: MAX,
      now: Date.now,
    });
    const error = await (h(taskOf({ model: "m", prompt: "p" }).task) as Promise<unknown>).catch((e: unknown) => e);
    return { error: error as Error, written: await done, server: s };
  }

  it("an endless stream of events with no content fails invalid_output past the stream bound, not retried", async () => {
    const event = `data: ${JSON.stringify({ choices: [{ index: 0, delta: {} }] })}\n\n`;
    const { error, written } = await provider(200, "text/event-stream", () => repeated(": ready\n\n", event));
    expect(error).toBeInstanceOf(NonRetryableError);
    expect(error).toMatchObject({ reason: "invalid_output" });
    expect(error.message).toBe(
      'the stream from provider "default" passed 321536 bytes (256 × maxPayloadBytes + 64 KiB) before its end; ask for less (max_tokens) or raise maxPayloadBytes',
    );
    expect(written).toBeLessThan(READ_AT_MOST);
  });

  it("one stream event that never ends fails past the event bound, the parser holding no more", async () => {
    const { error, written } = await provider(200, "text/event-stream", () =>
      repeated('data: {"choices":[{"index":0,"delta":{"content":"', "x".repeat(16 * 1024)),
    );
    expect(error).toBeInstanceOf(NonRetryableError);
    expect(error).toMatchObject({ reason: "invalid_output" });
    expect(error.message).toBe(
      'one event of the stream from provider "default" passed 67536 characters (2 × maxPayloadBytes + 64 KiB); ask for less (max_tokens) or raise maxPayloadBytes',
    );
    expect(written).toBeLessThan(READ_AT_MOST);
  });

  it("a JSON completion of 1 GiB fails past the bound without being read whole", async () => {
    const { error, written } = await provider(200, "application/json", () =>
      repeated('{"choices":[{"message":{"content":"', "x".repeat(64 * 1024), 16 * 1024),
    );
    expect(error).toBeInstanceOf(NonRetryableError);
    expect(error).toMatchObject({ reason: "invalid_output" });
    expect(error.message).toBe(
      'the completion from provider "default" passed 67536 bytes (2 × maxPayloadBytes + 64 KiB); ask for less (max_tokens) or raise maxPayloadBytes',
    );
    expect(written).toBeLessThan(READ_AT_MOST);
  });

  it("an endless error body: its first 4 KiB make the message, the rest is not waited for", async () => {
    const { error, written } = await provider(503, "text/plain", () => repeated("overloaded ", "and more "));
    expect(error).toBeInstanceOf(RetryableError);
    expect(error.message).toMatch(/^provider "default" answered 503: overloaded (and more ){50}/);
    expect(error.message.length).toBeLessThan(600);
    expect(written).toBeLessThan(READ_AT_MOST);
  });

  it("follows no redirect: another origin receives nothing, and the attempt fails naming where it points", async () => {
    const elsewhere = await startServer((_req, res) => res.end("{}"));
    servers.push(elsewhere);
    const redirecting = await startServer((req, res) => {
      const to = req.url === "/v1/chat/completions" ? `${elsewhere.url}/steal?key=1` : "/v1/moved";
      res.writeHead(307, { location: to });
      res.end();
    });
    servers.push(redirecting);
    const call = (base: string) =>
      (
        llmHandler({
          llm: { providers: { default: { base_url: base, api_key: "sk-secret-key" } } },
          maxOutputBytes: MAX,
          now: Date.now,
        })(taskOf({ model: "m", prompt: "the prompt" }).task) as Promise<unknown>
      ).catch((e: unknown) => e);

    const cross = await call(`${redirecting.url}/v1`);
    expect(cross).toBeInstanceOf(NonRetryableError);
    expect((cross as Error).message).toBe(
      `provider "default" answered 307 redirecting to ${elsewhere.url}/steal; the request is not sent there (redirects are not followed): set the provider's base_url to the address that answers`,
    );
    expect(elsewhere.requests).toEqual([]);

    // The same origin is not followed either: base_url names the endpoint.
    const same = await call(`${redirecting.url}/v2`);
    expect((same as Error).message).toMatch(/answered 307 redirecting to http:\/\/127\.0\.0\.1:\d+\/v1\/moved;/);
    expect(redirecting.requests.map((r) => r.url)).toEqual(["/v1/chat/completions", "/v2/chat/completions"]);
  });
});
