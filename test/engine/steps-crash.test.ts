/**
 * Durable steps across a real crash (DESIGN §14.1): an engine process is SIGKILLed while a visit's
 * second step runs, after its first was recorded. The engine that takes over runs the visit
 * again: the recorded step is not called again, the one in flight is called once more, with the
 * same idempotency key. Both stores; synchronised on what the child prints once committed.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { createEngine, type Engine, systemClock } from "../../src/index.js";
import { Child, within } from "../fixtures/child.js";
import { type StepCall, stepAgents } from "../fixtures/steps-workflow.js";
import { onPostgres, tempDb, tempDir } from "../helpers.js";

const CHILD = fileURLToPath(new URL("../fixtures/steps-child.ts", import.meta.url));
const children: Child[] = [];
const engines: Engine[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
  await Promise.all(engines.splice(0).map((e) => e.close({ timeoutMs: 100 })));
});

it(`a SIGKILL between two steps: the recorded one is not called again, the one in flight once more (${onPostgres ? "PostgreSQL" : "SQLite"})`, async () => {
  const database = tempDb();
  const logFile = join(tempDir(), "calls.log");
  const child = new Child(CHILD, [database, logFile]);
  children.push(child);
  const runId = String((await child.waitFor("the run", (m) => m.type === "run")).run_id);
  const inTwo = await child.waitFor("step two", (m) => m.type === "in_two");
  await child.kill();

  const engine = await createEngine({
    database,
    clock: systemClock,
    agents: stepAgents(logFile, () => "two done"),
    heartbeatIntervalMs: 200,
    engineTimeoutMs: 1000,
    sweepIntervalMs: 200,
  });
  engines.push(engine);
  const done = await within(20_000, "the run's recovery", engine.waitForRun(runId));

  expect(done.status).toBe("SUCCEEDED");
  expect(done.nodes[0]).toMatchObject({ attempt: 2, interruptions: 1, output: { one: { one: 1 }, two: "two done" } });
  const calls = readFileSync(logFile, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as StepCall);
  const key = (step: string) => `${inTwo.execution_id}:${step}`;
  expect(calls).toEqual([
    { step: "one", attempt: 1, key: key("one") },
    { step: "two", attempt: 1, key: key("two") },
    { step: "two", attempt: 2, key: key("two") },
  ]);
  expect(inTwo.key).toBe(key("two"));
  const steps = await engine.listSteps(runId, "work");
  expect(steps.map((s) => [s.name, s.attempt])).toEqual([
    ["one", 1],
    ["two", 2],
  ]);
});
