/**
 * Bulk actions by filter (DESIGN §16): engine.bulkRuns cancels or retries every run a filter
 * matches that the action applies to, a dry run first counts them, a cap bounds a call (`more`
 * says to call again), and a run that changed since it was read is refused with the reason.
 */
import { describe, expect, it } from "vitest";
import { bulkRuns } from "../../src/engine/bulk.js";
import { type Engine, NonRetryableError, type Run, ValidationError } from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";

/** A node no handler serves: its runs stay RUNNING until cancelled. */
const WAITS = { id: "waits", nodes: [{ node_id: "w", agent_type: "outside" }] };
/** A node that fails for good while `broken.now`, and succeeds once it is not. */
const FLAKY = { id: "flaky", nodes: [{ node_id: "f", agent_type: "flaky" }] };
const OTHER = { id: "other", nodes: [{ node_id: "o", agent_type: "flaky" }] };

async function setUp() {
  const broken = { now: true };
  const { engine } = await testEngine({
    agents: {
      flaky: () => {
        if (broken.now) throw new NonRetryableError("broken for now");
        return { ok: true };
      },
    },
  });
  for (const w of [WAITS, FLAKY, OTHER]) await engine.registerWorkflow(w);
  return { engine, broken };
}

async function start(engine: Engine, workflow: string, n: number, tags?: Record<string, string>): Promise<Run[]> {
  const runs: Run[] = [];
  for (let i = 0; i < n; i++) runs.push(await engine.startRun(workflow, tags ? { tags } : {}));
  return runs;
}

async function failed(engine: Engine, workflow: string, n: number, tags?: Record<string, string>): Promise<Run[]> {
  const runs = await start(engine, workflow, n, tags);
  for (const r of runs) expect((await engine.waitForRun(r.run_id)).status).toBe("FAILED");
  return runs;
}

async function statuses(engine: Engine, runs: Run[]): Promise<string[]> {
  return Promise.all(runs.map(async (r) => (await engine.getRun(r.run_id)).status));
}

const ids = (runs: Run[]) => runs.map((r) => r.run_id);

