/**
 * The live view's model (in process): fed a real engine's events, the rows end as the stored
 * visits say, through a loop that gives nodes new visits; the table fits its width.
 */
import { describe, expect, it } from "vitest";
import { EventTap } from "../../src/cli/follow.js";
import { formatEventLine, lineView, progressLine, RunProgress, renderTable } from "../../src/cli/live-view.js";
import type { ProgressEvent, RunEvent, Task } from "../../src/index.js";
import { testEngine } from "../helpers.js";

const LOOP = {
  id: "loop",
  nodes: [
    { node_id: "draft", agent_type: "writer" },
    {
      node_id: "review",
      agent_type: "reviewer",
      depends_on: ["draft"],
      next_on_success: [{ when: "output.ok = true", to: "publish" }, { to: "draft" }],
    },
    { node_id: "publish", agent_type: "writer" },
  ],
};

describe("live view", () => {
  it("keeps each node's row equal to its current visit, loops included", async () => {
    const { engine } = await testEngine({
      agents: {
        writer: (t) => ({ node: t.node_id, visit: t.visit }),
        reviewer: (t) => ({ ok: t.visit > 2, note: "x".repeat(200) }),
      },
    });
    await engine.registerWorkflow(LOOP);
    const tap = new EventTap(engine);
    const run = await engine.startRun("loop");
    const progress = new RunProgress(await engine.getRun(run.run_id));
    const lines: string[] = [];
    tap.follow(run.run_id, (e) => {
      progress.apply(e);
      lines.push(formatEventLine(e, run.created_at));
    });
    const done = await engine.waitForRun(run.run_id);
    tap.close();

    expect(done.status).toBe("SUCCEEDED");
    expect(progress.status).toBe("SUCCEEDED");
    for (const v of done.nodes) {
      expect(progress.rows.get(v.node_id), v.node_id).toMatchObject({
        state: v.state,
        visit: v.visit,
        attempt: v.attempt,
      });
    }
    expect(progress.rows.get("review")?.visit).toBe(3);
    expect(lines[0]).toMatch(/^ +\d+ ms {2}run\.started +workflow loop v1$/);
    expect(lines).toContainEqual(
      expect.stringMatching(/loop\.reset +review#1 -> draft \(resets draft, review, publish\)$/),
    );

    const table = renderTable(progress, Date.now(), 60, false);
    expect(table[1]).toMatch(/^node +state +visit +attempt +elapsed/);
    expect(table.slice(2).map((l) => l.split(/ +/).slice(0, 3))).toEqual([
      ["draft", "SUCCEEDED", "3"],
      ["review", "SUCCEEDED", "3"],
      ["publish", "SUCCEEDED", "1"],
    ]);
    for (const l of table.slice(1)) expect(l.length).toBeLessThanOrEqual(60);
  });

  it("shows the skein review command to type under a node waiting for review, in the table and the lines", async () => {
    const { engine } = await testEngine({ agents: { writer: () => ({ ok: true }) } });
    await engine.registerWorkflow({
      id: "reviewed",
      nodes: [
        { node_id: "draft", agent_type: "writer" },
        {
          node_id: "sign_off",
          agent_type: "human_review",
          depends_on: ["draft"],
          payload: { assignees: ["ops lead", "finance"] },
        },
      ],
    });
    const requested = new Promise<void>((resolve) => {
      const off = engine.subscribe((e) => {
        if (e.type === "review.requested") {
          off();
          resolve();
        }
      });
    });
    const run = await engine.startRun("reviewed");
    await requested;
    const command = `skein review ${run.run_id} sign_off approve|reject --by 'ops lead'`;

    // Seeded from the stored run (skein resume): the table shows it under the node.
    const seeded = new RunProgress(await engine.getRun(run.run_id));
    const table = renderTable(seeded, Date.now(), 60, false);
    const row = table.findIndex((l) => l.startsWith("sign_off "));
    expect(table[row]).toMatch(/IN_REVIEW/);
    expect(table[row + 1]).toBe(`  to decide: ${command}`);

    // Fed the events (skein run in a pipe): the line after review.requested, with --db when it was given.
    const lines: string[] = [];
    const start = await engine.getRun(run.run_id);
    const view = lineView((text) => lines.push(text), new RunProgress({ ...start, nodes: [] }, "sqlite:./other.db"));
    for (const e of await engine.listEvents(run.run_id)) view.event(e as RunEvent);
    const at = lines.findIndex((l) => l.includes("review.requested"));
    expect(lines[at + 1]).toBe(`            to decide: ${command} --db sqlite:./other.db\n`);
    // Decided: no command any more.
    await engine.review(run.run_id, "sign_off", { decision: "approve", by: "ops lead" });
    const decided = new RunProgress(await engine.getRun(run.run_id));
    expect(renderTable(decided, Date.now(), 60, false).join("\n")).not.toContain("to decide");
  });

  it("shows the last line of a running node's latest progress under its row, and clears it when the node ends", async () => {
    let task: Task | null = null;
    let finish: () => void = () => {};
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const { engine, clock } = await testEngine({
      agents: {
        writer: (t) =>
          new Promise((resolve) => {
            task = t;
            finish = () => resolve("done");
            started();
          }),
      },
    });
    await engine.registerWorkflow({ id: "one", nodes: [{ node_id: "write", agent_type: "writer" }] });
    const tap = new EventTap(engine);
    const run = await engine.startRun("one");
    const progress = new RunProgress(await engine.getRun(run.run_id));
    const lines: string[] = [];
    const view = lineView((text) => lines.push(text), progress);
    const seen: ProgressEvent[] = [];
    let progressSeen: () => void = () => {};
    const seenCount = async (n: number) => {
      while (seen.length < n) await new Promise<void>((resolve) => (progressSeen = resolve));
    };
    let startedSeen: () => void = () => {};
    const startedRead = new Promise<void>((resolve) => {
      startedSeen = resolve;
    });
    tap.follow(
      run.run_id,
      (e) => {
        view.event(e);
        if (e.type === "node.started") startedSeen();
      },
      (e) => {
        seen.push(e);
        view.progress(e); // the lines print nothing for it
        progress.applyProgress(e); // what the table view does
        progressSeen();
      },
    );
    await running;
    await startedRead;
    const t = task as unknown as Task;
    // Deltas join into the text so far, whose last line shows.
    t.progress({ delta: "Once upon a time\nthere" });
    await seenCount(1);
    await clock.advance(50);
    t.progress({ delta: " was a graph" });
    await seenCount(2);
    const table = renderTable(progress, clock.now(), 60, false);
    const at = table.findIndex((l) => l.startsWith("write"));
    expect(table[at + 1]).toBe("  there was a graph");
    await clock.advance(50);
    t.progress({ step: 3, of: 10, detail: "x".repeat(100) });
    await seenCount(3);
    const cut = renderTable(progress, clock.now(), 60, false);
    expect(cut[at + 1]).toMatch(/^ {2}\{"step":3,"of":10,"detail":"x+…$/);
    expect(cut[at + 1]?.length).toBeLessThanOrEqual(60);
    finish();
    await engine.waitForRun(run.run_id);
    tap.close();
    const after = renderTable(progress, clock.now(), 60, false);
    expect(after.slice(at + 1)).toEqual([]);
    expect(seen).toHaveLength(3);
    // The event lines leave progress out.
    expect(lines.join("")).not.toContain("progress");
  });

  it("makes one line of a progress value", () => {
    expect(progressLine("page 3 of 10")).toBe("page 3 of 10");
    expect(progressLine("first\nsecond\n")).toBe("second");
    expect(progressLine({ content: "a\nb c" })).toBe("b c");
    expect(progressLine({ done: 3 })).toBe('{"done":3}');
    expect(progressLine([1, 2])).toBe("[1,2]");
  });
});
