/**
 * Fork (DESIGN §16): a new run that keeps, without running them again, what its source did
 * before a node, and runs that node and everything after it with an edited input and payloads.
 * The source, finished or still running, is not changed.
 */
import { describe, expect, it } from "vitest";
import type { Engine, Json, Task } from "../../src/index.js";
import { ConflictError, NonRetryableError, NotFoundError, ValidationError } from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";

type Input = { topic: string };

const ARTICLE = {
  id: "article",
  input_schema: { type: "object", required: ["topic"], properties: { topic: { type: "string" } } },
  nodes: [
    { node_id: "research", agent_type: "research" },
    { node_id: "draft", agent_type: "draft", depends_on: ["research"], payload: { tone: "casual" } },
    { node_id: "publish", agent_type: "publish", depends_on: ["draft"] },
  ],
};

const APPROVED = {
  id: "approved",
  input_schema: ARTICLE.input_schema,
  nodes: [
    { node_id: "research", agent_type: "research" },
    { node_id: "draft", agent_type: "draft", depends_on: ["research"], payload: { tone: "casual" } },
    { node_id: "ok", agent_type: "human_review", depends_on: ["draft"], payload: { title: "ok?" } },
    { node_id: "publish", agent_type: "publish", depends_on: ["ok"] },
  ],
};

const PARENT = {
  id: "parent",
  nodes: [{ node_id: "sub", agent_type: "workflow", payload: { workflow_id: "article", input: { topic: "sub" } } }],
};

/** An engine whose agents count their calls (by agent and run) and note what `draft` received. */
async function engineWithAgents() {
  const calls: { agent: string; run_id: string }[] = [];
  const drafts: { run_id: string; payload: Json; input: Input }[] = [];
  const { engine } = await testEngine({
    agents: {
      research: async (t: Task) => {
        const task = t as Task<Json, Input>;
        calls.push({ agent: "research", run_id: task.run_id });
        const found = await task.step("search", () => ({ hits: [`${task.input.topic} 1`, `${task.input.topic} 2`] }));
        return { facts: `facts about ${task.input.topic} (${found.hits.length})` };
      },
      draft: (t: Task) => {
        const task = t as Task<{ tone: string }, Input>;
        calls.push({ agent: "draft", run_id: task.run_id });
        drafts.push({ run_id: task.run_id, payload: task.payload, input: task.input });
        const facts = (task.deps.research?.output as { facts: string } | undefined)?.facts;
        return { text: `${task.payload.tone} ${task.input.topic}: ${facts}` };
      },
      publish: (task: Task) => {
        calls.push({ agent: "publish", run_id: task.run_id });
        const from = task.deps.draft ?? task.deps.ok;
        return { published: from?.output ?? null };
      },
    },
  });
  for (const wf of [ARTICLE, APPROVED, PARENT]) await engine.registerWorkflow(wf);
  const count = (agent: string, run_id?: string) =>
    calls.filter((c) => c.agent === agent && (run_id === undefined || c.run_id === run_id)).length;
  return { engine, count, drafts };
}

/** What a reader sees of a run: the run with its nodes, its events, its steps. */
async function snapshot(engine: Engine, runId: string) {
  return {
    run: await engine.getRun(runId),
    events: await engine.listEvents(runId),
    steps: await engine.listSteps(runId),
  };
}

