/**
 * Several engines on one PostgreSQL schema: a visit one engine makes ready and has no handler
 * for is started by another at once, woken by the first one's NOTIFY, which names the runs (the
 * second locks and reads them as its transaction begins). The manual clock never advances, so
 * no sweep can stand in for the notification.
 */
import { describe, expect, it } from "vitest";
import { onPostgres, testEngine } from "../helpers.js";

const HANDOFF = {
  id: "handoff",
  nodes: [
    { node_id: "first", agent_type: "first_type" },
    { node_id: "second", agent_type: "second_type", depends_on: ["first"] },
  ],
};

describe.skipIf(!onPostgres)("engines sharing a PostgreSQL database", () => {
  it("start a visit another engine made ready, told by its notification", async () => {
    const seen: string[] = [];
    const a = await testEngine({ agents: { first_type: () => ({ by: "a" }) } });
    const b = await testEngine({
      database: a.database,
      agents: {
        second_type: (task) => {
          seen.push(task.run_id);
          return { by: "b", first: task.deps.first?.output ?? null };
        },
      },
    });
    await a.engine.registerWorkflow(HANDOFF);
    const runs = await Promise.all(Array.from({ length: 20 }, () => a.engine.startRun(HANDOFF.id)));
    const ended = await Promise.all(runs.map((run) => b.engine.waitForRun(run.run_id)));

    expect(ended.map((r) => r.status)).toEqual(runs.map(() => "SUCCEEDED"));
    expect(ended.map((r) => r.nodes.find((n) => n.node_id === "second")?.output)).toEqual(
      runs.map(() => ({ by: "b", first: { by: "a" } })),
    );
    expect([...seen].sort()).toEqual(runs.map((r) => r.run_id).sort());
  });

  it("start each visit once when several engines hear of it", async () => {
    const a = await testEngine({ agents: { first_type: () => ({ by: "a" }) } });
    let started = 0;
    const b = await testEngine({
      database: a.database,
      agents: {
        second_type: () => {
          started += 1;
          return { by: "b" };
        },
      },
    });
    const c = await testEngine({ database: a.database, agents: { second_type: () => ({ by: "c" }) } });
    await a.engine.registerWorkflow(HANDOFF);
    // b and c both hear of every ready `second`: each visit runs once, by one of them.
    const runs = await Promise.all(Array.from({ length: 20 }, () => a.engine.startRun(HANDOFF.id)));
    // The engine that ran `second` ends the run and hears of it (the clock stands still: no polling).
    const ended = await Promise.all(
      runs.map((run) => Promise.race([b.engine.waitForRun(run.run_id), c.engine.waitForRun(run.run_id)])),
    );
    const second = ended.map((r) => r.nodes.find((n) => n.node_id === "second"));
    expect(second.map((n) => [n?.state, n?.attempt])).toEqual(runs.map(() => ["SUCCEEDED", 1]));
    expect(second.filter((n) => (n?.output as { by?: string } | null)?.by === "b")).toHaveLength(started);
  });
});
