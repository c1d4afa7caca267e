import { describe, expect, it } from "vitest";
import { testEngine } from "../helpers.js";

const child = {
  id: "child",
  nodes: [{ node_id: "work", agent_type: "doubler", payload: { n: "{{ input.n }}" } }],
};
const parent = (payload: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({
  id: "parent",
  nodes: [
    {
      node_id: "sub",
      agent_type: "workflow",
      payload: { workflow_id: "child", input: { n: "{{ input.n }}" }, ...payload },
      next_on_success: "after",
      ...extra,
    },
    { node_id: "after", agent_type: "echo", payload: { got: "{{ deps.sub.output }}" } },
  ],
});
const agents = {
  doubler: (t: { payload: unknown }) => ({ doubled: ((t.payload as { n: number }).n ?? 0) * 2 }),
  echo: (t: { payload: unknown }) => t.payload as Record<string, unknown>,
};

describe("workflow nodes (child runs)", () => {
  it("runs the child once and succeeds with its output; parent and child name each other", async () => {
    const { engine } = await testEngine({ agents });
    await engine.registerWorkflow(child);
    await engine.registerWorkflow(parent());
    const run = await engine.startRun("parent", { input: { n: 21 } });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[0]).toMatchObject({ node_id: "sub", state: "SUCCEEDED", output: { work: { doubled: 42 } } });
    expect(done.children).toHaveLength(1);
    const ref = done.children[0];
    expect(ref).toMatchObject({ node_id: "sub", visit: 1, attempt: 1, status: "SUCCEEDED" });
    const kid = await engine.getRun(ref?.run_id ?? "");
    expect(kid.parent).toMatchObject({ run_id: run.run_id, node_id: "sub", visit: 1, attempt: 1 });
    expect(kid.trace_id).toBe(run.trace_id);
  });
});
