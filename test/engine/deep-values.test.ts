/**
 * Values nested far too deep through the library (what the HTTP API and the CLI refuse when they
 * parse JSON text, the engine refuses when it is handed the value): a run's input, an event's
 * payload and an agent's output 100,000 levels deep get a precise error with the path and the
 * limit, never a stack overflow, and nothing is stored.
 */
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/index.js";
import { testEngine } from "../helpers.js";

/** `levels` objects, one inside the other, under `a`. */
function nested(levels: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
}

const LIMIT = "past the limit of 64; flatten the data, or pass a part that deep as a JSON string";

async function refusal(call: () => Promise<unknown>): Promise<ValidationError> {
  const error = await call().then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ValidationError);
  return error as ValidationError;
}

describe("values nested too deep", () => {
  it("a run input and an event payload 100,000 levels deep are refused with the path and the limit", async () => {
    const { engine } = await testEngine({ agents: {} });
    await engine.registerWorkflow({
      id: "deep",
      nodes: [{ node_id: "w", agent_type: "wait_event", payload: { event: "go" } }],
    });
    const refused = await refusal(() => engine.startRun("deep", { input: { topic: nested(100_000) } }));
    expect(refused.problems).toEqual([
      { path: "input", message: `input.topic${".a".repeat(63)} is level 65 of nested objects and arrays, ${LIMIT}` },
    ]);
    expect(await engine.listRuns()).toEqual([]);
    // 63 levels below the input is 64 in all: accepted.
    const run = await engine.startRun("deep", { input: { topic: nested(63) } });
    const event = await refusal(() => engine.sendEvent(run.run_id, "go", nested(100_000) as never));
    expect(event.problems[0]?.message).toContain(`is level 65 of nested objects and arrays, ${LIMIT}`);
    expect((await engine.getRun(run.run_id)).nodes[0]?.state).toBe("WAITING");
  });

  it("an agent's output 100,000 levels deep fails its visit invalid_output, and the engine goes on", async () => {
    const { engine } = await testEngine({ agents: { deep: () => nested(100_000), flat: () => ({ ok: true }) } });
    await engine.registerWorkflow({ id: "out", nodes: [{ node_id: "a", agent_type: "deep" }] });
    await engine.registerWorkflow({ id: "ok", nodes: [{ node_id: "a", agent_type: "flat" }] });
    const failed = await engine.waitForRun((await engine.startRun("out")).run_id);
    expect(failed.nodes[0]).toMatchObject({ state: "FAILED", reason: "invalid_output", attempt: 1 });
    expect(failed.nodes[0]?.error?.message).toContain(`output${".a".repeat(64)} is level 65 of nested objects`);
    expect((await engine.waitForRun((await engine.startRun("ok")).run_id)).status).toBe("SUCCEEDED");
  });
});
