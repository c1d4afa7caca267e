/**
 * The oracles can fail: each figure counts the defect it is for, on a small made-up history (a
 * test that cannot fail is a defect, and so is an oracle that cannot).
 */
import { describe, expect, it } from "vitest";
import { computeOracles, type EventRow, type History, type SinkEntry } from "./oracles.js";

const RUN = "r1";
const ID = `${RUN}:a:1`;

function history(events: Omit<EventRow, "seq" | "run_id" | "at">[], state = "SUCCEEDED", attempt = 1): History {
  return {
    runs: [
      {
        run_id: RUN,
        workflow_id: "w",
        status: "SUCCEEDED",
        error: null,
        needs_attention: false,
        created_at: 0,
        deadline_at: 1,
      },
    ],
    visits: [
      {
        run_id: RUN,
        node_id: "a",
        visit: 1,
        execution_id: ID,
        state,
        attempt,
        interruptions: 0,
        failures: 0,
        is_current: true,
        reason: null,
        output: null,
      },
    ],
    compensations: [],
    events: [
      ...events.map((e, i) => ({ ...e, seq: i + 1, run_id: RUN, at: i })),
      { seq: 99, run_id: RUN, type: "run.succeeded", node_id: null, visit: null, at: 99, data: {} },
    ],
  };
}
const started = (attempt: number) => ({ type: "node.started", node_id: "a", visit: 1, data: { attempt } });
const succeeded = (attempt: number) => ({ type: "node.succeeded", node_id: "a", visit: 1, data: { attempt } });
const call = (attempt: number, phase: "start" | "done", pid = 1): SinkEntry => ({
  phase,
  run_id: RUN,
  node_id: "a",
  execution_id: ID,
  attempt,
  pid,
  by: `pid-${pid}`,
});

describe("the fault oracles", () => {
  it("count nothing for a clean history", () => {
    const f = computeOracles(history([started(1), succeeded(1)]), [call(1, "start"), call(1, "done")], [RUN]);
    expect(f).toMatchObject({ runs: 1, lost: 0, doubled: 0, stale: 0, problems: [] });
  });

  it("count a run that is missing, or not final", () => {
    expect(computeOracles(history([started(1), succeeded(1)]), [], [RUN, "r2"]).lost).toBe(1);
    const h = history([started(1)]);
    (h.runs[0] as { status: string }).status = "RUNNING";
    expect(computeOracles(h, [], [RUN]).lost).toBe(1);
  });

  it("count an attempt run twice, one run after its visit succeeded, and one no claim started", () => {
    const h = history([started(1), succeeded(1)]);
    expect(computeOracles(h, [call(1, "start"), call(1, "start", 2)], [RUN]).doubled).toBe(1);
    expect(computeOracles(h, [call(1, "start"), call(2, "start")], [RUN]).doubled).toBe(1);
  });

  it("allow an effect done again only when its process was killed or its attempt ended by time", () => {
    const h = history([started(1), started(2), succeeded(2)], "SUCCEEDED", 2);
    const sink = [call(1, "start"), call(1, "done"), call(2, "start", 2), call(2, "done", 2)];
    expect(computeOracles(h, sink, [RUN]).doubled).toBe(1); // a living engine's attempt, run again
    expect(computeOracles(h, sink, [RUN], { killed: new Set([1]) }).doubled).toBe(0);
  });

  it("count a success accepted from an attempt that no longer held its visit", () => {
    const h = history([started(1), started(2), succeeded(1)]);
    expect(computeOracles(h, [], [RUN]).stale).toBe(1);
    const expired = history([
      started(1),
      { type: "node.retrying", node_id: "a", visit: 1, data: { attempt: 1, error: { reason: "lease_expired" } } },
      succeeded(1),
    ]);
    expect(computeOracles(expired, [], [RUN]).stale).toBe(1);
    expect(computeOracles(history([started(1), succeeded(1), succeeded(1)]), [], [RUN]).stale).toBe(1);
    expect(computeOracles(history([started(1), started(1), succeeded(1)]), [], [RUN]).stale).toBe(1);
  });
});