describe("forkRun", () => {
  it("keeps a finished run's visits before the node, runs it and what follows with the edits, and leaves the source as it was", async () => {
    const { engine, count, drafts } = await engineWithAgents();
    const source = await engine.startRun("article", { input: { topic: "cats" } });
    await engine.waitForRun(source.run_id);
    const before = await snapshot(engine, source.run_id);

    const fork = await engine.forkRun(source.run_id, {
      from: "draft",
      input: { topic: "owls" },
      payloads: { draft: { tone: "formal" } },
    });
    expect(fork.forked_from).toEqual({ run_id: source.run_id, node_id: "draft" });
    const done = await engine.waitForRun(fork.run_id);

    // research ran once, for the source; draft and publish once each for both.
    expect([count("research"), count("research", fork.run_id)]).toEqual([1, 0]);
    expect([count("draft", fork.run_id), count("publish", fork.run_id)]).toEqual([1, 1]);
    expect(drafts.find((d) => d.run_id === fork.run_id)).toMatchObject({
      payload: { tone: "formal" },
      input: { topic: "owls" },
    });
    // The kept research output is the source's (its input was cats); the rest is the fork's.
    expect(done.status).toBe("SUCCEEDED");
    expect(done.output).toEqual({ publish: { published: { text: "formal owls: facts about cats (2)" } } });
    expect(before.run.output).toEqual({ publish: { published: { text: "casual cats: facts about cats (2)" } } });

    const forked = await engine.getRun(fork.run_id);
    expect(forked.input).toEqual({ topic: "owls" });
    expect(forked.forked_from).toEqual({ run_id: source.run_id, node_id: "draft" });
    const research = forked.nodes.find((n) => n.node_id === "research");
    const sourceResearch = before.run.nodes.find((n) => n.node_id === "research");
    expect(research).toMatchObject({ state: "SUCCEEDED", visit: 1, output: sourceResearch?.output });
    expect(research?.execution_id).toBe(`${fork.run_id}:research:1`);

    const events = await engine.listEvents(fork.run_id);
    expect(events.slice(0, 2).map((e) => e.type)).toEqual(["run.started", "run.forked"]);
    expect(events[1]?.data).toEqual({
      from_run_id: source.run_id,
      from_node_id: "draft",
      copied: ["research"],
      input_edited: true,
      payloads_edited: ["draft"],
      source_version: 1,
      version: 1,
    });
    // The kept visit's steps came with it, under the fork's ids.
    const steps = await engine.listSteps(fork.run_id, "research");
    expect(steps.map((s) => [s.execution_id, s.name, s.output])).toEqual([
      [`${fork.run_id}:research:1`, "search", { hits: ["cats 1", "cats 2"] }],
    ]);
    expect(steps[0]?.run_id).toBe(fork.run_id);

    expect(await snapshot(engine, source.run_id)).toEqual(before);
    expect((await engine.listRuns({ workflow_id: "article" })).length).toBe(2);
  });

  it("forks with the source's input and payloads by default, and from the first node runs everything", async () => {
    const { engine, count } = await engineWithAgents();
    const source = await engine.startRun("article", { input: { topic: "cats" } });
    await engine.waitForRun(source.run_id);
    const fork = await engine.forkRun(source.run_id, { from: "research" });
    const done = await engine.waitForRun(fork.run_id);
    expect(done.output).toEqual((await engine.getRun(source.run_id)).output);
    expect(count("research", fork.run_id)).toBe(1);
    const forked = (await engine.listEvents(fork.run_id)).find((e) => e.type === "run.forked");
    expect(forked?.data).toMatchObject({ copied: [], input_edited: false, payloads_edited: [] });
  });

  it("forks a run still waiting for a review, before and after the review node; each runs on its own and the source finishes unchanged", async () => {
    const { engine, count } = await engineWithAgents();
    const asked = nextEvent(engine, (e) => e.type === "review.requested");
    const source = await engine.startRun("approved", { input: { topic: "cats" } });
    await asked;
    const before = await snapshot(engine, source.run_id);

    // From draft (before the review): draft runs again, and the fork waits in its own review.
    const early = await engine.forkRun(source.run_id, { from: "draft", payloads: { draft: { tone: "dry" } } });
    // From publish (after the review): the review the source waits in is not kept, so the fork asks again.
    const late = await engine.forkRun(source.run_id, { from: "publish" });
    for (const fork of [early, late]) {
      const ok = await waitForReview(engine, fork.run_id);
      expect(ok).toBe("IN_REVIEW");
    }
    expect(await snapshot(engine, source.run_id)).toEqual(before);
    expect([count("research"), count("draft", early.run_id), count("draft", late.run_id)]).toEqual([1, 1, 0]);
    const lateRun = await engine.getRun(late.run_id);
    expect(lateRun.nodes.map((n) => [n.node_id, n.state])).toEqual([
      ["research", "SUCCEEDED"],
      ["draft", "SUCCEEDED"],
      ["ok", "IN_REVIEW"],
      ["publish", "PENDING"],
    ]);

    for (const fork of [early, late]) await engine.review(fork.run_id, "ok", { decision: "approve", by: "ann" });
    const [earlyDone, lateDone] = await Promise.all([engine.waitForRun(early.run_id), engine.waitForRun(late.run_id)]);
    expect(earlyDone.output).toMatchObject({ publish: { published: { decision: "approve", by: "ann" } } });
    expect(lateDone.status).toBe("SUCCEEDED");
    // The source still waits, as it was; approved, it finishes as if nothing had been forked.
    expect((await engine.getRun(source.run_id)).status).toBe("RUNNING");
    await engine.review(source.run_id, "ok", { decision: "approve", by: "bob" });
    const sourceDone = await engine.waitForRun(source.run_id);
    expect(sourceDone.status).toBe("SUCCEEDED");
    expect(count("publish", source.run_id)).toBe(1);
    const sourceEvents = await engine.listEvents(source.run_id);
    expect(sourceEvents.slice(0, before.events.length)).toEqual(before.events);
    expect(sourceEvents.some((e) => e.type === "run.forked")).toBe(false);
    expect(sourceDone.forked_from).toBeNull();
  });

  it("refuses an unknown run, an unknown node, payloads of kept or unknown nodes, a child run and an incompatible version", async () => {
    const { engine } = await engineWithAgents();
    const source = await engine.startRun("article", { input: { topic: "cats" } });
    await engine.waitForRun(source.run_id);

    await expect(engine.forkRun("no-such-run", { from: "draft" })).rejects.toBeInstanceOf(NotFoundError);
    const unknownNode = await engine.forkRun(source.run_id, { from: "nope" }).catch((e: unknown) => e);
    expect(unknownNode).toBeInstanceOf(ValidationError);
    expect((unknownNode as ValidationError).problems).toEqual([
      { path: "from", message: 'workflow article@1 has no node "nope"' },
    ]);
    const kept = await engine
      .forkRun(source.run_id, { from: "draft", payloads: { research: { deep: true } } })
      .catch((e: unknown) => e);
    expect(kept).toBeInstanceOf(ValidationError);
    expect((kept as ValidationError).problems.map((p) => p.path)).toEqual(["payloads.research"]);
    expect((kept as ValidationError).problems[0]?.message).toMatch(/kept from the source/);
    const unknown = await engine
      .forkRun(source.run_id, { from: "draft", payloads: { ghost: {} } })
      .catch((e: unknown) => e);
    expect((unknown as ValidationError).problems.map((p) => p.path)).toEqual(["payloads.ghost"]);
    await expect(engine.forkRun(source.run_id, { from: "draft", input: { topic: 3 } })).rejects.toThrow(
      /does not match the input_schema/,
    );

    const parent = await engine.startRun("parent");
    await engine.waitForRun(parent.run_id);
    const [child] = (await engine.getRun(parent.run_id)).children;
    const refused = await engine.forkRun(child?.run_id as string, { from: "draft" }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConflictError);
    expect((refused as Error).message).toMatch(/is a child run of run .*; fork that run instead/);

    // Version 2 makes research another agent: it cannot keep what version 1 did.
    await engine.registerWorkflow({
      ...ARTICLE,
      nodes: [{ node_id: "research", agent_type: "draft" }, ...ARTICLE.nodes.slice(1)],
    });
    const moved = await engine.forkRun(source.run_id, { from: "draft", version: 2 }).catch((e: unknown) => e);
    expect(moved).toBeInstanceOf(ValidationError);
    expect((moved as ValidationError).problems).toEqual([
      { path: "nodes.research", message: "is draft in version 2, research in the source" },
    ]);
    // Nothing was started by the refusals.
    const started = (await engine.listRuns({ workflow_id: "article" })).filter((r) => r.parent === null);
    expect(started.map((r) => r.run_id)).toEqual([source.run_id]);
  });
});

