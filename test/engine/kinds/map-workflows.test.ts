/**
 * A map of workflows (`each: { workflow_id, input }`, DESIGN §11.1) on both stores: one child run
 * of that workflow per item, the map's run its parent (one level), cancelled with the map,
 * redriven for the failed items only, capped by the node's timeout. And `failed_items`: what a
 * map that succeeded within its tolerated failures records, bounded, in getRun and its event.
 */
import { describe, expect, it } from "vitest";
import type { Engine, Task } from "../../../src/index.js";
import { nextEvent, testEngine } from "../../helpers.js";

/** The child workflow: one node whose agent gets the item's input. */
const one = {
  id: "one",
  input_schema: { type: "object", properties: { v: { type: "number" } }, required: ["v"] },
  nodes: [
    { node_id: "work", agent_type: "work", retry_count: 0, payload: { v: "{{ input.v }}", at: "{{ input.at }}" } },
  ],
};
const fan = (payload: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  id: "fan",
  nodes: [
    {
      node_id: "each",
      agent_type: "map",
      payload: { each: { workflow_id: "one", input: { v: "{{ item }}", at: "{{ index }}" } }, ...payload },
      ...extra,
    },
  ],
});
const work = (t: Task) => ({ got: t.payload as Record<string, unknown> });

async function start(engine: Engine, items: unknown[]) {
  return (await engine.startRun("fan", { input: { items } })).run_id;
}
const items = "{{ input.items }}";

describe("a map of workflows: one child run per item", () => {
  it("each item is a run of the workflow, the map's run its parent; its output fills the item's slot", async () => {
    const { engine } = await testEngine({ agents: { work } });
    await engine.registerWorkflow(one);
    await engine.registerWorkflow(fan({ items, max_concurrency: 2 }));
    const runId = await start(engine, [10, 20, 30]);
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("SUCCEEDED");
    const node = done.nodes[0];
    expect(node?.output).toEqual([10, 20, 30].map((v, at) => ({ work: { got: { v, at } } })));
    const page = await engine.listMapItems(runId, "each");
    for (const item of page.items) {
      const kid = await engine.getRun(item.child_run_id as string);
      expect(kid).toMatchObject({
        workflow_id: "one",
        input: { v: item.item, at: item.index },
        parent: { run_id: runId, node_id: "each", visit: 1, attempt: 1, item: item.index, depth: 1 },
        idempotency_key: `skein:${node?.execution_id}:1:${item.index}`,
      });
    }
    // No run between the map and its items (the item workflow's runs of before).
    expect(await engine.listRuns({ workflow_id: "fan/each" })).toEqual([]);
    expect((await engine.listRuns({ workflow_id: "one" })).map((r) => r.run_id).sort()).toEqual(
      page.items.map((i) => i.child_run_id).sort(),
    );
    expect(done.children).toEqual([]); // paged by listMapItems, never listed as children
  });

  it("cancelling the map's run cancels the items' runs", async () => {
    const started: string[] = [];
    const hang = (t: Task) => {
      started.push(t.run_id);
      return new Promise((_, reject) => t.signal.addEventListener("abort", () => reject(new Error("aborted"))));
    };
    const { engine } = await testEngine({ agents: { work: hang } });
    await engine.registerWorkflow(one);
    await engine.registerWorkflow(fan({ items, max_concurrency: 2 }));
    let seen = 0;
    const two = nextEvent(engine, (e) => e.type === "node.started" && e.node_id === "work" && ++seen === 2);
    const runId = await start(engine, [1, 2, 3, 4]);
    await two;
    await engine.cancelRun(runId);
    expect((await engine.waitForRun(runId)).status).toBe("CANCELLED");
    for (const id of started) expect((await engine.waitForRun(id)).status).toBe("CANCELLED");
    expect(started).toHaveLength(2);
    const page = await engine.listMapItems(runId, "each");
    expect(page.items.map((i) => i.state)).toEqual(["CANCELLED", "CANCELLED", "PENDING", "PENDING"]);
  });

  it("a redrive starts new runs only for the items that did not succeed", async () => {
    const broken = new Set([1]);
    const calls: number[] = [];
    const flaky = (t: Task) => {
      const v = (t.payload as { v: number }).v;
      calls.push(v);
      if (broken.has(v)) throw new Error(`item ${v} is broken`);
      return { v };
    };
    const { engine } = await testEngine({ agents: { work: flaky } });
    await engine.registerWorkflow(one);
    await engine.registerWorkflow(fan({ items, max_concurrency: 1 }));
    const runId = await start(engine, [0, 1, 2]);
    expect((await engine.waitForRun(runId)).status).toBe("FAILED");
    const before = (await engine.listMapItems(runId, "each", { visit: 1 })).items;
    broken.clear();
    calls.length = 0;
    await engine.retryRun(runId);
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[0]?.output).toEqual([0, 1, 2].map((v) => ({ work: { v } })));
    expect(calls).toEqual([1, 2]); // item 2 never ran: the map failed at item 1
    const after = (await engine.listMapItems(runId, "each", { visit: 2 })).items;
    expect(after[0]?.child_run_id).toBe(before[0]?.child_run_id); // carried over
    expect(after[1]?.child_run_id).not.toBe(before[1]?.child_run_id);
    expect((await engine.getRun(after[1]?.child_run_id as string)).parent).toMatchObject({ visit: 2, item: 1 });
  });

  it("the node's timeout caps each item's whole run", async () => {
    const hang = (t: Task) =>
      new Promise((_, reject) => t.signal.addEventListener("abort", () => reject(new Error("aborted"))));
    const { engine, clock } = await testEngine({ agents: { work: hang } });
    await engine.registerWorkflow(one);
    await engine.registerWorkflow(fan({ items }, { timeout: 60 }));
    const working = nextEvent(engine, (e) => e.type === "node.started" && e.node_id === "work");
    const runId = await start(engine, [1]);
    await working;
    await clock.advance(60_000);
    const done = await engine.waitForRun(runId);
    expect(done.nodes[0]).toMatchObject({ state: "FAILED", error: { reason: "items_failed" } });
    const [item] = (await engine.listMapItems(runId, "each")).items;
    expect(item?.state).toBe("FAILED");
    expect((await engine.getRun(item?.child_run_id as string)).end_cause).toBe("ttl");
  });

  it("an item whose input the workflow refuses fails without a run; within the tolerance the map succeeds", async () => {
    const { engine } = await testEngine({ agents: { work } });
    await engine.registerWorkflow(one);
    await engine.registerWorkflow(fan({ items, tolerated_failures: 1 }));
    const runId = await start(engine, [1, "two", 3]);
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[0]?.output).toEqual([
      { work: { got: { v: 1, at: 0 } } },
      null,
      { work: { got: { v: 3, at: 2 } } },
    ]);
    const [, refused] = (await engine.listMapItems(runId, "each")).items;
    expect(refused).toMatchObject({ state: "FAILED", child_run_id: null, error: { reason: "template_error" } });
    expect(refused?.error?.message).toContain("does not match the input_schema of one: input.v: must be number");
    expect(done.nodes[0]?.items?.failed_items).toEqual([{ index: 1, run_id: null, error: refused?.error }]);
  });
});

