/**
 * A map node's progress in `skein status` and `skein run`'s live table: `map 5/10: 3 succeeded,
 * 2 failed, 4 running, 1 pending`. Mid-map in process (items held by agents the test releases,
 * never by sleeping); then the built CLI on a finished run.
 */
import { describe, expect, it } from "vitest";
import { RunProgress, renderTable } from "../../src/cli/live-view.js";
import { mapNote } from "../../src/cli/map-note.js";
import { runReport } from "../../src/cli/summary.js";
import { NonRetryableError, type Task } from "../../src/index.js";
import { testEngine } from "../helpers.js";
import { AGENTS, requireBuiltCli, skein, workspace } from "./helpers.js";

requireBuiltCli();

/** Ten items: the first two fail at once, the others wait until the test releases them. */
const FLOW = {
  id: "fan",
  nodes: [
    {
      node_id: "answer",
      agent_type: "map",
      payload: {
        items: ["bad", "bad", 2, 3, 4, 5, 6, 7, 8, 9],
        max_concurrency: 4,
        tolerated_failures: 5,
        each: { agent_type: "worker", payload: { n: "{{ item }}" } },
      },
    },
  ],
};

function heldWorker() {
  const held = new Map<number, () => void>();
  const watchers: { n: number; done: () => void }[] = [];
  const agent = (t: Task) => {
    const n = (t.payload as { n: unknown }).n;
    if (n === "bad") throw new NonRetryableError("a bad item");
    return new Promise((release) => {
      held.set(n as number, () => release({ n }));
      for (const w of watchers.splice(0)) {
        if (held.size >= w.n) w.done();
        else watchers.push(w);
      }
    });
  };
  const waitFor = (n: number) => new Promise<void>((done) => (held.size >= n ? done() : watchers.push({ n, done })));
  return { agent, held, waitFor };
}

describe("a map node's progress in the CLI", () => {
  it("skein status and the live table show a map's counts mid-map", async () => {
    const w = heldWorker();
    const { engine, clock } = await testEngine({ agents: { worker: w.agent } });
    await engine.registerWorkflow(FLOW);
    const run = await engine.startRun("fan");
    const progress = new RunProgress(await engine.getRun(run.run_id));
    expect(progress.hasMaps).toBe(true);

    // Items 2-5 run (0 and 1 failed); 2, 3 and 4 end, so 6, 7 and 8 start; 9 waits.
    await w.waitFor(4);
    for (const n of [2, 3, 4]) w.held.get(n)?.();
    await w.waitFor(7);
    const mid = await engine.getRun(run.run_id);
    const note = "map 5/10: 3 succeeded, 2 failed, 4 running, 1 pending";
    expect(runReport(mid, await engine.listVisits(run.run_id), clock.now())).toMatch(
      new RegExp(`\nanswer +RUNNING +1 +1 +0 +0 ms +${note}$`, "m"),
    );
    progress.counts(mid);
    const table = renderTable(progress, clock.now(), 120, false);
    expect(table.find((l) => l.startsWith("answer"))).toMatch(new RegExp(`^answer +RUNNING .* ${note}$`));

    for (const n of [5, 6, 7, 8]) w.held.get(n)?.();
    await w.waitFor(8);
    w.held.get(9)?.();
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(runReport(done, await engine.listVisits(run.run_id))).toMatch(
      /\nanswer +SUCCEEDED .* map 10\/10: 8 succeeded, 2 failed$/m,
    );
  });

  it("words the counts: cancelled only when some are, pending only while some wait", () => {
    const counts = { total: 100, running: 4, succeeded: 35, failed: 2, cancelled: 0, next: 41 };
    expect(mapNote(counts)).toBe("map 37/100: 35 succeeded, 2 failed, 4 running, 59 pending");
    expect(mapNote({ ...counts, running: 0, failed: 1, cancelled: 64 })).toBe(
      "map 100/100: 35 succeeded, 1 failed, 64 cancelled",
    );
    expect(mapNote({ total: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0, next: 0 })).toBe(
      "map 0/0: 0 succeeded",
    );
  });

  it("the built skein status shows a finished map's counts, and lists no item runs as child runs", async () => {
    const ws = workspace();
    const file = ws.file("fan.json", {
      id: "echo-fan",
      nodes: [{ node_id: "answer", agent_type: "map", payload: { items: [1, 2, 3], each: { agent_type: "echo" } } }],
    });
    const ran = await skein(["run", file, "--agents", AGENTS, "--db", ws.db, "--json"], ws.dir);
    expect(ran.code, ran.stderr).toBe(0);
    const runId = (JSON.parse(ran.stdout) as { run_id: string }).run_id;
    const status = await skein(["status", runId, "--db", ws.db], ws.dir);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^answer +SUCCEEDED +1 +1 +0 +\S+(?: \S+)? +map 3\/3: 3 succeeded$/m);
    expect(status.stdout).not.toContain("child runs:");

    const asJson = JSON.parse((await skein(["status", runId, "--db", ws.db, "--json"], ws.dir)).stdout) as {
      nodes: { node_id: string; items: Record<string, number> | null }[];
    };
    expect(asJson.nodes[0]?.items).toMatchObject({ total: 3, succeeded: 3, pending: 0 });
  });
});
