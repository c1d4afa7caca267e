/**
 * Run priority (DESIGN §17, issue 40): startRun's `priority`, 0 to 9, lower first, default 5.
 * Ready work of an agent type is claimed by priority, then by age, wherever it waits: in the
 * database (the claim queries' order) or in the flush that made it ready (merged into that
 * order), by the engine's own agents and by external workers alike. Child runs, map items and
 * map item runs inherit their run's priority; a fork keeps its source's. The clock is a manual
 * one: it moves a millisecond between starts (the age that breaks a tie) and never far enough
 * for a sweep; agents block until the test lets them go, and nothing sleeps.
 */
import { describe, expect, it } from "vitest";
import { type ExternalTask, type Task, ValidationError } from "../../src/index.js";
import { within } from "../fixtures/child.js";
import { testEngine } from "../helpers.js";

const ONE = { id: "one", nodes: [{ node_id: "n", agent_type: "t" }] };
const TWO = {
  id: "two",
  nodes: [
    { node_id: "first", agent_type: "t" },
    { node_id: "second", agent_type: "t", depends_on: ["first"] },
  ],
};
const PARENT = {
  id: "parent",
  nodes: [{ node_id: "sub", agent_type: "workflow", payload: { workflow_id: "one", input: { label: "child" } } }],
};
/** A run's one node, labelled by its id: what a map's item runs run. */
const LEAF = { id: "leaf", nodes: [{ node_id: "leaf", agent_type: "t" }] };
/** Maps of literal items: without a template, their payloads are resolved as they become ready. */
const mapOf = (id: string, items: string[], each: Record<string, string>) => ({
  id,
  nodes: [{ node_id: "each", agent_type: "map", payload: { items, each, max_concurrency: 10 } }],
});
const MAP = mapOf("fan", ["item0"], { agent_type: "t" });
const MAP2 = mapOf("fan2", ["i0", "i1"], { agent_type: "t" });
const MAP_OF_RUNS = mapOf("fan_runs", ["r0"], { workflow_id: "leaf" });

/** What names an attempt in the order the agent saw them: a map's item, its input's label, or its node's id. */
function labelOf(task: Task): string {
  if (task.item) return String(task.input);
  const label = (task.input as { label?: string }).label;
  if (label === undefined) return task.node_id;
  return task.node_id === "second" ? `${label}.second` : label;
}

/** An agent whose attempts wait until the test lets them go: the labels in the order they started. */
class Gate {
  readonly seen: string[] = [];
  private readonly held: (() => void)[] = [];
  private readonly waiters: { n: number; resolve: () => void }[] = [];

  readonly handler = (task: Task): Promise<string> =>
    new Promise<string>((resolve) => {
      this.seen.push(labelOf(task));
      this.held.push(() => resolve("ok"));
      for (const w of this.waiters.filter((w) => this.seen.length >= w.n)) w.resolve();
    });

  /** Resolves once `n` attempts have started in all. */
  started(n: number): Promise<void> {
    if (this.seen.length >= n) return Promise.resolve();
    return within(10_000, `${n} attempts started`, new Promise<void>((resolve) => this.waiters.push({ n, resolve })));
  }

  /** Lets the attempts started so far return. */
  release(): void {
    for (const release of this.held.splice(0)) release();
  }

  /** Lets attempts go one at a time until `n` have started: with one slot, the order the claims took them in. */
  async drain(n: number): Promise<string[]> {
    for (let k = this.seen.length; k < n; k++) {
      this.release();
      await this.started(k + 1);
    }
    this.release();
    return this.seen;
  }
}

/** An engine whose agent type `t` has one slot, and the workflows of this file. */
async function oneSlot() {
  const gate = new Gate();
  const { engine, clock } = await testEngine({ agentConcurrency: { t: 1 }, agents: { t: gate.handler } });
  for (const wf of [ONE, TWO, LEAF, PARENT, MAP, MAP_OF_RUNS]) await engine.registerWorkflow(wf);
  // The slot is taken: everything started next waits ready.
  await engine.startRun(ONE.id, { input: { label: "holder" } });
  await gate.started(1);
  return { engine, clock, gate };
}

describe("priority under a concurrency limit", () => {
  it("claims waiting runs by priority, lower first, then oldest first, as the slot frees", async () => {
    const { engine, clock, gate } = await oneSlot();
    const started = [];
    for (const [label, priority] of [
      ["a", 7],
      ["b", 5],
      ["c", 0],
      ["d", 9],
      ["e", 0],
      ["f", undefined],
    ] as const) {
      await clock.advance(1);
      started.push(
        await engine.startRun(ONE.id, { input: { label }, ...(priority === undefined ? {} : { priority }) }),
      );
    }
    expect(started.map((r) => r.priority)).toEqual([7, 5, 0, 9, 0, 5]);
    expect(await gate.drain(7)).toEqual(["holder", "c", "e", "b", "f", "a", "d"]);
    for (const run of started) expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
  });

  it("puts work a flush makes ready in that order too: ahead of less urgent work waiting, behind more urgent", async () => {
    const { engine, clock, gate } = await oneSlot();
    await clock.advance(1);
    await engine.startRun(TWO.id, { input: { label: "x" }, priority: 2 });
    await clock.advance(1);
    await engine.startRun(TWO.id, { input: { label: "u" }, priority: 0 });
    await clock.advance(1);
    await engine.startRun(ONE.id, { input: { label: "y" }, priority: 1 });
    // u's first step ends: its second, made ready by the flush that records the result, goes
    // ahead of y and x waiting in the database.
    expect(await gate.drain(4)).toEqual(["holder", "u", "u.second", "y"]);
    await gate.started(5);
    expect(gate.seen[4]).toBe("x");
    // While x's first step runs, z waits with a lower number: x's second step, made ready when
    // the first ends, waits behind it.
    await clock.advance(1);
    await engine.startRun(ONE.id, { input: { label: "z" }, priority: 1 });
    expect(await gate.drain(7)).toEqual(["holder", "u", "u.second", "y", "x", "z", "x.second"]);
  });
});