describe("failed_items of a map that succeeded within its tolerated failures", () => {
  const square = (t: Task) => {
    const n = (t.payload as { n: number }).n;
    if (n % 2 === 1) throw new Error(`odd ${n}`);
    return { n };
  };
  const agentMap = (payload: Record<string, unknown>) => ({
    id: "fan",
    nodes: [
      {
        node_id: "each",
        agent_type: "map",
        retry_count: 0,
        payload: { items, each: { agent_type: "square", payload: { n: "{{ item }}" } }, ...payload },
      },
    ],
  });

  it("are in getRun's map node and its node.succeeded event, by index, with their runs and errors", async () => {
    const { engine } = await testEngine({ agents: { square } });
    await engine.registerWorkflow(agentMap({ tolerated_failures: 2 }));
    const runId = await start(engine, [0, 1, 2, 3, 4]);
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("SUCCEEDED");
    const page = (await engine.listMapItems(runId, "each")).items;
    const expected = [1, 3].map((index) => ({
      index,
      run_id: page[index]?.child_run_id,
      error: { reason: "retries_exhausted", message: expect.stringContaining(`odd ${index}`) },
    }));
    expect(done.nodes[0]?.items).toMatchObject({ failed: 2, cancelled: 0, failed_items: expected });
    const succeeded = (await engine.listEvents(runId)).find((e) => e.type === "node.succeeded");
    expect(succeeded?.data).toMatchObject({ failed_items: expected, failed_items_count: 2 });
  });

  it("are the first 100 of a longer list, with the count of all", async () => {
    const { engine } = await testEngine({ agents: { square } });
    await engine.registerWorkflow(agentMap({ tolerated_failure_percent: 100, max_concurrency: 50 }));
    const list = Array.from({ length: 300 }, (_, i) => i);
    const done = await engine.waitForRun(await start(engine, list));
    expect(done.status).toBe("SUCCEEDED");
    const shown = done.nodes[0]?.items?.failed_items ?? [];
    expect(shown.map((f) => f.index)).toEqual(list.filter((n) => n % 2 === 1).slice(0, 100));
    const succeeded = (await engine.listEvents(done.run_id)).find((e) => e.type === "node.succeeded");
    expect(succeeded?.data.failed_items_count).toBe(150);
    expect(done.nodes[0]?.items?.failed).toBe(150);
  });

  it("are absent when every item succeeded", async () => {
    const { engine } = await testEngine({ agents: { square } });
    await engine.registerWorkflow(agentMap({}));
    const done = await engine.waitForRun(await start(engine, [0, 2]));
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[0]?.items).not.toHaveProperty("failed_items");
    const succeeded = (await engine.listEvents(done.run_id)).find((e) => e.type === "node.succeeded");
    expect(succeeded?.data).not.toHaveProperty("failed_items");
  });
});
