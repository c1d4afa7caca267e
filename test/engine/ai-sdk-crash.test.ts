/**
 * skein/ai-sdk across a real crash (DESIGN §14.1): an engine process streams a model call through
 * `durableModelMiddleware` from a real OpenAI-protocol server (in this test's process), and is
 * SIGKILLed in the step after it. The engine that takes over runs the visit again: the streamed
 * call is replayed from its record, as the same stream, without a second request to the server,
 * and its usage is counted once. Both stores; synchronised on what the child prints once committed.
 */
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { createEngine, type Engine, systemClock } from "../../src/index.js";
import { aiSdkAgents } from "../fixtures/ai-sdk-workflow.js";
import { Child, within } from "../fixtures/child.js";
import { COMPLETIONS_PATH, type OpenAIServer, startOpenAIServer } from "../fixtures/openai-server.js";
import { onPostgres, tempDb } from "../helpers.js";

const CHILD = fileURLToPath(new URL("../fixtures/ai-sdk-child.ts", import.meta.url));
const children: Child[] = [];
const engines: Engine[] = [];
const servers: OpenAIServer[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
  await Promise.all(engines.splice(0).map((e) => e.close({ timeoutMs: 100 })));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

it(`a SIGKILL after a streamed model call: the next attempt replays it without a second request (${onPostgres ? "PostgreSQL" : "SQLite"})`, async () => {
  const server = await startOpenAIServer();
  servers.push(server);
  server.reply({ text: ["Dur", "able ", "draft"], usage: { prompt_tokens: 4, completion_tokens: 3 } });
  const database = tempDb();
  const child = new Child(CHILD, [database, server.baseUrl]);
  children.push(child);
  const runId = String((await child.waitFor("the run", (m) => m.type === "run")).run_id);
  const inAfter = await child.waitFor("step after", (m) => m.type === "in_after");
  await child.kill();
  expect(inAfter.chunks).toEqual(["Dur", "able ", "draft"]);

  const engine = await createEngine({
    database,
    clock: systemClock,
    agents: aiSdkAgents(server.baseUrl, (chunks) => chunks.join("")),
    heartbeatIntervalMs: 200,
    engineTimeoutMs: 1000,
    sweepIntervalMs: 200,
  });
  engines.push(engine);
  const done = await within(20_000, "the run's recovery", engine.waitForRun(runId));

  expect(done.status).toBe("SUCCEEDED");
  // The replayed stream yields the chunks the first attempt got.
  expect(done.nodes[0]).toMatchObject({
    attempt: 2,
    interruptions: 1,
    output: { chunks: ["Dur", "able ", "draft"], after: "Durable draft" },
  });
  expect(server.requestsTo(COMPLETIONS_PATH)).toHaveLength(1);
  expect(done.usage).toEqual({ tokens_in: 4, tokens_out: 3, cost: 0 });
  const steps = await engine.listSteps(runId, "write");
  expect(steps.map((s) => [s.name, s.attempt])).toEqual([
    ["model:1", 1],
    ["after", 2],
  ]);
});
