import { describe, expect, it } from "vitest";
import type { Task, WorkflowInput } from "../../src/index.js";
import { testEngine } from "../helpers.js";

const nodeStates = (nodes: { node_id: string; state: string }[]) =>
  Object.fromEntries(nodes.map((n) => [n.node_id, n.state]));

describe("branching", () => {
  const workflow: WorkflowInput = {
    id: "branch",
    nodes: [
      {
        node_id: "check",
        agent_type: "checker",
        next_on_success: [{ when: "output.ok = true", to: "publish" }, { to: "rework" }],
      },
      { node_id: "publish", agent_type: "worker" },
      { node_id: "rework", agent_type: "worker" },
      { node_id: "report", agent_type: "aggregator", depends_on: ["publish", "rework"], join: "any" },
    ],
  };

  it("skips the untaken side and merges with join any", async () => {
    const { engine } = await testEngine({
      agents: { checker: (t: Task) => ({ ok: (t.input as { ok: boolean }).ok }), worker: (t: Task) => t.node_id },
    });
    await engine.registerWorkflow(workflow);
    const yes = await engine.waitForRun((await engine.startRun("branch", { input: { ok: true } })).run_id);
    expect(yes.status).toBe("SUCCEEDED");
    expect(nodeStates(yes.nodes)).toEqual({
      check: "SUCCEEDED",
      publish: "SUCCEEDED",
      rework: "SKIPPED",
      report: "SUCCEEDED",
    });
    expect(yes.output).toEqual({ report: { publish: "publish" } });
    expect(yes.nodes.find((n) => n.node_id === "rework")?.reason).toBe("branch_not_taken");

    const no = await engine.waitForRun((await engine.startRun("branch", { input: { ok: false } })).run_id);
    expect(nodeStates(no.nodes)).toEqual({
      check: "SUCCEEDED",
      publish: "SKIPPED",
      rework: "SUCCEEDED",
      report: "SUCCEEDED",
    });
    expect(no.output).toEqual({ report: { rework: "rework" } });
  });

  it("lets the agent's route win over when cases", async () => {
    const { engine } = await testEngine({
      agents: { checker: (t: Task) => t.route("rework", { ok: true }), worker: (t: Task) => t.node_id },
    });
    await engine.registerWorkflow(workflow);
    const run = await engine.waitForRun((await engine.startRun("branch")).run_id);
    expect(nodeStates(run.nodes)).toMatchObject({ publish: "SKIPPED", rework: "SUCCEEDED" });
    expect(run.nodes.find((n) => n.node_id === "check")?.output).toEqual({ ok: true });
  });

  it("fails the node with invalid_next when a route names an undeclared target, without retrying", async () => {
    let calls = 0;
    const { engine } = await testEngine({
      agents: {
        checker: (t: Task) => {
          calls += 1;
          return t.route(["report"], {});
        },
        worker: () => null,
      },
    });
    await engine.registerWorkflow(workflow);
    const run = await engine.waitForRun((await engine.startRun("branch")).run_id);
    expect(run.status).toBe("FAILED");
    const check = run.nodes.find((n) => n.node_id === "check");
    expect(check?.state).toBe("FAILED");
    expect(check?.reason).toBe("invalid_next");
    expect(check?.error?.message).toContain('"report"');
    expect(calls).toBe(1);
  });

  it("uses a decide hook before when cases", async () => {
    const { engine } = await testEngine({
      agents: { checker: () => ({ ok: true }), worker: (t: Task) => t.node_id },
      decideHooks: { always_rework: () => ["rework"] },
    });
    const def = structuredClone(workflow) as typeof workflow & { nodes: Record<string, unknown>[] };
    (def.nodes[0] as Record<string, unknown>).decide = "always_rework";
    await engine.registerWorkflow(def);
    const run = await engine.waitForRun((await engine.startRun("branch")).run_id);
    expect(nodeStates(run.nodes)).toMatchObject({ publish: "SKIPPED", rework: "SUCCEEDED" });
  });

  it("records branch.none when no case holds, and the gated nodes are skipped", async () => {
    const { engine } = await testEngine({ agents: { checker: () => ({ ok: false }), worker: () => null } });
    await engine.registerWorkflow({
      id: "nocase",
      nodes: [
        { node_id: "check", agent_type: "checker", next_on_success: [{ when: "output.ok", to: "publish" }] },
        { node_id: "publish", agent_type: "worker" },
      ],
    });
    const run = await engine.waitForRun((await engine.startRun("nocase")).run_id);
    expect(run.status).toBe("SUCCEEDED");
    expect(nodeStates(run.nodes)).toEqual({ check: "SUCCEEDED", publish: "SKIPPED" });
    const types = (await engine.listEvents(run.run_id)).map((e) => e.type);
    expect(types).toContain("branch.none");
  });

  it("fails with when_error when a when expression throws", async () => {
    const { engine } = await testEngine({ agents: { checker: () => ({ n: 1 }), worker: () => null } });
    await engine.registerWorkflow({
      id: "badwhen",
      nodes: [
        {
          node_id: "check",
          agent_type: "checker",
          next_on_success: [{ when: "$error('boom')", to: "publish" }, { to: "publish" }],
        },
        { node_id: "publish", agent_type: "worker" },
      ],
    });
    const run = await engine.waitForRun((await engine.startRun("badwhen")).run_id);
    expect(run.status).toBe("FAILED");
    expect(run.nodes.find((n) => n.node_id === "check")?.reason).toBe("when_error");
  });

  it("finishes the run at $end: active visits cancelled, pending ones skipped, output from the ending node", async () => {
    const { engine } = await testEngine({
      agents: {
        checker: (t: Task) => t.route("$end", { early: true }),
        slow: (t: Task) =>
          new Promise((_r, reject) => t.signal.addEventListener("abort", () => reject(t.signal.reason))),
        worker: () => null,
      },
    });
    await engine.registerWorkflow({
      id: "end",
      nodes: [
        { node_id: "slow", agent_type: "slow" },
        { node_id: "check", agent_type: "checker", next_on_success: "publish" },
        { node_id: "publish", agent_type: "worker" },
      ],
    });
    const run = await engine.waitForRun((await engine.startRun("end")).run_id);
    expect(run.status).toBe("SUCCEEDED");
    expect(run.output).toEqual({ early: true });
    expect(nodeStates(run.nodes)).toEqual({ slow: "CANCELLED", check: "SUCCEEDED", publish: "SKIPPED" });
  });

  it("routes a handled failure through next_on_failure; the failure handler reads the error from its trigger", async () => {
    const seen: unknown[] = [];
    const { engine } = await testEngine({
      agents: {
        flaky: () => {
          throw new Error("upstream 502");
        },
        handler: (t: Task) => {
          seen.push(t.trigger);
          return "handled";
        },
        after: () => "after",
      },
    });
    await engine.registerWorkflow({
      id: "onfail",
      nodes: [
        { node_id: "call", agent_type: "flaky", retry_count: 0, next_on_failure: "fallback" },
        { node_id: "fallback", agent_type: "handler" },
        { node_id: "after", agent_type: "after", depends_on: ["call"], join: "all_done" },
      ],
    });
    const run = await engine.waitForRun((await engine.startRun("onfail")).run_id);
    expect(run.status).toBe("SUCCEEDED");
    expect(nodeStates(run.nodes)).toEqual({ call: "FAILED", fallback: "SUCCEEDED", after: "SUCCEEDED" });
    expect(run.nodes.find((n) => n.node_id === "call")?.handled).toBe(true);
    expect(seen).toEqual([
      expect.objectContaining({
        node_id: "call",
        status: "FAILED",
        error: expect.objectContaining({ message: "upstream 502" }),
      }),
    ]);
  });
});
