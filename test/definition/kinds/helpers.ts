/**
 * Shared by the kinds' rule tests: a workflow of one node of the kind under test (and the nodes
 * it needs), validated through the public `validateWorkflow`, no engine.
 */
import { expect } from "vitest";
import { type ValidateOptions, validateWorkflow } from "../../../src/definition/index.js";
import type { Problem } from "../../../src/errors.js";
import { wf } from "../fixtures.js";

export { wf };

/**
 * A workflow whose node `k` is `{ node_id: "k", agent_type, ...node }`, between the nodes
 * `before` and `after` (each of agent_type "worker" unless given).
 */
export function withNode(
  agentType: string,
  node: Record<string, unknown>,
  before: Record<string, unknown>[] = [],
  after: Record<string, unknown>[] = [],
) {
  return wf([...before, { node_id: "k", agent_type: agentType, ...node }, ...after]);
}

/** The errors of an invalid definition (fails the test when it is valid). */
export function errorsOf(json: unknown, options: ValidateOptions = {}): Problem[] {
  const result = validateWorkflow(json, options);
  if (result.ok) throw new Error(`expected the definition to be refused: ${JSON.stringify(json)}`);
  return result.errors;
}

/** Asserts the definition is valid, with no error. */
export function expectValid(json: unknown, options: ValidateOptions = {}): void {
  const result = validateWorkflow(json, options);
  expect(result.errors).toEqual([]);
  expect(result.ok).toBe(true);
}

/** Asserts exactly one error, at `path`, whose message contains `fragment` (a string or a pattern). */
export function expectOneError(json: unknown, path: string, fragment: string | RegExp, options: ValidateOptions = {}) {
  const errors = errorsOf(json, options);
  expect(errors.map((e) => e.path)).toEqual([path]);
  if (typeof fragment === "string") expect(errors[0]?.message).toContain(fragment);
  else expect(errors[0]?.message).toMatch(fragment);
}
