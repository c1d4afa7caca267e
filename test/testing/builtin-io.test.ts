/**
 * createTestEngine with the built-in llm node: its request is real I/O the harness waits for
 * (never skipping time past it), while the retry's delay is skipped; a hung provider is real
 * work too, so the harness fails after busyTimeoutMs naming it.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTestEngine, type TestEngine } from "../../src/index.js";
import { type OpenAIServer, startOpenAIServer } from "../fixtures/openai-server.js";

let server: OpenAIServer;
let t: TestEngine | null = null;
beforeEach(async () => {
  server = await startOpenAIServer();
});
afterEach(async () => {
  await t?.close();
  t = null;
  await server.close();
});

const classify = {
  id: "classify",
  nodes: [
    {
      node_id: "classify",
      agent_type: "llm",
      retry_count: 1,
      retry_interval: 5,
      timeout: 60,
      payload: { model: "any", prompt: "Classify: it crashes", response_format: { type: "json_object" } },
    },
  ],
};

describe("createTestEngine and the llm node", () => {
  it("waits for the request, skips the 5 s before the retry of a dropped stream, and records the calls", async () => {
    server.reply({ drop: ['{"cat'] }, { text: ['{"category":', '"bug"}'] });
    t = await createTestEngine({
      llm: { providers: { default: { base_url: server.baseUrl } } },
      workflows: [classify],
    });
    const start = t.clock.now();
    const run = await t.engine.startRun("classify");
    const done = await t.result(run.run_id);

    expect(done.output).toMatchObject({ classify: { parsed: { category: "bug" } } });
    expect(t.clock.now() - start).toBe(5_000);
    expect(t.calls("llm").map((c) => [c.attempt, c.at - start])).toEqual([
      [1, 0],
      [2, 5_000],
    ]);
    const keys = server.requestsTo("/v1/chat/completions").map((r) => r.headers["idempotency-key"]);
    expect(keys).toEqual([`${run.run_id}:classify:1`, `${run.run_id}:classify:1`]);
  });

  it("does not skip to the deadline of a request that hangs: it fails after busyTimeoutMs, naming the open work", async () => {
    server.reply({ hang: ["thinking"] });
    t = await createTestEngine({
      llm: { providers: { default: { base_url: server.baseUrl } } },
      workflows: [classify],
      busyTimeoutMs: 300,
    });
    const run = await t.engine.startRun("classify");
    await expect(t.runUntilIdle()).rejects.toThrow(/TCPWRAP/);
    expect((await t.engine.getRun(run.run_id))?.status).toBe("RUNNING");
  });
});
