/**
 * Upgrading runs in flight (DESIGN §16): registerWorkflow's `upgradable` counts, migrateRuns'
 * dry run, runs waiting in a review moved to a version that adds a node after it (which then
 * runs), and runs refused with their reasons and left as they were. On both stores.
 */
import { describe, expect, it } from "vitest";
import type { Engine, NodeInput, RunEvent } from "../../src/index.js";
import { ConflictError, NotFoundError, ValidationError } from "../../src/index.js";
import { testEngine } from "../helpers.js";

const REVIEW = { node_id: "review", agent_type: "human_review", payload: { title: "ok?" } };
const V1 = { id: "post", nodes: [{ node_id: "draft", agent_type: "draft", next_on_success: "review" }, REVIEW] };
/** Adds `publish` after the review. */
const V2 = {
  id: "post",
  nodes: [
    { node_id: "draft", agent_type: "draft", next_on_success: "review" },
    { ...REVIEW, next_on_success: "publish" },
    { node_id: "publish", agent_type: "publish" },
  ],
};
/** Removes the review. */
const V3 = { id: "post", nodes: [{ node_id: "draft", agent_type: "draft" }] };

/** Resolves once `count` events of the engine hold `predicate` (no sleeping). */
function events(engine: Engine, count: number, predicate: (e: RunEvent) => boolean): Promise<RunEvent[]> {
  const seen: RunEvent[] = [];
  return new Promise((resolve) => {
    const off = engine.subscribe((e) => {
      if (!predicate(e)) return;
      seen.push(e);
      if (seen.length === count) {
        off();
        resolve(seen);
      }
    });
  });
}

async function runsInReview(count: number) {
  const published: string[] = [];
  const { engine } = await testEngine({
    agents: {
      draft: () => ({ text: "hello" }),
      publish: (t) => {
        published.push(t.run_id);
        return { published: true };
      },
    },
  });
  await engine.registerWorkflow(V1);
  const waiting = events(engine, count, (e) => e.type === "review.requested");
  const runs = [];
  for (let i = 0; i < count; i++) runs.push(await engine.startRun("post"));
  await waiting;
  return { engine, published, ids: runs.map((r) => r.run_id).sort() };
}

/** What a run is: its version and each node's visit and state. */
async function shape(engine: Engine, runId: string) {
  const run = await engine.getRun(runId);
  return {
    version: run.workflow_version,
    status: run.status,
    nodes: run.nodes.map((n) => [n.node_id, n.visit, n.state]).sort(),
  };
}