/** The state of a run's `ok` node once the run has settled into waiting for it (no sleeping). */
async function waitForReview(engine: Engine, runId: string): Promise<string | undefined> {
  const state = async () => (await engine.getRun(runId)).nodes.find((n) => n.node_id === "ok")?.state;
  const asked = nextEvent(engine, (e) => e.type === "review.requested" && e.run_id === runId);
  if ((await state()) !== "IN_REVIEW") await asked;
  return state();
}

describe("a fork that fails", () => {
  it("undoes only what it did itself: the visits it kept were its source's doing", async () => {
    const undone: string[] = [];
    let failPublish = false;
    const { engine } = await testEngine({
      agents: {
        charge: (task: Task) => ({ charged: task.run_id }),
        refund: (task: Task) => {
          undone.push(`${task.node_id}@${task.run_id}`);
          return { refunded: true };
        },
        ship: (task: Task) => {
          if (failPublish) throw new NonRetryableError("warehouse closed");
          return { shipped: task.run_id };
        },
      },
    });
    await engine.registerWorkflow({
      id: "order",
      nodes: [
        { node_id: "charge", agent_type: "charge", compensation: { agent_type: "refund" } },
        { node_id: "ship", agent_type: "ship", depends_on: ["charge"], compensation: { agent_type: "refund" } },
      ],
    });
    const source = await engine.startRun("order");
    expect((await engine.waitForRun(source.run_id)).status).toBe("SUCCEEDED");

    failPublish = true;
    const fork = await engine.forkRun(source.run_id, { from: "ship" });
    expect((await engine.waitForRun(fork.run_id)).status).toBe("FAILED");
    // The source's charge was kept, not made by the fork: only the fork's own failing ship is undone.
    expect(undone).toEqual([`ship@${fork.run_id}`]);
    const planned = (await engine.listEvents(fork.run_id)).find((e) => e.type === "compensation.planned");
    expect(((planned?.data.compensations ?? []) as { node_id: string }[]).map((c) => c.node_id)).toEqual(["ship"]);
    expect((await engine.getRun(source.run_id)).status).toBe("SUCCEEDED");

    // A run that charged itself and then failed is refunded, as before.
    undone.length = 0;
    const own = await engine.startRun("order");
    expect((await engine.waitForRun(own.run_id)).status).toBe("FAILED");
    expect(undone).toEqual([`ship@${own.run_id}`, `charge@${own.run_id}`]);
  });
});
