/**
 * The agent node across a real crash (DESIGN §14.2): an engine process is SIGKILLed while the
 * tool call of the loop's second turn runs. The engine that takes over resumes after the last
 * recorded message: neither recorded turn is asked of the model again, the recorded call of
 * turn 1 does not run again, and the call in flight runs once more with the same key. Both
 * stores; synchronised on what the child prints.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { createEngine, type Engine, systemClock } from "../../src/index.js";
import { agentTools, type ToolCallRecord } from "../fixtures/agent-workflow.js";
import { Child, within } from "../fixtures/child.js";
import { type OpenAIServer, startOpenAIServer } from "../fixtures/openai-server.js";
import { onPostgres, tempDb, tempDir } from "../helpers.js";

const CHILD = fileURLToPath(new URL("../fixtures/agent-child.ts", import.meta.url));
const children: Child[] = [];
const engines: Engine[] = [];
const servers: OpenAIServer[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
  await Promise.all(engines.splice(0).map((e) => e.close({ timeoutMs: 100 })));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const call = (id: string, order_id: string) => ({ id, name: "lookup", arguments: JSON.stringify({ order_id }) });

it(`a SIGKILL mid-tool-call: no recorded turn asked again, no recorded call run again, the one in flight once more with its key (${onPostgres ? "PostgreSQL" : "SQLite"})`, async () => {
  const server = await startOpenAIServer();
  servers.push(server);
  server.reply({ tool_calls: [call("c1", "A")] }, { tool_calls: [call("c2", "B")] }, { text: "A and B have shipped." });
  const database = tempDb();
  const logFile = join(tempDir(), "calls.log");
  const child = new Child(CHILD, [database, server.baseUrl, logFile]);
  children.push(child);
  const runId = String((await child.waitFor("the run", (m) => m.type === "run")).run_id);
  const inB = await child.waitFor("the call of turn 2", (m) => m.type === "in_tool" && m.order_id === "B");
  await child.kill();

  const engine = await createEngine({
    database,
    clock: systemClock,
    llm: { providers: { default: { base_url: server.baseUrl } } },
    agents: agentTools(logFile, () => "shipped"),
    heartbeatIntervalMs: 200,
    engineTimeoutMs: 1000,
    sweepIntervalMs: 200,
  });
  engines.push(engine);
  const done = await within(20_000, "the run's recovery", engine.waitForRun(runId));

  expect(done.status).toBe("SUCCEEDED");
  expect(done.nodes[0]).toMatchObject({
    attempt: 2,
    interruptions: 1,
    output: { content: "A and B have shipped.", turns: 3, tool_calls: 2 },
  });
  const ex = done.nodes[0]?.execution_id as string;
  const calls = readFileSync(logFile, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as ToolCallRecord);
  expect(calls).toEqual([
    { order_id: "A", key: `${ex}:1:0` },
    { order_id: "B", key: `${ex}:2:0` },
    { order_id: "B", key: `${ex}:2:0` },
  ]);
  expect(inB.key).toBe(`${ex}:2:0`);
  // Turns 1 and 2 were asked once, by the killed engine; turn 3 by the one that took over.
  expect(server.requestsTo("/v1/chat/completions")).toHaveLength(3);
  const steps = await engine.listSteps(runId, "assist");
  expect(steps.map((s) => [s.name, s.attempt])).toEqual([
    ["turn:1", 1],
    ["tool:1:0", 1],
    ["turn:2", 1],
    ["tool:2:0", 2],
    ["turn:3", 2],
  ]);
});
