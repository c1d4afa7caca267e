/**
 * The examples' tests: each runs an example's workflow.json with its own agents module on
 * createTestEngine(), so retries, timeouts and reviews of hours take milliseconds.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach } from "vitest";
import type { AgentHandler } from "../../src/index.js";
import { createTestEngine, type TestEngine, type TestEngineOptions } from "../../src/index.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const START = Date.UTC(2026, 2, 2, 9);

const open: TestEngine[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((t) => t.close()));
});

/** An example's workflow document, as `skein run` reads it. */
export function workflowOf(name: string): NonNullable<TestEngineOptions["workflows"]>[number] {
  return JSON.parse(readFileSync(join(ROOT, "examples", name, "workflow.json"), "utf8"));
}

/** A test engine with the example's workflow and agents (some replaced by `agents`); closed after the test. */
export async function runExample(
  name: string,
  exampleAgents: Record<string, AgentHandler>,
  options: TestEngineOptions = {},
): Promise<TestEngine> {
  const t = await createTestEngine({
    start: START,
    workflows: [workflowOf(name)],
    ...options,
    agents: { ...exampleAgents, ...options.agents },
  });
  open.push(t);
  return t;
}

/** A node of a run as getRun answers, by id. */
export function nodeOf(run: { nodes: { node_id: string }[] }, id: string): Record<string, unknown> {
  const found = run.nodes.find((n) => n.node_id === id);
  if (!found) throw new Error(`the run has no node ${id}`);
  return found as unknown as Record<string, unknown>;
}
