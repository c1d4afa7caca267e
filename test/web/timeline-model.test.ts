/** The run timeline's rows and bars, computed from a run's events and visits (no browser). */
import { describe, expect, it } from "vitest";
import { axisUnit, buildTimeline, niceAxis, tickLabel } from "../../src/web/timeline/model.js";
import type { RunEvent, Visit } from "../../src/web/types.js";

const T0 = 1_700_000_000_000;
let seq = 0;
const ev = (type: string, node: string | null, visit: number | null, at: number, data: object = {}): RunEvent => ({
  seq: ++seq,
  run_id: "r",
  type,
  node_id: node,
  visit,
  at: T0 + at,
  data: data as Record<string, unknown>,
});
const visit = (node_id: string, v: Partial<Visit> = {}): Visit => ({
  run_id: "r",
  node_id,
  visit: 1,
  execution_id: `r:${node_id}:1`,
  agent_type: "echo",
  state: "SUCCEEDED",
  payload: null,
  output: null,
  error: null,
  reason: null,
  handled: false,
  fired: null,
  failures: 0,
  attempt: 1,
  holder: null,
  created_at: T0,
  started_at: T0,
  ended_at: T0,
  deadline_at: null,
  items: null,
  ...v,
});

describe("buildTimeline", () => {
  it("draws a bar per attempt: a retried one, then the one that succeeded", () => {
    const t = buildTimeline({
      events: [
        ev("run.started", null, null, 0),
        ev("node.ready", "fetch", 1, 0),
        ev("node.started", "fetch", 1, 10, { attempt: 1, holder: "engine:a" }),
        ev("node.retrying", "fetch", 1, 30, { attempt: 1, retry_at: T0 + 130 }),
        ev("node.started", "fetch", 1, 130, { attempt: 2, holder: "engine:a" }),
        ev("node.succeeded", "fetch", 1, 180, { attempt: 2 }),
      ],
      visits: [visit("fetch", { agent_type: "flaky", attempt: 2, failures: 1 })],
      runStart: T0,
      runEnd: T0 + 200,
      now: T0 + 5000,
    });
    expect(t.rows).toHaveLength(1);
    const row = t.rows[0];
    expect(row?.label).toBe("fetch");
    expect(row?.agentType).toBe("flaky");
    expect(row?.bars).toEqual([
      { kind: "attempt", attempt: 1, start: T0 + 10, end: T0 + 30, outcome: "retried" },
      { kind: "attempt", attempt: 2, start: T0 + 130, end: T0 + 180, outcome: "succeeded" },
    ]);
    // The run ended at 200 ms: the axis covers it in 50 ms steps (at most 8 ticks), not up to now.
    expect(t.start).toBe(T0);
    expect(t.end).toBe(T0 + 200);
    expect(t.ticks.map((k) => k.label)).toEqual(["0", "50 ms", "100 ms", "150 ms", "200 ms"]);
  });

  it("tells reviews, waits, child runs and maps apart, and runs an open bar until now", () => {
    const t = buildTimeline({
      events: [
        ev("node.started", "sub", 1, 0, { attempt: 1, holder: "run:child-1" }),
        ev("node.failed", "sub", 1, 100, { attempt: 1, reason: "child_failed" }),
        ev("review.requested", "check", 1, 200, { title: "Publish?" }),
        ev("review.decided", "check", 1, 900, { decision: "approve" }),
        ev("node.succeeded", "check", 1, 900, { attempt: 1 }),
        ev("node.waiting", "pause", 1, 1000, { attempt: 1, until: T0 + 9000 }),
        ev("node.waiting", "hook", 1, 1100, { attempt: 1, until: T0 + 9000, event: "paid", key: "k" }),
        ev("node.started", "fan", 1, 1200, { attempt: 1, holder: "map" }),
      ],
      visits: [
        visit("sub", { agent_type: "workflow", state: "FAILED" }),
        visit("check", { agent_type: "human_review" }),
        visit("pause", { agent_type: "sleep", state: "WAITING" }),
        visit("hook", { agent_type: "wait_event", state: "WAITING" }),
        visit("fan", {
          agent_type: "map",
          state: "RUNNING",
          items: { total: 4, pending: 1, running: 1, succeeded: 1, failed: 1, cancelled: 0 },
        }),
        visit("later", { agent_type: "echo", state: "PENDING" }),
      ],
      runStart: T0,
      runEnd: null,
      now: T0 + 1500,
    });
    const bars = Object.fromEntries(t.rows.map((r) => [r.nodeId, r.bars]));
    expect(bars.sub).toEqual([
      { kind: "child", childRunId: "child-1", attempt: 1, start: T0, end: T0 + 100, outcome: "failed" },
    ]);
    expect(bars.check).toEqual([
      { kind: "review", note: "Publish?", attempt: 1, start: T0 + 200, end: T0 + 900, outcome: "succeeded" },
    ]);
    expect(bars.pause?.[0]).toMatchObject({ kind: "wait", note: "timer", end: null, outcome: "running" });
    expect(bars.hook?.[0]).toMatchObject({ kind: "wait", note: "event paid", end: null });
    expect(bars.fan?.[0]).toMatchObject({ kind: "map", end: null, outcome: "running" });
    const fan = t.rows.find((r) => r.nodeId === "fan");
    expect(fan?.items?.total).toBe(4);
    // A visit that has not started yet is a row without bars, after the ones that did.
    expect(t.rows.map((r) => r.nodeId)).toEqual(["sub", "check", "pause", "hook", "fan", "later"]);
    expect(bars.later).toEqual([]);
    // Still running: the axis reaches past now, in whole steps.
    expect(t.end).toBeGreaterThanOrEqual(T0 + 1500);
    expect(t.ticks.at(-1)?.at).toBe(t.end);
  });

  it("gives each visit of a loop its own row, labelled with its number", () => {
    const t = buildTimeline({
      events: [
        ev("node.started", "draft", 1, 0, { attempt: 1, holder: "e" }),
        ev("node.succeeded", "draft", 1, 10, { attempt: 1 }),
        ev("node.started", "draft", 2, 20, { attempt: 1, holder: "e" }),
        ev("node.cancelled", "draft", 2, 30, { attempt: 1, reason: "run_cancelled" }),
      ],
      visits: [visit("draft", { visit: 2, state: "CANCELLED" })],
      runStart: T0,
      runEnd: T0 + 30,
      now: T0 + 30,
    });
    expect(t.rows.map((r) => [r.label, r.state, r.bars.map((b) => b.outcome)])).toEqual([
      ["draft", null, ["succeeded"]],
      ["draft #2", "CANCELLED", ["cancelled"]],
    ]);
  });

  it("places a visit with no bar at its first event (a skipped branch, so marked), and one with no event yet last", () => {
    const t = buildTimeline({
      events: [
        ev("node.started", "review", 1, 0, { attempt: 1, holder: "e" }),
        ev("node.succeeded", "review", 1, 10, { attempt: 1, fired: ["rework"] }),
        ev("node.skipped", "publish", 1, 11, { reason: "branch_not_taken" }),
        ev("node.started", "rework", 1, 12, { attempt: 1, holder: "e" }),
        ev("node.succeeded", "rework", 1, 20, { attempt: 1 }),
      ],
      visits: [
        // publish's skipped visit is an earlier one: not among the current visits.
        visit("review"),
        visit("rework"),
        visit("summary", { state: "PENDING", started_at: null, ended_at: null }),
      ],
      runStart: T0,
      runEnd: null,
      now: T0 + 30,
    });
    expect(t.rows.map((r) => [r.label, r.state, r.bars.length])).toEqual([
      ["review", "SUCCEEDED", 1],
      ["publish", "SKIPPED", 0],
      ["rework", "SUCCEEDED", 1],
      ["summary", "PENDING", 0],
    ]);
  });

  it("ends an attempt the engine interrupted (a lost lease), and one that never reported when the next starts", () => {
    const t = buildTimeline({
      events: [
        ev("node.started", "job", 1, 0, { attempt: 1, holder: "worker:a" }),
        ev("node.interrupted", "job", 1, 50, { attempt: 1, interruptions: 1 }),
        ev("node.started", "job", 1, 60, { attempt: 2, holder: "worker:b" }),
        ev("node.started", "job", 1, 90, { attempt: 3, holder: "worker:c" }),
      ],
      visits: [visit("job", { state: "RUNNING", attempt: 3 })],
      runStart: T0,
      runEnd: null,
      now: T0 + 100,
    });
    expect(t.rows[0]?.bars.map((b) => [b.attempt, b.outcome, b.end === null ? null : b.end - T0])).toEqual([
      [1, "interrupted", 50],
      [2, "interrupted", 90],
      [3, "running", null],
    ]);
  });

  it("keeps the scale within a tick step while a run goes on, so a running bar grows", () => {
    const args = (now: number) => ({
      events: [ev("node.started", "slow", 1, 1000, { attempt: 1, holder: "e" })],
      visits: [visit("slow", { state: "RUNNING" })],
      runStart: T0,
      runEnd: null,
      now: T0 + now,
    });
    const a = buildTimeline(args(3100));
    const b = buildTimeline(args(3400));
    expect(a.end).toBe(b.end);
    expect(a.end).toBe(T0 + 3500);
    expect(a.rows[0]?.bars[0]?.end).toBeNull();
  });
});

