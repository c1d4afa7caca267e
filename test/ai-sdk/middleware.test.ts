/**
 * skein/ai-sdk (DESIGN §14.1): the AI SDK's OpenAI-compatible provider, wrapped with
 * `durableModelMiddleware`, against a real local server speaking the OpenAI protocol. A retry of
 * the visit gets its recorded model calls, generated and streamed, without asking the server
 * again, and the run counts their usage once.
 */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText, wrapLanguageModel } from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { durableModelMiddleware } from "../../src/ai-sdk/index.js";
import type { Task } from "../../src/index.js";
import { COMPLETIONS_PATH, type OpenAIServer, startOpenAIServer } from "../fixtures/openai-server.js";
import { testEngine } from "../helpers.js";

let server: OpenAIServer;
beforeEach(async () => {
  server = await startOpenAIServer();
});
afterEach(() => server.close());

/** The model of `task`: the local server's, each call a step of the task. */
function modelOf(task: Task) {
  const provider = createOpenAICompatible({ baseURL: server.baseUrl, name: "local", apiKey: "x", includeUsage: true });
  return wrapLanguageModel({ model: provider.chatModel("scripted-model"), middleware: durableModelMiddleware(task) });
}

describe("durableModelMiddleware", () => {
  it("a retry replays the generated and the streamed call without a second request, and usage counts once", async () => {
    server.reply(
      { text: "Hello there", usage: { prompt_tokens: 10, completion_tokens: 3 } },
      { text: ["Str", "eamed ", "reply"], usage: { prompt_tokens: 7, completion_tokens: 2 } },
    );
    const seen: { attempt: number; text: string; timestamp: string | undefined; chunks: string[] }[] = [];
    const { engine } = await testEngine({
      agents: {
        writer: async (task: Task) => {
          const model = modelOf(task);
          const generated = await generateText({ model, prompt: "say hello", maxRetries: 0 });
          const streamed = streamText({ model, prompt: "stream it", maxRetries: 0 });
          const chunks: string[] = [];
          for await (const chunk of streamed.textStream) chunks.push(chunk);
          const timestamp = generated.response.timestamp;
          expect(timestamp).toBeInstanceOf(Date);
          seen.push({ attempt: task.attempt, text: generated.text, timestamp: timestamp.toISOString(), chunks });
          if (task.attempt === 1) throw new Error("the first attempt fails after its model calls");
          return { text: generated.text, streamed: chunks.join("") };
        },
      },
    });
    await engine.registerWorkflow({
      id: "ai-sdk",
      nodes: [{ node_id: "write", agent_type: "writer", retry_count: 1, retry_interval: 0 }],
    });
    const run = await engine.startRun("ai-sdk");
    const done = await engine.waitForRun(run.run_id);

    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[0]?.output).toEqual({ text: "Hello there", streamed: "Streamed reply" });
    expect(server.requestsTo(COMPLETIONS_PATH)).toHaveLength(2);
    const [first, retry] = seen;
    expect(first).toMatchObject({ attempt: 1, text: "Hello there", chunks: ["Str", "eamed ", "reply"] });
    expect(retry).toEqual({ ...first, attempt: 2 });
    expect((await engine.getRun(run.run_id)).usage).toEqual({ tokens_in: 17, tokens_out: 5, cost: 0 });
    const steps = await engine.listSteps(run.run_id, "write");
    expect(steps.map((s) => [s.name, s.attempt])).toEqual([
      ["model:1", 1],
      ["model:2", 1],
    ]);
  });

  it("a failed call ends the attempt's model calls; the next attempt asks again under the same number", async () => {
    server.reply({ status: 400 }, { text: "second time lucky" });
    const errors: string[] = [];
    const { engine } = await testEngine({
      agents: {
        writer: async (task: Task) => {
          const model = modelOf(task);
          if (task.attempt === 1) {
            await generateText({ model, prompt: "hi", maxRetries: 0 }).catch((e: Error) => errors.push(e.message));
            // A second call in the same attempt would be numbered 2 here and 1 on the next attempt.
            await generateText({ model, prompt: "hi", maxRetries: 0 }).catch((e: Error) => errors.push(e.message));
            throw new Error("the model failed");
          }
          return (await generateText({ model, prompt: "hi", maxRetries: 0 })).text;
        },
      },
    });
    await engine.registerWorkflow({
      id: "ai-sdk-failed",
      nodes: [{ node_id: "write", agent_type: "writer", retry_count: 1, retry_interval: 0 }],
    });
    const run = await engine.startRun("ai-sdk-failed");
    const done = await engine.waitForRun(run.run_id);

    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[0]?.output).toBe("second time lucky");
    expect(server.requestsTo(COMPLETIONS_PATH)).toHaveLength(2);
    expect(errors).toHaveLength(2);
    expect(errors[1]).toMatch(
      /model call 1 of attempt 1 of .* failed \(.*\), so this attempt makes no more model calls/,
    );
    const steps = await engine.listSteps(run.run_id, "write");
    expect(steps.map((s) => [s.name, s.attempt])).toEqual([["model:1", 2]]);
  });
});