describe("priority inherited", () => {
  it("gives a workflow node's child run and a map's items and item runs their run's priority", async () => {
    const { engine, clock, gate } = await oneSlot();
    await clock.advance(1);
    const low = await engine.startRun(ONE.id, { input: { label: "low" } });
    await clock.advance(1);
    const parent = await engine.startRun(PARENT.id, { priority: 1 });
    await clock.advance(1);
    const fan = await engine.startRun(MAP.id, { priority: 2 });
    await clock.advance(1);
    const fanRuns = await engine.startRun(MAP_OF_RUNS.id, { priority: 3 });
    // The child (1), the map's item (2), the item run (3), then the older run of the default 5.
    expect(await gate.drain(5)).toEqual(["holder", "child", "item0", "leaf", "low"]);
    for (const run of [low, parent, fan, fanRuns])
      expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
    const childOf = async (runId: string) => (await engine.getRun(runId)).children[0]?.run_id as string;
    expect((await engine.getRun(await childOf(parent.run_id))).priority).toBe(1);
    expect((await engine.listMapItems(fan.run_id, "each")).items.map((i) => i.priority)).toEqual([2]);
    const [item] = (await engine.listMapItems(fanRuns.run_id, "each")).items;
    expect((await engine.getRun(item?.child_run_id as string)).priority).toBe(3);
    expect((await engine.getRun(parent.run_id)).nodes[0]?.priority).toBe(1);
  });

  it("keeps the source's priority in a fork, and reads it back in getRun and listRuns", async () => {
    const { engine } = await testEngine({ agents: { t: () => "ok" } });
    await engine.registerWorkflow(ONE);
    const urgent = await engine.startRun(ONE.id, { input: { label: "u" }, priority: 0 });
    const plain = await engine.startRun(ONE.id, { input: { label: "p" } });
    await engine.waitForRun(urgent.run_id);
    await engine.waitForRun(plain.run_id);
    const fork = await engine.forkRun(urgent.run_id, { from: "n" });
    expect(fork.priority).toBe(0);
    expect((await engine.getRun(fork.run_id)).priority).toBe(0);
    const listed = await engine.listRuns({ workflow_id: ONE.id });
    expect(new Map(listed.map((r) => [r.run_id, r.priority]))).toEqual(
      new Map([
        [urgent.run_id, 0],
        [plain.run_id, 5],
        [fork.run_id, 0],
      ]),
    );
  });
});

describe("priority for external workers", () => {
  it("hands a worker the waiting runs by priority, then age", async () => {
    const { engine, clock } = await testEngine();
    await engine.registerWorkflow(ONE);
    for (const [label, priority] of [
      ["a", 7],
      ["b", 5],
      ["c", 0],
      ["d", 9],
      ["e", 0],
    ] as const) {
      await clock.advance(1);
      await engine.startRun(ONE.id, { input: { label }, priority });
    }
    const order: string[] = [];
    for (let i = 0; i < 5; i++) {
      const [task] = await engine.claimTasks({ agent_types: ["t"], worker_id: "w", max_tasks: 1 });
      order.push(task ? labelOf(task as unknown as Task) : "none");
    }
    expect(order).toEqual(["c", "e", "b", "a", "d"]);
  });

  it("hands a worker a map's items of a more urgent run before the visits of a less urgent one", async () => {
    const { engine, clock } = await testEngine();
    await engine.registerWorkflow(ONE);
    await engine.registerWorkflow(MAP2);
    await engine.startRun(ONE.id, { input: { label: "low" }, priority: 6 });
    await clock.advance(1);
    await engine.startRun(MAP2.id, { priority: 4 });
    const claim = (max_tasks: number) => engine.claimTasks({ agent_types: ["t"], worker_id: "w", max_tasks });
    const first = await claim(2);
    expect(first.map((t) => t.input).sort()).toEqual(["i0", "i1"]);
    expect(first.every((t: ExternalTask) => t.item !== undefined)).toBe(true);
    expect((await claim(2)).map((t) => t.input)).toEqual([{ label: "low" }]);
  });
});

describe("priority refused", () => {
  it("refuses a priority that is not a whole number from 0 to 9, saying what is allowed, and starts nothing", async () => {
    const { engine } = await testEngine();
    await engine.registerWorkflow(ONE);
    for (const priority of [10, -1, 2.5, "high", Number.NaN, null]) {
      const refused = await engine.startRun(ONE.id, { priority: priority as number }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ValidationError);
      const { problems } = refused as ValidationError;
      expect(problems).toHaveLength(1);
      expect(problems[0]?.path).toBe("priority");
      expect(problems[0]?.message).toMatch(/^must be a whole number from 0 \(claimed first\) to 9 \(claimed last\)/);
    }
    const high = await engine.startRun(ONE.id, { priority: "high" as unknown as number }).catch((e: unknown) => e);
    expect((high as ValidationError).problems[0]?.message).toContain('got "high"');
    expect(await engine.listRuns({})).toEqual([]);
  });
});
