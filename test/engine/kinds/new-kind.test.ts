/**
 * A kind the engine starts, added from outside src: `noop_wait` (test/fixtures/noop-wait/) is
 * a file per layer (its rules, its states, its in-transaction step) and a line in each layer's
 * table. Nothing else in the engine names it, yet it validates, runs, survives a worker's
 * claim and appears in the run's history like a built-in kind.
 */
import { describe, expect, it } from "vitest";
import "../../fixtures/noop-wait/kinds.js";
import { ValidationError } from "../../../src/index.js";
import { testEngine } from "../../helpers.js";

const flow = {
  id: "noop",
  nodes: [
    { node_id: "before", agent_type: "echo", next_on_success: "wait" },
    { node_id: "wait", agent_type: "noop_wait", next_on_success: "after" },
    { node_id: "after", agent_type: "echo" },
  ],
};
const agents = { echo: () => ({ ok: true }) };

describe("a kind added as one file per layer (noop_wait)", () => {
  it("runs between two agents, ended by the flush with the transaction's time", async () => {
    const { engine, clock } = await testEngine({ agents });
    await engine.registerWorkflow(flow);
    const run = await engine.startRun("noop");
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    const { nodes } = await engine.getRun(run.run_id);
    expect(nodes.map((n) => [n.node_id, n.state])).toEqual([
      ["before", "SUCCEEDED"],
      ["wait", "SUCCEEDED"],
      ["after", "SUCCEEDED"],
    ]);
    const output = nodes.find((n) => n.node_id === "wait")?.output as { started_at: number } | undefined;
    expect(output).toEqual({ started_at: expect.any(Number) });
    expect(output?.started_at).toBeLessThanOrEqual(clock.now());
    const events = await engine.listEvents(run.run_id);
    expect(events.filter((e) => e.node_id === "wait").map((e) => e.type)).toContain("node.succeeded");
    await engine.close();
  });

  it("is validated by its rules: a decide hook is refused at its path", async () => {
    const { engine } = await testEngine({ agents });
    const bad = { ...flow, nodes: flow.nodes.map((n) => (n.node_id === "wait" ? { ...n, decide: "pick" } : n)) };
    const refused = await engine.registerWorkflow(bad).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ValidationError);
    expect((refused as ValidationError).problems).toContainEqual({
      path: "nodes[1].decide",
      message: "a noop_wait node has no decide hook: its output is always { started_at }; decide on the node after it",
    });
    await engine.close();
  });

  it("is not for a worker: a claim of it is refused with what its rules say", async () => {
    const { engine } = await testEngine({ agents });
    const refused = await engine.claimTasks({ worker_id: "w1", agent_types: ["noop_wait"] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ValidationError);
    expect(String((refused as ValidationError).problems?.[0]?.message)).toBe(
      "noop_wait nodes are started and ended by the engine, not for a worker",
    );
    await engine.close();
  });
});