describe("bulkRuns", () => {
  it("cancels by tag: a dry run counts and changes nothing, then exactly the tagged RUNNING runs are cancelled", async () => {
    const { engine } = await setUp();
    const tagged = await start(engine, "waits", 5, { batch: "b1" });
    const taggedFailed = await failed(engine, "flaky", 2, { batch: "b1" });
    const otherTag = await start(engine, "waits", 2, { batch: "b2" });
    const untagged = await start(engine, "waits", 3);
    const filter = { tags: { batch: "b1" } };

    const dry = await engine.bulkRuns({ filter, action: { kind: "cancel" }, dry_run: true });
    expect(dry).toMatchObject({ matched: 5, applied: 0, refused: [], more: false, dry_run: true, next_before: null });
    expect([...dry.run_ids].sort()).toEqual(ids(tagged).sort());
    expect(await statuses(engine, [...tagged, ...otherTag, ...untagged])).toEqual(Array(10).fill("RUNNING"));

    const done = await engine.bulkRuns({ filter, action: { kind: "cancel", reason: "batch withdrawn" } });
    expect(done).toMatchObject({ matched: 5, applied: 5, refused: [], more: false, dry_run: false });
    expect(await statuses(engine, tagged)).toEqual(Array(5).fill("CANCELLED"));
    expect((await engine.getRun(tagged[0]?.run_id as string)).error?.message).toBe("batch withdrawn");
    expect(await statuses(engine, [...otherTag, ...untagged])).toEqual(Array(5).fill("RUNNING"));
    expect(await statuses(engine, taggedFailed)).toEqual(["FAILED", "FAILED"]);

    // Again: nothing left to cancel.
    expect(await engine.bulkRuns({ filter, action: { kind: "cancel" } })).toMatchObject({ matched: 0, applied: 0 });
  });

  it("pauses and resumes by tag, child runs with their parents; a dry run counts only what is not paused yet", async () => {
    const { engine } = await setUp();
    await engine.registerWorkflow({
      id: "parent",
      nodes: [{ node_id: "sub", agent_type: "workflow", payload: { workflow_id: "waits" } }],
    });
    const childStarted = nextEvent(engine, (e) => e.type === "child.started");
    const parent = await engine.startRun("parent", { tags: { batch: "p1" } });
    const child = (await childStarted).data.run_id as string;
    const tagged = await start(engine, "waits", 3, { batch: "p1" });
    const other = await start(engine, "waits", 2, { batch: "p2" });
    const filter = { tags: { batch: "p1" } };

    expect(await engine.bulkRuns({ filter, action: { kind: "pause" }, dry_run: true })).toMatchObject({ matched: 5 });
    const paused = await engine.bulkRuns({ filter, action: { kind: "pause", reason: "outage", by: "ops" } });
    expect(paused).toMatchObject({ matched: 5, applied: 5, refused: [] });
    const pausedIds = (await engine.listRuns({ paused: true })).map((r) => r.run_id).sort();
    expect(pausedIds).toEqual([parent.run_id, child, ...ids(tagged)].sort());
    expect((await engine.getRun(child)).paused).toMatchObject({ by: "ops", reason: "outage" });
    expect(await engine.bulkRuns({ filter, action: { kind: "pause" }, dry_run: true })).toMatchObject({ matched: 0 });
    expect((await engine.getRun(other[0]?.run_id as string)).paused).toBeNull();

    expect(await engine.bulkRuns({ filter: { paused: true }, action: { kind: "resume" } })).toMatchObject({
      matched: 5,
      applied: 5,
    });
    expect(await engine.listRuns({ paused: true })).toEqual([]);
  });

  it("acts on top-level runs only: a child run carrying its parent's tags follows its parent", async () => {
    const { engine } = await setUp();
    await engine.registerWorkflow({
      id: "parent",
      nodes: [{ node_id: "sub", agent_type: "workflow", payload: { workflow_id: "waits" } }],
    });
    // The child's first node is ready once its run started: a node.ready of the child's node.
    const childReady = nextEvent(engine, (e) => e.type === "node.ready" && e.node_id === "w");
    const parent = await engine.startRun("parent", { tags: { batch: "p" } });
    await childReady;
    const children = await engine.listRuns({ workflow_id: "waits", tags: { batch: "p" } });
    expect(children).toHaveLength(1);
    const answer = await engine.bulkRuns({ filter: { tags: { batch: "p" } }, action: { kind: "cancel" } });
    expect(answer).toMatchObject({ matched: 1, applied: 1, refused: [], run_ids: [parent.run_id] });
    expect(await statuses(engine, [parent, ...children])).toEqual(["CANCELLED", "CANCELLED"]);
  });

  it("stops at the cap and says more matched; calls again until none is left", async () => {
    const { engine } = await setUp();
    const runs = await start(engine, "waits", 7);
    // In listRuns' order (newest first; the manual clock gives them one creation time).
    const listed = ids(await engine.listRuns({ workflow_id: "waits" }));
    const action = { kind: "cancel" } as const;
    const dry = await engine.bulkRuns({ filter: { workflow_id: "waits" }, action, dry_run: true, cap: 3 });
    expect(dry).toMatchObject({ matched: 3, more: true, run_ids: listed.slice(0, 3), next_before: listed[2] });
    // The cursor goes on past those.
    const rest = await engine.bulkRuns({
      filter: { workflow_id: "waits", before: dry.next_before as string },
      action,
      dry_run: true,
      cap: 10,
    });
    expect(rest).toMatchObject({ matched: 4, more: false, run_ids: listed.slice(3) });

    const answers = [];
    for (;;) {
      const answer = await engine.bulkRuns({ filter: { workflow_id: "waits" }, action, cap: 3 });
      answers.push([answer.applied, answer.more]);
      if (!answer.more) break;
    }
    expect(answers).toEqual([
      [3, true],
      [3, true],
      [1, false],
    ]);
    expect(await statuses(engine, runs)).toEqual(Array(7).fill("CANCELLED"));

    for (const cap of [0, 10_001, 2.5]) {
      await expect(engine.bulkRuns({ filter: {}, action, cap })).rejects.toBeInstanceOf(ValidationError);
    }
  });

  it("retries the FAILED runs of one workflow; others are untouched", async () => {
    const { engine, broken } = await setUp();
    const flaky = await failed(engine, "flaky", 3);
    const other = await failed(engine, "other", 2);
    const running = await start(engine, "waits", 1);
    broken.now = false;
    // A status the action does not apply to matches nothing.
    const none = await engine.bulkRuns({
      filter: { workflow_id: "flaky", status: "RUNNING" },
      action: { kind: "retry" },
    });
    expect(none.matched).toBe(0);

    const answer = await engine.bulkRuns({ filter: { workflow_id: "flaky" }, action: { kind: "retry" } });
    expect(answer).toMatchObject({ matched: 3, applied: 3, refused: [], more: false });
    for (const r of flaky) expect((await engine.waitForRun(r.run_id)).status).toBe("SUCCEEDED");
    expect(await statuses(engine, other)).toEqual(["FAILED", "FAILED"]);
    expect(await statuses(engine, running)).toEqual(["RUNNING"]);
  });

  it("filters by workflow version, which needs the workflow", async () => {
    const { engine } = await setUp();
    const v1 = await start(engine, "waits", 2);
    await engine.registerWorkflow({ ...WAITS, description: "v2" });
    const v2 = await start(engine, "waits", 2);
    expect(v2[0]?.workflow_version).toBe(2);
    const answer = await engine.bulkRuns({
      filter: { workflow_id: "waits", workflow_version: 1 },
      action: { kind: "cancel" },
    });
    expect(answer).toMatchObject({ matched: 2, applied: 2 });
    expect(await statuses(engine, [...v1, ...v2])).toEqual(["CANCELLED", "CANCELLED", "RUNNING", "RUNNING"]);
    const refused = await engine
      .bulkRuns({ filter: { workflow_version: 1 }, action: { kind: "cancel" } })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ValidationError);
    expect((refused as ValidationError).problems.map((p) => p.path)).toEqual(["filter.workflow_version"]);
  });

  it("refuses, run by run with the reason, what the engine refuses: a run that changed since it was read, a node it lacks", async () => {
    const { engine } = await setUp();
    const runs = await start(engine, "waits", 4);
    const [first] = runs;
    // Another caller cancels one run after the page was read, before the bulk call reaches it.
    const racing = {
      listRuns: async (filter: Parameters<Engine["listRuns"]>[0]) => {
        const page = await engine.listRuns(filter);
        if (first) await engine.cancelRun(first.run_id, { reason: "by hand" });
        return page;
      },
      cancelRun: engine.cancelRun.bind(engine),
      retryRun: engine.retryRun.bind(engine),
      pauseRun: engine.pauseRun.bind(engine),
      resumeRun: engine.resumeRun.bind(engine),
      forkRun: engine.forkRun.bind(engine),
      migrateRuns: engine.migrateRuns.bind(engine),
    };
    const answer = await bulkRuns(racing, { filter: { workflow_id: "waits" }, action: { kind: "cancel" } });
    expect(answer).toMatchObject({ matched: 4, applied: 3 });
    expect(answer.refused).toEqual([
      { run_id: first?.run_id, reason: `run ${first?.run_id} already ended CANCELLED; nothing to cancel` },
    ]);
    expect((await engine.getRun(first?.run_id as string)).error?.message).toBe("by hand");

    // A retry from a node one workflow has and the other lacks.
    const flaky = await failed(engine, "flaky", 1);
    const other = await failed(engine, "other", 1);
    const retried = await engine.bulkRuns({ filter: {}, action: { kind: "retry", from: "f", force: true } });
    expect(retried.matched).toBe(2 + 4); // the four cancelled ones too
    expect(retried.refused.map((r) => r.run_id).sort()).toEqual([other[0]?.run_id, ...ids(runs)].sort());
    expect(retried.refused[0]?.reason).toMatch(/"f"/);
    expect(await statuses(engine, flaky)).not.toEqual(["FAILED"]);
    expect(await statuses(engine, other)).toEqual(["FAILED"]);
  });
});

