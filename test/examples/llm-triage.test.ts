/** examples/llm-triage: an llm node's JSON answer routes the ticket; bugs go to a webhook; a budget caps tokens. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type OpenAIServer, startOpenAIServer } from "../fixtures/openai-server.js";
import { nodeOf, runExample } from "./example.js";

let server: OpenAIServer;
beforeEach(async () => {
  server = await startOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

const triage = (answer: object) => ({
  text: JSON.stringify(answer),
  usage: { prompt_tokens: 60, completion_tokens: 20 },
});

async function example() {
  return runExample("llm-triage", {}, { llm: { providers: { default: { base_url: server.baseUrl } } } });
}

const ticket = (subject: string) => ({
  subject,
  body: "Since the update, the export button does nothing.",
  bug_webhook: `${server.url}/hooks/bugs`,
});

describe("examples/llm-triage", () => {
  it("files a bug to the webhook with the model's urgency and summary", async () => {
    server.reply(triage({ category: "bug", urgency: "high", summary: "Export broke after the update." }));
    const t = await example();
    const run = await t.engine.startRun("llm-triage", { input: ticket("Export is broken") });
    const done = await t.result(run.run_id);

    expect(done.status).toBe("SUCCEEDED");
    expect(nodeOf(done, "draft_reply").state).toBe("SKIPPED");
    const [hook] = server.requestsTo("/hooks/bugs");
    expect(hook?.method).toBe("POST");
    expect(hook?.body).toEqual({
      title: "Export is broken",
      urgency: "high",
      summary: "Export broke after the update.",
    });
    const [classify] = server.requestsTo("/v1/chat/completions");
    expect(classify?.body).toMatchObject({
      model: "gpt-4o-mini",
      response_format: { type: "json_schema", json_schema: { name: "triage", strict: true } },
    });
    expect(done.usage).toEqual({ tokens_in: 60, tokens_out: 20, cost: 0 });
  });

  it("drafts a reply for a question, on the model the input names, and posts nothing", async () => {
    server.reply(triage({ category: "question", urgency: "low", summary: "How to export to CSV?" }), {
      text: ["Hi! ", "Use File, then Export."],
      usage: { prompt_tokens: 30, completion_tokens: 8 },
    });
    const t = await example();
    const input = { ...ticket("CSV export?"), model: "llama3.2" };
    const done = await t.result((await t.engine.startRun("llm-triage", { input })).run_id);

    expect(done.status).toBe("SUCCEEDED");
    expect(nodeOf(done, "file_bug").state).toBe("SKIPPED");
    expect(done.output).toMatchObject({ draft_reply: { content: "Hi! Use File, then Export." } });
    expect(server.requestsTo("/hooks/bugs")).toHaveLength(0);
    const prompts = server
      .requestsTo("/v1/chat/completions")
      .map((r) => r.body as { model: string; messages: unknown });
    expect(prompts.map((p) => p.model)).toEqual(["llama3.2", "llama3.2"]);
    expect(prompts[1]?.messages).toEqual([
      {
        role: "user",
        content: "Write a short, friendly reply to this question ticket. Its summary: How to export to CSV?",
      },
    ]);
    expect(done.usage).toMatchObject({ tokens_in: 90, tokens_out: 28 });
  });

  it("a classification that breaks the schema is retried; a run over its budget starts no more calls", async () => {
    server.reply(
      { text: '{"category":"outage"}', usage: { prompt_tokens: 60, completion_tokens: 5 } },
      triage({ category: "billing", urgency: "low", summary: "Charged twice." }),
    );
    const t = await example();
    const run = await t.engine.startRun("llm-triage", {
      input: ticket("Charged twice"),
      budget: { max_tokens: 100 },
    });
    const done = await t.result(run.run_id);

    // Two classify attempts (65 + 80 tokens) spend the budget of 100: the reply is never asked for.
    expect(nodeOf(done, "classify")).toMatchObject({ state: "SUCCEEDED", attempt: 2 });
    expect(nodeOf(done, "draft_reply")).toMatchObject({ state: "FAILED", reason: "budget_exceeded" });
    expect(done.status).toBe("FAILED");
    expect(server.requestsTo("/v1/chat/completions")).toHaveLength(2);
  });
});
