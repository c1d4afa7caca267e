/**
 * WAITING nodes in `skein status` and `skein run`'s live view (in process): each says what it
 * waits for, a wait_event its event (and key) with its timeout, a sleep its wake-up time; a
 * ready node of an agent type nothing serves says that.
 */
import { describe, expect, it } from "vitest";
import { EventTap } from "../../src/cli/follow.js";
import { formatEventLine, RunProgress, renderTable } from "../../src/cli/live-view.js";
import { runReport } from "../../src/cli/summary.js";
import type { LiveEvent } from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";

describe("WAITING nodes say what they wait for", () => {
  it("in the run report, the live view's rows and its event lines", async () => {
    const { engine, clock } = await testEngine();
    await engine.registerWorkflow({
      id: "parked",
      nodes: [
        { node_id: "paid", agent_type: "wait_event", payload: { event: "paid", key: "o-1" }, timeout: 3600 },
        { node_id: "nap", agent_type: "sleep", payload: { seconds: 60 } },
      ],
    });
    const tap = new EventTap(engine);
    const both = new Promise<void>((resolve) => {
      let n = 0;
      engine.subscribe((e: LiveEvent) => {
        if (e.type === "node.waiting" && ++n === 2) resolve();
      });
    });
    const t0 = clock.now();
    const run = await engine.startRun("parked");
    const progress = new RunProgress(await engine.getRun(run.run_id));
    const lines: string[] = [];
    tap.follow(run.run_id, (e) => {
      progress.apply(e);
      lines.push(formatEventLine(e, run.created_at));
    });
    await both;
    const timeout = new Date(t0 + 3600_000).toISOString();
    const wake = new Date(t0 + 60_000).toISOString();

    const current = await engine.getRun(run.run_id);
    const report = runReport(current, await engine.listVisits(run.run_id), clock.now());
    expect(report).toMatch(new RegExp(`\\npaid +WAITING .*event "paid" \\(key o-1\\), until ${timeout}`));
    expect(report).toMatch(new RegExp(`\\nnap +WAITING .*until ${wake}`));

    // Seeded from the stored run, and fed by the events: the same notes.
    const seeded = new RunProgress(current);
    for (const p of [seeded, progress]) {
      expect(p.rows.get("paid")).toMatchObject({
        state: "WAITING",
        note: `event "paid" (key o-1), until ${timeout}`,
      });
      expect(p.rows.get("nap")).toMatchObject({ state: "WAITING", note: `until ${wake}` });
    }
    expect(renderTable(progress, clock.now(), 120, false).join("\n")).toContain('event "paid" (key o-1)');
    expect(lines).toContainEqual(expect.stringMatching(/node\.waiting +paid#1 attempt 1: waiting for event "paid"/));

    const delivered = nextEvent(engine, (e) => e.type === "event.delivered");
    await engine.publishEvent("paid", "o-1", {});
    await delivered;
    tap.close();
    expect(lines).toContainEqual(expect.stringMatching(/event\.delivered +paid#1 event "paid" \(key o-1\)$/));
  });

  it("a ready node of an agent type nothing serves says so, in the run report and the live view's rows", async () => {
    const { engine, clock } = await testEngine({ agents: { summarize: () => "ok" } });
    await engine.registerWorkflow({ id: "typo", nodes: [{ node_id: "write", agent_type: "sumarize" }] });
    const run = await engine.startRun("typo");
    const current = await engine.getRun(run.run_id);
    const report = runReport(current, await engine.listVisits(run.run_id), clock.now());
    expect(report).toMatch(
      /\nwrite +PENDING .*no engine or worker serves agent_type "sumarize" \(did you mean "summarize"\?\)/,
    );
    expect(new RunProgress(current).rows.get("write")).toMatchObject({
      state: "READY",
      note: expect.stringMatching(/^no engine or worker serves agent_type "sumarize"/),
    });
  });
});
