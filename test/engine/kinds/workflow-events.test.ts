/**
 * child.started and child.ended (DESIGN §9, §11.1) in the parent's history, on both stores: one
 * pair per attempt of a `workflow` node, naming the node, its visit, the child and the attempt;
 * the end with the child's status and error, also when the parent was cancelled first. A map of
 * workflows writes none per item.
 */
import { describe, expect, it } from "vitest";
import { formatEventLine } from "../../../src/cli/live-view.js";
import type { RunEvent, Task } from "../../../src/index.js";
import { nextEvent, testEngine } from "../../helpers.js";

const child = { id: "child", nodes: [{ node_id: "work", agent_type: "work", retry_count: 0 }] };
const parent = {
  id: "parent",
  nodes: [
    {
      node_id: "sub",
      agent_type: "workflow",
      payload: { workflow_id: "child", input: { n: "{{ input.n }}" } },
      retry_count: 1,
      retry_interval: 0,
    },
  ],
};
const childEvents = (events: RunEvent[]) => events.filter((e) => e.type.startsWith("child."));

describe("child.started and child.ended in the parent's history", () => {
  it("one pair per attempt: the child's run id and the attempt, its status and error at its end", async () => {
    let calls = 0;
    const work = () => {
      calls += 1;
      if (calls === 1) throw new Error("model overloaded");
      return { ok: true };
    };
    const { engine } = await testEngine({ agents: { work } });
    await engine.registerWorkflow(child);
    await engine.registerWorkflow(parent);
    const run = await engine.startRun("parent", { input: { n: 1 } });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    const [first, second] = done.children.map((c) => c.run_id);
    const events = await engine.listEvents(run.run_id);
    expect(childEvents(events).map((e) => [e.type, e.node_id, e.visit, e.data])).toEqual([
      ["child.started", "sub", 1, { run_id: first, attempt: 1 }],
      [
        "child.ended",
        "sub",
        1,
        {
          run_id: first,
          attempt: 1,
          status: "FAILED",
          error: expect.objectContaining({
            reason: "retries_exhausted",
            message: expect.stringContaining("overloaded"),
          }),
        },
      ],
      ["child.started", "sub", 1, { run_id: second, attempt: 2 }],
      ["child.ended", "sub", 1, { run_id: second, attempt: 2, status: "SUCCEEDED", error: null }],
    ]);
    // In the order things happened: started after the attempt's start, ended before what the attempt became.
    const order = events.map((e) => `${e.type}${e.data.attempt ?? ""}`);
    expect(order.indexOf("node.started1")).toBeLessThan(order.indexOf("child.started1"));
    expect(order.indexOf("child.ended1")).toBeLessThan(order.indexOf("node.retrying1"));
    expect(order.indexOf("child.ended2")).toBeLessThan(order.indexOf("node.succeeded2"));
    // skein events shows them.
    const lines = childEvents(events).map((e) => formatEventLine(e, run.created_at));
    expect(lines[0]).toContain(`child.started   sub#1 attempt 1: child run ${first}`);
    expect(lines[1]).toContain(
      `child.ended     sub#1 attempt 1: child run ${first} FAILED: node work failed (retries_exhausted): model overloaded`,
    );
  });

  it("a cancelled parent cancels its child and records child.ended when the child ends", async () => {
    const hang = (t: Task) =>
      new Promise((_, reject) => t.signal.addEventListener("abort", () => reject(new Error("aborted"))));
    const { engine } = await testEngine({ agents: { work: hang } });
    await engine.registerWorkflow(child);
    await engine.registerWorkflow(parent);
    const working = nextEvent(engine, (e) => e.type === "node.started" && e.node_id === "work");
    const run = await engine.startRun("parent", { input: { n: 1 } });
    await working;
    const ended = nextEvent(engine, (e) => e.run_id === run.run_id && e.type === "child.ended");
    await engine.cancelRun(run.run_id);
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("CANCELLED");
    const kid = done.children[0]?.run_id as string;
    expect((await engine.waitForRun(kid)).status).toBe("CANCELLED");
    expect((await ended).data).toMatchObject({ run_id: kid, attempt: 1, status: "CANCELLED" });
    expect(childEvents(await engine.listEvents(run.run_id)).map((e) => e.type)).toEqual([
      "child.started",
      "child.ended",
    ]);
  });

  it("a map of workflows writes none per item", async () => {
    const { engine } = await testEngine({ agents: { work: () => ({ ok: true }) } });
    await engine.registerWorkflow(child);
    await engine.registerWorkflow({
      id: "fan",
      nodes: [
        { node_id: "each", agent_type: "map", payload: { items: "{{ [1, 2, 3] }}", each: { workflow_id: "child" } } },
      ],
    });
    const run = await engine.startRun("fan");
    expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
    expect(childEvents(await engine.listEvents(run.run_id))).toEqual([]);
  });
});