describe("the time axis", () => {
  const labels = (last: number) => niceAxis(0, last).ticks.map((t) => t.label);

  it("labels every tick of an axis in one unit, chosen from the span", () => {
    expect(labels(3_000)).toEqual(["0", "0.5 s", "1 s", "1.5 s", "2 s", "2.5 s", "3 s"]);
    expect(labels(95_000)).toEqual(["0", "15 s", "30 s", "45 s", "60 s", "75 s", "90 s", "105 s"]);
    expect(labels(700)).toEqual(["0", "100 ms", "200 ms", "300 ms", "400 ms", "500 ms", "600 ms", "700 ms"]);
    expect(labels(1_500)).toEqual(["0", "0.2 s", "0.4 s", "0.6 s", "0.8 s", "1 s", "1.2 s", "1.4 s", "1.6 s"]);
    expect(labels(3 * 60_000)).toEqual(["0", "0.5 min", "1 min", "1.5 min", "2 min", "2.5 min", "3 min"]);
    expect(labels(50 * 60_000)).toEqual(["0", "10 min", "20 min", "30 min", "40 min", "50 min"]);
    expect(labels(3 * 3_600_000).at(-1)).toBe("3 h");
    expect(labels(5 * 86_400_000)).toEqual(["0", "1 d", "2 d", "3 d", "4 d", "5 d"]);
    expect(niceAxis(5, 5).end).toBe(6);
    // Whatever the span, one unit per axis.
    for (let last = 1; last < 40 * 86_400_000; last = Math.ceil(last * 1.37)) {
      const units = new Set(
        labels(last)
          .slice(1)
          .map((l) => l.split(" ")[1]),
      );
      expect([last, units.size]).toEqual([last, 1]);
    }
  });

  it("picks the largest unit in which a step is a fifth or more, with at most one decimal", () => {
    expect(axisUnit(50).name).toBe("ms");
    expect(axisUnit(100).name).toBe("ms");
    expect(axisUnit(200).name).toBe("s");
    expect(axisUnit(15_000).name).toBe("s");
    expect(axisUnit(30_000).name).toBe("min");
    expect(axisUnit(15 * 60_000).name).toBe("min");
    expect(axisUnit(6 * 3_600_000).name).toBe("h");
    expect(axisUnit(12 * 3_600_000).name).toBe("d");
    expect(tickLabel(0, axisUnit(1_000))).toBe("0");
    expect(tickLabel(1_250, { ms: 1_000, name: "s" })).toBe("1.3 s");
  });
});