describe("migrateRuns", () => {
  it("moves runs waiting in a review to a version that adds a node after it, which runs once they are approved", async () => {
    const { engine, published, ids } = await runsInReview(3);
    const v2 = await engine.registerWorkflow(V2);
    expect(v2).toMatchObject({ version: 2, created: true, upgradable: { active: 3, checked: 3, compatible: 3 } });

    const dry = await engine.migrateRuns({ workflow_id: "post", to_version: 2, dry_run: true });
    expect(dry.dry_run).toBe(true);
    expect(dry.moved.map((m) => m.run_id).sort()).toEqual(ids);
    expect(dry.moved.every((m) => m.from_version === 1)).toBe(true);
    expect(dry.incompatible).toEqual([]);
    for (const id of ids) expect((await shape(engine, id)).version).toBe(1);

    const answer = await engine.migrateRuns({ workflow_id: "post", to_version: 2 });
    expect(answer.dry_run).toBe(false);
    expect(answer.moved.map((m) => m.run_id).sort()).toEqual(ids);
    expect(answer.incompatible).toEqual([]);
    for (const id of ids) {
      expect(await shape(engine, id)).toEqual({
        version: 2,
        status: "RUNNING",
        nodes: [
          ["draft", 1, "SUCCEEDED"],
          ["publish", 1, "PENDING"],
          ["review", 1, "IN_REVIEW"],
        ],
      });
      const migrated = (await engine.listEvents(id)).filter((e) => e.type === "run.migrated");
      expect(migrated.map((e) => e.data)).toEqual([{ from_version: 1, to_version: 2, added: ["publish"] }]);
    }
    // Nothing older is left: a second call moves nothing.
    expect(await engine.migrateRuns({ workflow_id: "post", to_version: 2 })).toEqual({
      moved: [],
      incompatible: [],
      dry_run: false,
    });
    expect(published).toEqual([]);

    for (const id of ids) await engine.review(id, "review", { decision: "approve", by: "ann" });
    for (const id of ids) {
      const done = await engine.waitForRun(id);
      expect(done.status).toBe("SUCCEEDED");
      expect(done.workflow_version).toBe(2);
    }
    expect(published.sort()).toEqual(ids);
    // The run's output is its new sink's.
    expect((await engine.getRun(ids[0] as string)).output).toEqual({ publish: { published: true } });
  });

  it("refuses a version without the review, run by run with the reason, and leaves the runs as they were", async () => {
    const { engine, ids } = await runsInReview(2);
    const before = await Promise.all(ids.map((id) => shape(engine, id)));
    const v3 = await engine.registerWorkflow(V3);
    expect(v3.upgradable).toEqual({ active: 2, checked: 2, compatible: 0 });

    const reasons = [
      'node "draft" fired the edge draft → review (next_on_success), which the new version no longer has',
      'node "review" has a visit (IN_REVIEW) but the new version has no such node',
    ];
    for (const dry_run of [true, false]) {
      const answer = await engine.migrateRuns({ workflow_id: "post", to_version: 2, dry_run });
      expect(answer.moved).toEqual([]);
      expect(answer.incompatible.sort((a, b) => a.run_id.localeCompare(b.run_id))).toEqual(
        ids.map((run_id) => ({ run_id, from_version: 1, reasons })),
      );
    }
    expect(await Promise.all(ids.map((id) => shape(engine, id)))).toEqual(before);
    for (const id of ids) expect((await engine.listEvents(id)).some((e) => e.type === "run.migrated")).toBe(false);
    // Still on version 1: the review decides as before and the run ends there.
    await engine.review(ids[0] as string, "review", { decision: "approve" });
    expect(await engine.waitForRun(ids[0] as string)).toMatchObject({ status: "SUCCEEDED", workflow_version: 1 });
  });

  it("moves only the runs named or of from_version, and refuses a run whose attempt is running until it ends", async () => {
    let release: (() => void) | undefined;
    let started: (() => void) | undefined;
    const running = new Promise<void>((r) => {
      started = r;
    });
    const { engine } = await testEngine({
      agents: {
        slow: () =>
          new Promise((resolve) => {
            release = () => resolve({ ok: true });
            started?.();
          }),
        fast: () => ({ ok: true }),
      },
    });
    const wf = (extra: NodeInput[]) => ({
      id: "job",
      nodes: [{ node_id: "work", agent_type: "slow", next_on_success: "hold" }, REVIEW_AS("hold"), ...extra],
    });
    await engine.registerWorkflow(wf([]));
    const busy = await engine.startRun("job");
    await running;
    const v2 = await engine.registerWorkflow(wf([{ node_id: "extra", agent_type: "fast", depends_on: ["hold"] }]));
    expect(v2.upgradable).toEqual({ active: 1, checked: 1, compatible: 0 });
    const refused = await engine.migrateRuns({ workflow_id: "job", to_version: 2, run_ids: [busy.run_id] });
    expect(refused).toEqual({
      moved: [],
      incompatible: [
        { run_id: busy.run_id, from_version: 1, reasons: ['node "work" has an attempt running; migrate once it ends'] },
      ],
      dry_run: false,
    });
    const held = events(engine, 1, (e) => e.type === "review.requested" && e.run_id === busy.run_id);
    release?.();
    await held;
    // from_version 1 names its version; a version it is not at moves nothing.
    const v3 = await engine.registerWorkflow(wf([{ node_id: "other", agent_type: "fast", depends_on: ["hold"] }]));
    expect(v3.version).toBe(3);
    expect(await engine.migrateRuns({ workflow_id: "job", to_version: 3, from_version: 2 })).toMatchObject({
      moved: [],
    });
    const moved = await engine.migrateRuns({
      workflow_id: "job",
      to_version: 2,
      from_version: 1,
      run_ids: [busy.run_id],
    });
    expect(moved.moved).toEqual([{ run_id: busy.run_id, from_version: 1 }]);
    // Named again: at version 2 it is not older than 2.
    expect(
      (await engine.migrateRuns({ workflow_id: "job", to_version: 2, run_ids: [busy.run_id] })).incompatible,
    ).toEqual([{ run_id: busy.run_id, from_version: 2, reasons: ["the run is at version 2 already"] }]);
    await engine.review(busy.run_id, "hold", { decision: "approve" });
    const done = await engine.getRun((await engine.waitForRun(busy.run_id)).run_id);
    expect(done.nodes.find((n) => n.node_id === "extra")?.state).toBe("SUCCEEDED");
  });

  it("refuses an approval whose edges were worked out against the version the run had before it moved", async () => {
    let moveFirst: (() => Promise<unknown>) | null = null;
    const { engine } = await testEngine({
      agents: { draft: () => ({ text: "hello" }), publish: () => ({ published: true }) },
      // Runs between working out the approval's edges and applying them: the run moves then.
      decideHooks: {
        route: async () => {
          const move = moveFirst;
          moveFirst = null;
          if (move) await move();
          return ["publish"];
        },
      },
    });
    const review = { ...REVIEW, decide: "route" };
    const nodes = (next: string[]) => [
      { node_id: "draft", agent_type: "draft", next_on_success: "review" },
      { ...review, next_on_success: next },
      { node_id: "publish", agent_type: "publish" },
      { node_id: "archive", agent_type: "publish" },
    ];
    await engine.registerWorkflow({ id: "post", nodes: nodes(["publish"]) });
    const waiting = events(engine, 1, (e) => e.type === "review.requested");
    const run = await engine.startRun("post");
    await waiting;
    await engine.registerWorkflow({ id: "post", nodes: nodes(["publish", "archive"]) });
    moveFirst = () => engine.migrateRuns({ workflow_id: "post", to_version: 2 });
    const refused = await engine.review(run.run_id, "review", { decision: "approve" }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConflictError);
    expect((refused as Error).message).toContain("moved to version 2 of its workflow while the decision was made");
    expect((await shape(engine, run.run_id)).nodes).toContainEqual(["review", 1, "IN_REVIEW"]);
    // Decided again, against version 2.
    await engine.review(run.run_id, "review", { decision: "approve" });
    expect(await engine.waitForRun(run.run_id)).toMatchObject({ status: "SUCCEEDED", workflow_version: 2 });
  });

  it("refuses bad options, an unknown version and a run of another workflow", async () => {
    const { engine, ids } = await runsInReview(1);
    await expect(engine.migrateRuns({ workflow_id: "post", to_version: 9 })).rejects.toBeInstanceOf(NotFoundError);
    await expect(engine.migrateRuns({ workflow_id: "post", to_version: 1, from_version: 1 })).rejects.toBeInstanceOf(
      ValidationError,
    );
    await expect(engine.migrateRuns({ workflow_id: "post", to_version: 0 })).rejects.toBeInstanceOf(ValidationError);
    await engine.registerWorkflow({ id: "other", nodes: [{ node_id: "x", agent_type: "draft" }] });
    await expect(
      engine.migrateRuns({ workflow_id: "other", to_version: 1, run_ids: [ids[0] as string] }),
    ).rejects.toBeInstanceOf(NotFoundError);
    // A finished run named is answered with why it stays.
    await engine.registerWorkflow(V2);
    const finished = await engine.startRun("other", {});
    await engine.waitForRun(finished.run_id);
    await engine.registerWorkflow({
      id: "other",
      nodes: [
        { node_id: "x", agent_type: "draft" },
        { node_id: "y", agent_type: "draft" },
      ],
    });
    expect(
      (await engine.migrateRuns({ workflow_id: "other", to_version: 2, run_ids: [finished.run_id] })).incompatible,
    ).toEqual([
      { run_id: finished.run_id, from_version: 1, reasons: ["the run is SUCCEEDED: only a RUNNING run moves"] },
    ]);
  });
});

function REVIEW_AS(node_id: string) {
  return { ...REVIEW, node_id };
}
