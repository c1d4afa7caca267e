/**
 * Reading a map node's items (DESIGN §11.1) on both stores: getRun's counts (with pending worked
 * out) and no item runs among its children, listMapItems a page at a time, and its refusals.
 * A mid-map state is held by agents blocked on promises the test resolves, never by sleeping.
 */
import { describe, expect, it } from "vitest";
import { type Engine, NotFoundError, type Task, ValidationError } from "../../../src/index.js";
import { testEngine } from "../../helpers.js";

const FLOW = {
  id: "fanout",
  nodes: [
    { node_id: "plan", agent_type: "planner" },
    {
      node_id: "answer",
      agent_type: "map",
      depends_on: ["plan"],
      payload: {
        items: "{{ nodes.plan.output.items }}",
        max_concurrency: 2,
        each: { agent_type: "square", payload: { n: "{{ item }}" } },
      },
    },
  ],
};

const planner = (t: Task) => ({ items: (t.input as { items: unknown[] }).items });
const square = (t: Task) => ({ sq: (t.payload as { n: number }).n ** 2 });

/** Holds each call until the test releases it by its item (`n`); `waitFor(n)` resolves once n calls wait. */
function held() {
  const waiting = new Map<number, () => void>();
  const watchers: { n: number; done: () => void }[] = [];
  const agent = (t: Task) =>
    new Promise((release) => {
      waiting.set((t.payload as { n: number }).n, () => release(square(t)));
      for (const w of watchers.splice(0)) {
        if (waiting.size >= w.n) w.done();
        else watchers.push(w);
      }
    });
  const waitFor = (n: number) => new Promise<void>((done) => (waiting.size >= n ? done() : watchers.push({ n, done })));
  return { agent, waiting, waitFor };
}

