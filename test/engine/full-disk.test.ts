/**
 * A full disk (issue 14 item 8), for real: the SQLite file lives on a small tmpfs that the test
 * fills with a filler file. A transient storage error refuses new work with UnavailableError
 * (nothing written), keeps the results that arrive meanwhile, and applies them once space is
 * freed, without waiting for their attempts to time out (the manual clock never moves).
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { ManualClock, type Task, UnavailableError } from "../../src/index.js";
import { mountSmallDisk, type SmallDisk } from "../fixtures/full-disk.js";
import { describeSqlite, nextEvent, onPostgres, testEngine } from "../helpers.js";

const TWO = {
  id: "two",
  nodes: [
    { node_id: "a", agent_type: "work" },
    { node_id: "b", agent_type: "work", depends_on: ["a"] },
  ],
};

let disk: SmallDisk | null = null;
let refused = "";
beforeAll(() => {
  if (onPostgres) return; // a SQLite file's disk; PostgreSQL's disk is the server's
  const mounted = mountSmallDisk("8m");
  if ("refused" in mounted) refused = mounted.refused;
  else disk = mounted;
});
afterAll(() => disk?.unmount());

/** An in-process agent that holds its attempt until `release()`. */
function heldAgent() {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const calls: Task[] = [];
  const work = async (t: Task) => {
    calls.push(t);
    if (t.node_id === "a") await released;
    return { node: t.node_id };
  };
  return { work, release, calls };
}

describeSqlite("a full disk under a SQLite engine", () => {
  it("refuses new work with UnavailableError, keeps results that arrive, and applies them once space returns", async (ctx) => {
    if (!disk) return ctx.skip(`no tmpfs for a full disk: ${refused}`);
    const { work, release, calls } = heldAgent();
    const { engine } = await testEngine({ database: `sqlite:${disk.dir}/skein.db`, agents: { work } });
    await engine.registerWorkflow(TWO);
    const started = nextEvent(engine, (e) => e.type === "node.started");
    const run = await engine.startRun("two");
    await started;
    expect(engine.unavailable).toBeNull();

    disk.fill();
    ctx.onTestFinished(() => disk?.free());
    release(); // a's result arrives while nothing can be written
    const refusal = await engine.startRun("two").catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(UnavailableError);
    expect((refusal as UnavailableError).message).toMatch(/full.*retry later/);
    expect(engine.unavailable).toBeInstanceOf(UnavailableError);
    // Answered at once while the disk stays full: nothing of it is written.
    await expect(engine.startRun("two")).rejects.toBeInstanceOf(UnavailableError);
    expect((await engine.listRuns({})).map((r) => r.run_id)).toEqual([run.run_id]);

    disk.free();
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    // a's first attempt's result was kept and applied: no timeout, no second attempt.
    expect(done.nodes.map((n) => [n.node_id, n.attempt, n.failures])).toEqual([
      ["a", 1, 0],
      ["b", 1, 0],
    ]);
    expect(calls.map((t) => t.node_id)).toEqual(["a", "b"]);
    expect(engine.unavailable).toBeNull();
    const after = await engine.startRun("two");
    expect((await engine.waitForRun(after.run_id)).status).toBe("SUCCEEDED");
  });

  it("closes within its timeout while the disk stays full; the next engine re-runs the attempt", async (ctx) => {
    if (!disk) return ctx.skip(`no tmpfs for a full disk: ${refused}`);
    const database = `sqlite:${disk.dir}/close.db`;
    const first = heldAgent();
    const { engine } = await testEngine({ database, agents: { work: first.work } });
    await engine.registerWorkflow(TWO);
    const started = nextEvent(engine, (e) => e.type === "node.started");
    const run = await engine.startRun("two");
    await started;
    disk.fill();
    try {
      first.release();
      await expect(engine.startRun("two")).rejects.toBeInstanceOf(UnavailableError);
      // Its result cannot be written; close gives up on it instead of retrying for ever.
      await engine.close({ timeoutMs: 100 });
    } finally {
      disk.free();
    }
    const second = heldAgent();
    second.release();
    // The first engine could not record that it stopped (the disk was full): a minute later its
    // heartbeat is stale, and the next engine takes over and recovers its attempt.
    const clock = new ManualClock(Date.UTC(2026, 0, 1) + 60_000);
    const { engine: next } = await testEngine({ database, clock, agents: { work: second.work } });
    const done = await next.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[0]).toMatchObject({ attempt: 2, interruptions: 1 });
  });
});
