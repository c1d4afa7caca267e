import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/index.js";
import { onPostgres, testEngine } from "../helpers.js";

describe("listRuns search", () => {
  const DAY = 86_400_000;
  /** Timers slow enough that moving the clock by days leaves the engine alive (as in prune.test.ts). */
  const SLOW_TIMERS = { sweepIntervalMs: DAY / 4, heartbeatIntervalMs: DAY, engineTimeoutMs: 30 * DAY };

  async function engineWithRuns() {
    const { engine, clock, database } = await testEngine({
      agents: { echo: (task) => ({ echoed: task.payload }) },
      ...SLOW_TIMERS,
    });
    await engine.registerWorkflow({
      id: "echo",
      nodes: [{ node_id: "a", agent_type: "echo", payload: { said: "{{ input.text }}" } }],
    });
    await engine.registerWorkflow({ id: "other", nodes: [{ node_id: "a", agent_type: "echo" }] });
    const texts = ["Hello Berlin", 'a "quoted" 100% match_x', "back\\slash café", "nothing here"];
    const runs = [];
    for (const text of texts) {
      const run = await engine.startRun("echo", { input: { text } });
      await engine.waitForRun(run.run_id);
      runs.push(run);
      await clock.advance(1_000);
    }
    const other = await engine.startRun("other", { input: { text: "Hello Berlin" } });
    await engine.waitForRun(other.run_id);
    return { engine, clock, database, runs, other };
  }

  it("finds text in input or output, case-insensitively, with hostile characters taken literally", async () => {
    const { engine, runs, other } = await engineWithRuns();
    const ids = async (q: string, more = {}) => (await engine.listRuns({ q, ...more })).map((r) => r.run_id);
    expect(await ids("berlin")).toEqual([other.run_id, runs[0]?.run_id]);
    expect(await ids('"quoted"')).toEqual([runs[1]?.run_id]);
    expect(await ids("100%")).toEqual([runs[1]?.run_id]);
    expect(await ids("0% m")).toEqual([runs[1]?.run_id]);
    expect(await ids("h_x")).toEqual([runs[1]?.run_id]);
    expect(await ids("%%%")).toEqual([]);
    expect(await ids("___")).toEqual([]);
    expect(await ids("k\\s")).toEqual([runs[2]?.run_id]);
    expect(await ids("CAFÉ")).toEqual([runs[2]?.run_id]);
    expect(await ids("' OR 1=1 --")).toEqual([]);
    expect(await ids('"))) OR *')).toEqual([]);
    // Combined with the other filters, the scope and the cursor.
    expect(await ids("berlin", { workflow_id: "echo" })).toEqual([runs[0]?.run_id]);
    expect(await ids("berlin", { workflow_ids: ["other"] })).toEqual([other.run_id]);
    expect(await ids("berlin", { workflow_ids: [] })).toEqual([]);
    expect(await ids("berlin", { status: "FAILED" })).toEqual([]);
    const page1 = await engine.listRuns({ q: "berlin", limit: 1 });
    const page2 = await engine.listRuns({ q: "berlin", limit: 1, before: page1[0]?.run_id });
    expect([...page1, ...page2].map((r) => r.run_id)).toEqual([other.run_id, runs[0]?.run_id]);
    // In the output only: the agent echoes its payload as { echoed: ... }.
    expect((await ids("echoed")).length).toBe(5);
  });

  it.skipIf(onPostgres)("finds text the index has not taken yet, read from the runs themselves", async () => {
    const { engine, runs, database } = await engineWithRuns();
    // Everything back in the queue and nothing in the index (migration 013): as after a burst of
    // commits the store has not indexed yet.
    const db = new Database(database.replace(/^sqlite:/, ""));
    db.exec(`INSERT OR IGNORE INTO run_text_queue (k) SELECT 2 * id FROM run_text_ids;
             INSERT OR IGNORE INTO run_text_queue (k) SELECT 2 * id + 1 FROM run_text_ids;
             INSERT INTO run_text (run_text) VALUES ('delete-all');`);
    expect(db.prepare("SELECT count(*) AS n FROM run_text WHERE run_text MATCH '\"berlin\"'").get()).toEqual({ n: 0 });
    db.close();
    const ids = async (q: string) => (await engine.listRuns({ q, workflow_id: "echo" })).map((r) => r.run_id);
    expect(await ids("berlin")).toEqual([runs[0]?.run_id]);
    expect(await ids("CAFÉ")).toEqual([runs[2]?.run_id]);
    expect(await ids("k\\s")).toEqual([runs[2]?.run_id]);
    expect(await ids("100%")).toEqual([runs[1]?.run_id]);
    expect(await ids("%%%")).toEqual([]);
    expect((await ids("echoed")).length).toBe(4);
  });

  it("filters by id prefix, a part of the id and creation time", async () => {
    const { engine, runs } = await engineWithRuns();
    const first = runs[0];
    const second = runs[1];
    if (!first || !second) throw new Error("no runs");
    const byPrefix = await engine.listRuns({ id_prefix: first.run_id.slice(0, 30) });
    expect(byPrefix.map((r) => r.run_id)).toEqual([first.run_id]);
    expect(await engine.listRuns({ id_prefix: "zzz" })).toEqual([]);
    // Any part of the id, in any case: the tail the admin page shows, or a piece of the middle.
    const ids = async (part: string) => (await engine.listRuns({ id_contains: part })).map((r) => r.run_id);
    expect(await ids(second.run_id.slice(-12))).toEqual([second.run_id]);
    expect(await ids(second.run_id.slice(-12).toUpperCase())).toEqual([second.run_id]);
    expect(await ids(second.run_id.slice(14, 30))).toEqual([second.run_id]);
    expect(await ids(first.run_id)).toEqual([first.run_id]);
    // LIKE's wildcards are characters like any other: no id holds them.
    expect(await ids("%")).toEqual([]);
    expect(await ids("_")).toEqual([]);
    expect(await ids("\\")).toEqual([]);
    expect(await ids(`${second.run_id.slice(-6)}x`)).toEqual([]);
    const between = await engine.listRuns({
      workflow_id: "echo",
      created_after: second.created_at,
      created_before: second.created_at + 1,
    });
    expect(between.map((r) => r.run_id)).toEqual([second.run_id]);
    const before = await engine.listRuns({ workflow_id: "echo", created_before: second.created_at });
    expect(before.map((r) => r.run_id)).toEqual([first.run_id]);
  });

  it("forgets a pruned run's text", async () => {
    const { engine, clock, database } = await engineWithRuns();
    await clock.advance(2 * DAY);
    expect(await engine.pruneRuns({ olderThan: "1d" })).toBe(5);
    expect(await engine.listRuns({ q: "berlin" })).toEqual([]);
    if (!onPostgres) {
      // The index's rows went with the runs (migration 012's delete trigger).
      const db = new Database(database.replace(/^sqlite:/, ""), { readonly: true });
      expect(db.prepare("SELECT count(*) AS n FROM run_text_ids").get()).toEqual({ n: 0 });
      expect(db.prepare("SELECT count(*) AS n FROM run_text WHERE run_text MATCH '\"berlin\"'").get()).toEqual({
        n: 0,
      });
      db.close();
    }
    // Runs started after the prune are found again.
    const fresh = await engine.startRun("echo", { input: { text: "Berlin again" } });
    await engine.waitForRun(fresh.run_id);
    expect((await engine.listRuns({ q: "berlin" })).map((r) => r.run_id)).toEqual([fresh.run_id]);
  });

  it("refuses a q shorter than 3 characters", async () => {
    const { engine } = await testEngine();
    await expect(engine.listRuns({ q: "ab" })).rejects.toThrow(ValidationError);
    await expect(engine.listRuns({ q: "ab" })).rejects.toThrow(/at least 3 characters/);
  });

  it("finds a run by its output, and leaves a map's item runs out", async () => {
    const { engine } = await testEngine({
      agents: {
        plan: () => ({ items: ["zanzibar-1", "zanzibar-2"] }),
        square: (task) => ({ seen: (task.payload as { v: string }).v }),
        unsquare: () => ({}),
      },
    });
    await engine.registerWorkflow({
      id: "fanout",
      nodes: [
        { node_id: "plan", agent_type: "plan" },
        {
          node_id: "each",
          agent_type: "map",
          depends_on: ["plan"],
          payload: {
            items: "{{ nodes.plan.output.items }}",
            // Items that undo are runs of the map's item workflow (an agent's other items are rows).
            each: { agent_type: "square", payload: { v: "{{ item }}" }, compensation: { agent_type: "unsquare" } },
          },
        },
      ],
    });
    const run = await engine.startRun("fanout", { input: {} });
    expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
    // The parent's output holds the items' outputs: found by it; the item runs (inputs
    // "zanzibar-1", "zanzibar-2") are not, even by their item workflow's id.
    expect((await engine.listRuns({ q: "zanzibar" })).map((r) => r.run_id)).toEqual([run.run_id]);
    const items = await engine.listRuns({ workflow_id: "fanout/each" });
    expect(items).toHaveLength(2);
    expect(await engine.listRuns({ workflow_id: "fanout/each", q: "zanzibar" })).toEqual([]);
  });
});