async function start(engine: Engine, items: unknown[]): Promise<string> {
  await engine.registerWorkflow(FLOW);
  return (await engine.startRun("fanout", { input: { items } })).run_id;
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

describe("a map node's items", () => {
  it("shows running and pending counts mid-map, and each item's state and run", async () => {
    const h = held();
    const { engine } = await testEngine({ agents: { planner, square: h.agent } });
    const runId = await start(engine, [3, 4, 5, 6, 7]);
    await h.waitFor(2);

    const run = await engine.getRun(runId);
    expect(run.nodes.find((n) => n.node_id === "answer")?.items).toEqual({
      total: 5,
      running: 2,
      succeeded: 0,
      failed: 0,
      cancelled: 0,
      pending: 3,
      next: 2,
    });
    expect(run.nodes.find((n) => n.node_id === "plan")?.items).toBeNull();
    // Item runs are read through listMapItems, never listed as the run's children.
    expect(run.children).toEqual([]);

    const page = await engine.listMapItems(runId, "answer");
    expect(page.next_after).toBeNull();
    expect(page.items.map((i) => [i.index, i.item, i.state])).toEqual([
      [0, 3, "RUNNING"],
      [1, 4, "RUNNING"],
      [2, 5, "PENDING"],
      [3, 6, "PENDING"],
      [4, 7, "PENDING"],
    ]);
    // An item of an agent holds its attempts in its row, with no run of its own.
    expect(page.items.map((i) => i.child_run_id)).toEqual([null, null, null, null, null]);
    expect(page.items[0]).toMatchObject({ agent_type: "square", attempt: 1, failures: 0 });
    expect(page.items[0]?.holder).not.toBeNull();
    expect(page.items[2]).toMatchObject({ attempt: 0, holder: null, ready_at: null });

    // Items start in index order (whatever order their agents are called in): 0 and 1 run.
    expect([...h.waiting.keys()].sort()).toEqual([3, 4]);
    h.waiting.get(3)?.();
    await h.waitFor(3);
    const after = await engine.listMapItems(runId, "answer", { limit: 3 });
    expect(after.items.map((i) => i.state)).toEqual(["SUCCEEDED", "RUNNING", "RUNNING"]);
    expect(after.items[0]).toMatchObject({ output: { sq: 9 }, error: null });
    expect(after.next_after).toBe(2);
    expect((await engine.getRun(runId)).nodes.find((n) => n.node_id === "answer")?.items).toMatchObject({
      succeeded: 1,
      running: 2,
      pending: 2,
    });
    for (const [i, n] of [4, 5, 6, 7].entries()) {
      await h.waitFor(Math.min(i + 3, 5));
      h.waiting.get(n)?.();
    }
    expect((await engine.waitForRun(runId)).status).toBe("SUCCEEDED");
  });

  it("pages through 120 items by index: 100 by default, `after` exclusive, next_after null on the last page", async () => {
    const { engine } = await testEngine({ agents: { planner, square } });
    const runId = await start(engine, range(120));
    const done = await engine.waitForRun(runId);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.children).toEqual([]);
    expect(done.nodes.find((n) => n.node_id === "answer")?.items).toMatchObject({
      total: 120,
      succeeded: 120,
      pending: 0,
    });

    const first = await engine.listMapItems(runId, "answer");
    expect(first.items.map((i) => i.index)).toEqual(range(100));
    expect(first.next_after).toBe(99);
    const rest = await engine.listMapItems(runId, "answer", { after: 99 });
    expect(rest.items.map((i) => i.index)).toEqual(range(20).map((i) => i + 100));
    expect(rest.next_after).toBeNull();
    expect(rest.items[19]).toMatchObject({ item: 119, state: "SUCCEEDED", output: { sq: 119 ** 2 } });

    // Pages of 50 by next_after cover every item once, in order.
    const seen: number[] = [];
    let after = -1;
    for (;;) {
      const page = await engine.listMapItems(runId, "answer", { after, limit: 50, visit: 1 });
      seen.push(...page.items.map((i) => i.index));
      if (page.next_after === null) break;
      after = page.next_after;
    }
    expect(seen).toEqual(range(120));
    // A visit the node never had has no items.
    expect(await engine.listMapItems(runId, "answer", { visit: 2 })).toEqual({ items: [], next_after: null });
  });

  it("refuses a page over 1000, an unknown run, and a node that is not a map node (naming the map nodes)", async () => {
    const { engine } = await testEngine({ agents: { planner, square } });
    const runId = await start(engine, [1]);
    await engine.waitForRun(runId);

    const tooMany = engine.listMapItems(runId, "answer", { limit: 1001 });
    await expect(tooMany).rejects.toThrow(ValidationError);
    await expect(tooMany).rejects.toThrow(/limit: must be an integer from 1 to 1000/);
    await expect(engine.listMapItems(runId, "answer", { after: -2 })).rejects.toThrow(/after: must be an item index/);
    await expect(engine.listMapItems(runId, "answer", { visit: 0 })).rejects.toThrow(ValidationError);

    await expect(engine.listMapItems("no-such-run", "answer")).rejects.toThrow(NotFoundError);
    await expect(engine.listMapItems("no-such-run", "answer")).rejects.toThrow(/run no-such-run does not exist/);
    const notMap = engine.listMapItems(runId, "plan");
    await expect(notMap).rejects.toThrow(NotFoundError);
    await expect(notMap).rejects.toThrow('has no map node "plan": its map nodes are answer');
    await expect(engine.listMapItems(runId, "nope")).rejects.toThrow('has no map node "nope"');

    await engine.registerWorkflow({ id: "plain", nodes: [{ node_id: "p", agent_type: "planner" }] });
    const plain = await engine.startRun("plain", { input: { items: [] } });
    await expect(engine.listMapItems(plain.run_id, "p")).rejects.toThrow('has no map node "p": it has none');
  });

  it("lists a workflow node's child but not a map's item runs among a run's children", async () => {
    const { engine } = await testEngine({ agents: { planner, square } });
    await engine.registerWorkflow(FLOW);
    await engine.registerWorkflow({
      id: "outer",
      nodes: [
        { node_id: "sub", agent_type: "workflow", payload: { workflow_id: "fanout", input: { items: [1, 2] } } },
        {
          node_id: "again",
          agent_type: "map",
          payload: { items: [5, 6, 7], each: { agent_type: "square", payload: { n: "{{ item }}" } } },
        },
      ],
    });
    const run = await engine.startRun("outer");
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.children.map((c) => [c.node_id, c.workflow_id])).toEqual([["sub", "fanout"]]);
    // The child's own map items are not its children either.
    expect((await engine.getRun(done.children[0]?.run_id ?? "")).children).toEqual([]);
    expect((await engine.listMapItems(run.run_id, "again")).items.map((i) => i.output)).toEqual([
      { sq: 25 },
      { sq: 36 },
      { sq: 49 },
    ]);
  });
});
