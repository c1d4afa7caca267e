import { describe, expect, it } from "vitest";
import { type Engine, type LiveEvent, type RunEvent, ValidationError } from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";

/** A run of `width` parallel nodes then a join: about 3 events a node, more than a replay page (500) at 200. */
function wide(width: number) {
  const branches = Array.from({ length: width }, (_, i) => ({ node_id: `n${i}`, agent_type: "echo" }));
  return {
    id: "wide",
    nodes: [...branches, { node_id: "join", agent_type: "echo", depends_on: branches.map((b) => b.node_id) }],
  };
}

async function wideEngine(width: number): Promise<Engine> {
  const { engine } = await testEngine({ agents: { echo: () => ({ ok: true }) } });
  await engine.registerWorkflow(wide(width));
  return engine;
}

/** Collects a listener's events; `ended` resolves at the run's end event. */
function collector() {
  const events: RunEvent[] = [];
  let resolveEnded!: () => void;
  const ended = new Promise<void>((r) => {
    resolveEnded = r;
  });
  const listener = (e: LiveEvent) => {
    if (e.type === "node.progress") return;
    events.push(e);
    if (e.type === "run.succeeded" || e.type === "run.failed" || e.type === "run.cancelled") resolveEnded();
  };
  return { events, listener, ended };
}

const seqs = (events: RunEvent[]) => events.map((e) => e.seq);

describe("subscribe with from: the stored history, then live, each event once", () => {
  it("subscribing after startRun with from: 0 gets every event exactly once, while the run still writes", async () => {
    const engine = await wideEngine(200);
    const run = await engine.startRun("wide");
    // The run has written some history and is still writing when the subscription starts.
    await nextEvent(engine, (e) => e.type === "node.succeeded" && e.node_id === "n20");
    const got = collector();
    engine.subscribe(got.listener, { run_id: run.run_id, from: 0 });
    await got.ended;
    const stored = await engine.listEvents(run.run_id);
    expect(stored.length).toBeGreaterThan(600);
    expect(seqs(got.events)).toEqual(seqs(stored));
    expect(got.events[0]?.type).toBe("run.started");
    expect(new Set(seqs(got.events)).size).toBe(got.events.length);
  });

  it("replays a finished run's whole history a page at a time, then hears what comes next", async () => {
    const engine = await wideEngine(200);
    const run = await engine.startRun("wide");
    await engine.waitForRun(run.run_id);
    const stored = await engine.listEvents(run.run_id);
    const got = collector();
    engine.subscribe(got.listener, { run_id: run.run_id, from: 0 });
    await got.ended;
    expect(seqs(got.events)).toEqual(seqs(stored));
  });

  it("from: n starts mid-history at the first event with seq >= n", async () => {
    const engine = await wideEngine(5);
    const run = await engine.startRun("wide");
    await engine.waitForRun(run.run_id);
    const stored = await engine.listEvents(run.run_id);
    const from = stored[7]?.seq as number;
    const got = collector();
    engine.subscribe(got.listener, { run_id: run.run_id, from });
    await got.ended;
    expect(seqs(got.events)).toEqual(seqs(stored.slice(7)));
  });

  it("unsubscribing during the replay stops it", async () => {
    const engine = await wideEngine(200);
    const run = await engine.startRun("wide");
    await engine.waitForRun(run.run_id);
    const got: RunEvent[] = [];
    const first = new Promise<void>((resolve) => {
      const stop = engine.subscribe(
        (e) => {
          if (e.type !== "node.progress") got.push(e);
          stop();
          resolve();
        },
        { run_id: run.run_id, from: 0 },
      );
    });
    await first;
    // Anything still to come would be published by this retry's events; none must arrive.
    const later = await engine.startRun("wide");
    await engine.waitForRun(later.run_id);
    await engine.listEvents(run.run_id); // a read after the replay's page
    expect(got).toHaveLength(1);
    expect(got[0]?.type).toBe("run.started");
  });

  it("refuses from without run_id, and a from that is not a seq", async () => {
    const engine = await wideEngine(1);
    expect(() => engine.subscribe(() => {}, { from: 0 })).toThrow(ValidationError);
    expect(() => engine.subscribe(() => {}, { from: 0 })).toThrow(/needs run_id/);
    expect(() => engine.subscribe(() => {}, { run_id: "r", from: -1 })).toThrow(/integer >= 0/);
    expect(() => engine.subscribe(() => {}, { run_id: "r", from: 1.5 })).toThrow(ValidationError);
  });
});

describe("startRun's onEvent", () => {
  it("hears every event of the new run from run.started, exactly once", async () => {
    const engine = await wideEngine(50);
    const got = collector();
    const run = await engine.startRun("wide", { onEvent: got.listener });
    await got.ended;
    const stored = await engine.listEvents(run.run_id);
    expect(seqs(got.events)).toEqual(seqs(stored));
    expect(got.events[0]?.type).toBe("run.started");
  });

  it("replays the history of the run an idempotency key returns", async () => {
    const engine = await wideEngine(5);
    const first = await engine.startRun("wide", { idempotency_key: "once" });
    await engine.waitForRun(first.run_id);
    const got = collector();
    const again = await engine.startRun("wide", { idempotency_key: "once", onEvent: got.listener });
    expect(again.run_id).toBe(first.run_id);
    await got.ended;
    expect(seqs(got.events)).toEqual(seqs(await engine.listEvents(first.run_id)));
  });

  it("an existing run that failed and was redriven is heard past its first end, to its live end", async () => {
    let calls = 0;
    const { engine } = await testEngine({
      agents: {
        once: () => {
          calls += 1;
          if (calls === 1) throw new Error("first call fails");
          return { ok: true };
        },
      },
    });
    await engine.registerWorkflow({ id: "redo", nodes: [{ node_id: "a", agent_type: "once", retry_count: 0 }] });
    const first = await engine.startRun("redo", { idempotency_key: "k" });
    expect((await engine.waitForRun(first.run_id)).status).toBe("FAILED");
    await engine.retryRun(first.run_id);
    expect((await engine.waitForRun(first.run_id)).status).toBe("SUCCEEDED");
    const got = collector();
    const ends: string[] = [];
    await engine.startRun("redo", {
      idempotency_key: "k",
      onEvent: (e) => {
        got.listener(e);
        if (e.type.startsWith("run.")) ends.push(e.type);
      },
    });
    await got.ended;
    // Wait for the whole history: the collector resolves at the first end already.
    const stored = await engine.listEvents(first.run_id);
    await new Promise<void>((resolve) => {
      const check = () => (got.events.length >= stored.length ? resolve() : setImmediate(check));
      check();
    });
    expect(seqs(got.events)).toEqual(seqs(stored));
    expect(ends).toEqual(["run.started", "run.failed", "run.retried", "run.succeeded"]);
  });
});