describe("bulkRuns: fork and migrate", () => {
  it("forks every run a filter matches from one node, and moves the runs of an old version, refusing each incompatible one with its reasons", async () => {
    const { engine } = await testEngine({ agents: { step: (t) => ({ n: t.node_id }) } });
    const v1 = {
      id: "flow",
      nodes: [
        { node_id: "a", agent_type: "step", next_on_success: "gate" },
        { node_id: "gate", agent_type: "human_review", payload: { title: "ok?" } },
      ],
    };
    await engine.registerWorkflow(v1);
    let requested = 0;
    const reviewing = new Promise<void>((resolve) => {
      const off = engine.subscribe((e) => {
        if (e.type === "review.requested" && ++requested === 3) {
          off();
          resolve();
        }
      });
    });
    const waiting = await start(engine, "flow", 3, { batch: "m" });
    await reviewing;

    const forks = await engine.bulkRuns({
      filter: { tags: { batch: "m" } },
      action: { kind: "fork", from: "a", input: { again: true } },
    });
    expect(forks).toMatchObject({ matched: 3, applied: 3, refused: [] });
    const forked = (await engine.listRuns({ workflow_id: "flow" })).filter((r) => r.forked_from !== null);
    expect(forked.map((r) => r.forked_from?.run_id).sort()).toEqual(ids(waiting).sort());
    expect(forked.every((r) => JSON.stringify(r.input) === '{"again":true}')).toBe(true);

    // v2 adds a node after the review: every waiting run of v1 can move. One run of v1 is moved
    // first by hand; the bulk call then moves the rest and skips what is on v2 already.
    const { version } = await engine.registerWorkflow({
      ...v1,
      nodes: [
        { node_id: "a", agent_type: "step", next_on_success: "gate" },
        { node_id: "gate", agent_type: "human_review", payload: { title: "ok?" }, next_on_success: "after" },
        { node_id: "after", agent_type: "step" },
      ],
    });
    const missing = await engine
      .bulkRuns({ filter: {}, action: { kind: "migrate", to_version: version } })
      .catch((e) => e);
    expect(missing).toBeInstanceOf(ValidationError);
    const dry = await engine.bulkRuns({
      filter: { workflow_id: "flow", tags: { batch: "m" } },
      action: { kind: "migrate", to_version: version },
      dry_run: true,
    });
    expect(dry.matched).toBe(6); // the three runs and their three forks, all RUNNING on v1
    const moved = await engine.bulkRuns({
      filter: { workflow_id: "flow", tags: { batch: "m" } },
      action: { kind: "migrate", to_version: version },
    });
    expect(moved).toMatchObject({ matched: 6, applied: 6, refused: [] });
    for (const r of waiting) expect((await engine.getRun(r.run_id)).workflow_version).toBe(version);

    // v3 removes the review: each run still waiting in it is refused with the reason.
    const v3 = await engine.registerWorkflow({ ...v1, nodes: [{ node_id: "a", agent_type: "step" }] });
    const refused = await engine.bulkRuns({
      filter: { workflow_id: "flow", tags: { batch: "m" } },
      action: { kind: "migrate", to_version: v3.version },
    });
    expect(refused).toMatchObject({ matched: 6, applied: 0 });
    expect(refused.refused[0]?.reason).toMatch(
      /node "gate" has a visit \(IN_REVIEW\) but the new version has no such node/,
    );
  });
});
