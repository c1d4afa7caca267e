/** useRun's reducer: a node's text is its latest attempt's deltas; a new attempt starts it again. */
import { describe, expect, it } from "vitest";
import type { RunEvent, StreamEvent } from "../../src/client/index.js";
import { emptyView, runViewReducer, streamsAfter } from "../../src/react/run-view.js";

let seq = 0;
const stored = (type: string, node_id: string, visit: number, data: Record<string, unknown>): RunEvent => ({
  seq: ++seq,
  run_id: "r",
  type,
  node_id,
  visit,
  at: 0,
  trace_id: "t",
  data,
});
const progress = (node_id: string, visit: number, attempt: number, value: unknown): StreamEvent => ({
  run_id: "r",
  type: "node.progress",
  node_id,
  visit,
  at: 0,
  trace_id: "t",
  data: { attempt, progress: value },
});

function streams(events: StreamEvent[]) {
  return events.reduce(streamsAfter, {});
}

describe("a node's streamed text", () => {
  it("concatenates the deltas of an llm node and of an agent node's turns", () => {
    const nodes = streams([
      stored("node.started", "draft", 1, { attempt: 1 }),
      progress("draft", 1, 1, { delta: "Hello" }),
      progress("draft", 1, 1, { turn: 1, delta: ", " }),
      progress("draft", 1, 1, { turn: 2, delta: "world" }),
    ]);
    expect(nodes.draft).toEqual({ text: "Hello, world", attempt: 1, visit: 1, progress: { turn: 2, delta: "world" } });
  });

  it("starts again with a new attempt (node.retrying, node.started, or its first progress) and ignores the old one's", () => {
    const first = [stored("node.started", "draft", 1, { attempt: 1 }), progress("draft", 1, 1, { delta: "first try" })];
    expect(streams([...first, stored("node.retrying", "draft", 1, { attempt: 1 })]).draft?.text).toBe("");
    expect(streams([...first, stored("node.started", "draft", 1, { attempt: 2 })]).draft).toMatchObject({
      text: "",
      attempt: 2,
    });
    const second = streams([
      ...first,
      progress("draft", 1, 2, { delta: "second" }),
      progress("draft", 1, 1, { delta: "late" }),
    ]);
    expect(second.draft).toMatchObject({ text: "second", attempt: 2 });
    // A loop's next visit starts at attempt 1 again, and is still the later one.
    expect(streams([...first, progress("draft", 2, 1, { delta: "visit 2" })]).draft).toMatchObject({
      text: "visit 2",
      visit: 2,
      attempt: 1,
    });
  });

  it("keeps a custom agent's value that is not a delta as progress, without text", () => {
    expect(streams([progress("count", 1, 1, { done: 3, of: 10 })]).count).toEqual({
      text: "",
      attempt: 1,
      visit: 1,
      progress: { done: 3, of: 10 },
    });
  });

  it("keeps the events only when asked, and leaves the view alone for events that change nothing", () => {
    const view = emptyView(false);
    const e = stored("run.started", "x", 1, {});
    expect(runViewReducer(view, { type: "event", event: { ...e, node_id: null }, keepEvents: false })).toBe(view);
    const kept = runViewReducer(emptyView(true), { type: "event", event: e, keepEvents: true });
    expect(kept.events).toEqual([e]);
  });
});
