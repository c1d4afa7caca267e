import { describe, expect, it } from "vitest";
import {
  ConflictError,
  LimitError,
  NotFoundError,
  type RunEvent,
  systemClock,
  ValidationError,
} from "../../../src/index.js";
import { nextEvent, testEngine } from "../../helpers.js";

const waiting = (nodeId: string) => (e: RunEvent) => e.type === "node.waiting" && e.node_id === nodeId;

/** An agent that holds its node until `open()` is called; `started` resolves when it runs. */
function gate() {
  let open!: () => void;
  let markStarted!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  const started = new Promise<void>((resolve) => {
    markStarted = resolve;
  });
  const agent = async () => {
    markStarted();
    await opened;
    return { opened: true };
  };
  return { agent, open: () => open(), started };
}

describe("wait_event and sendEvent", () => {
  it("an event sent before the wait starts is kept in the inbox and consumed by it", async () => {
    const g = gate();
    const { engine } = await testEngine({ agents: { gate: g.agent } });
    await engine.registerWorkflow({
      id: "early",
      nodes: [
        { node_id: "before", agent_type: "gate", next_on_success: "paid" },
        { node_id: "paid", agent_type: "wait_event", payload: { event: "payment" } },
      ],
    });
    const run = await engine.startRun("early");
    await g.started;
    const answer = await engine.sendEvent(run.run_id, "payment", { amount: 12 });
    expect(answer).toMatchObject({ delivered_to: null, buffered: true, duplicate: false });
    g.open();
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[1]).toMatchObject({ node_id: "paid", state: "SUCCEEDED", output: { amount: 12 } });
    const types = (await engine.listEvents(run.run_id)).map((e) => e.type);
    expect(types).toContain("event.received");
    expect(types).toContain("event.delivered");
  });

  it("delivers to a WAITING visit at once, with its payload as the output", async () => {
    const { engine } = await testEngine({ agents: { echo: (t) => t.deps } });
    await engine.registerWorkflow({
      id: "direct",
      nodes: [
        { node_id: "wait", agent_type: "wait_event", payload: { event: "approved" }, next_on_success: "after" },
        { node_id: "after", agent_type: "echo" },
      ],
    });
    const parked = nextEvent(engine, waiting("wait"));
    const run = await engine.startRun("direct");
    await parked;
    expect((await engine.getRun(run.run_id)).nodes[0]).toMatchObject({ state: "WAITING" });
    const answer = await engine.sendEvent(run.run_id, "approved", { by: "ana" });
    expect(answer).toMatchObject({ delivered_to: { node_id: "wait", visit: 1 }, buffered: false });
    const done = await engine.waitForRun(run.run_id);
    expect(done.nodes[0]?.output).toEqual({ by: "ana" });
    expect(done.status).toBe("SUCCEEDED");
  });

  it("two waits for the same name get two events, oldest wait and oldest event first", async () => {
    const g = gate();
    const { engine } = await testEngine({ agents: { gate: g.agent } });
    // Two waits in a row, the events sent before either starts: the inbox keeps their order.
    await engine.registerWorkflow({
      id: "inorder",
      nodes: [
        { node_id: "before", agent_type: "gate", next_on_success: "first" },
        { node_id: "first", agent_type: "wait_event", payload: { event: "step" }, next_on_success: "second" },
        { node_id: "second", agent_type: "wait_event", payload: { event: "step" } },
      ],
    });
    const run = await engine.startRun("inorder");
    await g.started;
    await engine.sendEvent(run.run_id, "step", { n: 1 });
    await engine.sendEvent(run.run_id, "step", { n: 2 });
    g.open();
    const done = await engine.waitForRun(run.run_id);
    expect(done.nodes.map((n) => [n.node_id, n.output])).toEqual([
      ["before", { opened: true }],
      ["first", { n: 1 }],
      ["second", { n: 2 }],
    ]);

    // Two waits WAITING side by side: the first event goes to the first node, the next to the other.
    await engine.registerWorkflow({
      id: "side",
      nodes: [
        { node_id: "a", agent_type: "wait_event", payload: { event: "go" } },
        { node_id: "b", agent_type: "wait_event", payload: { event: "go" } },
      ],
    });
    const parked = nextEvent(engine, waiting("b"));
    const side = await engine.startRun("side");
    await parked;
    expect(await engine.sendEvent(side.run_id, "go", 1)).toMatchObject({ delivered_to: { node_id: "a" } });
    expect(await engine.sendEvent(side.run_id, "go", 2)).toMatchObject({ delivered_to: { node_id: "b" } });
    const both = await engine.waitForRun(side.run_id);
    expect(both.output).toEqual({ a: 1, b: 2 });
  });

  it("an event to a finished run is a conflict, to an unknown run not found, and nothing is stored", async () => {
    const { engine } = await testEngine({ agents: { echo: () => ({ ok: true }) } });
    await engine.registerWorkflow({ id: "quick", nodes: [{ node_id: "a", agent_type: "echo" }] });
    const run = await engine.startRun("quick");
    await engine.waitForRun(run.run_id);
    const before = await engine.listEvents(run.run_id);
    await expect(engine.sendEvent(run.run_id, "late", {})).rejects.toThrow(ConflictError);
    await expect(engine.sendEvent(run.run_id, "late", {})).rejects.toThrow(/already ended SUCCEEDED/);
    await expect(engine.sendEvent("no-such-run", "late", {})).rejects.toThrow(NotFoundError);
    expect(await engine.listEvents(run.run_id)).toEqual(before);
    await expect(engine.sendEvent(run.run_id, "", {})).rejects.toThrow(ValidationError);
  });

  it("the same idempotency key twice is delivered once", async () => {
    const { engine } = await testEngine();
    await engine.registerWorkflow({
      id: "dup",
      nodes: [
        { node_id: "one", agent_type: "wait_event", payload: { event: "tick" }, next_on_success: "two" },
        { node_id: "two", agent_type: "wait_event", payload: { event: "tick" } },
      ],
    });
    const parked = nextEvent(engine, waiting("one"));
    const run = await engine.startRun("dup");
    await parked;
    const nowTwo = nextEvent(engine, waiting("two"));
    const first = await engine.sendEvent(run.run_id, "tick", { n: 1 }, { idempotency_key: "k1" });
    await nowTwo;
    const again = await engine.sendEvent(run.run_id, "tick", { n: 1 }, { idempotency_key: "k1" });
    expect(again).toEqual({ ...first, duplicate: true });
    expect((await engine.getRun(run.run_id)).nodes[1]).toMatchObject({ node_id: "two", state: "WAITING" });
    // Buffered twice under one key: kept once.
    await engine.sendEvent(run.run_id, "other", 1, { idempotency_key: "k2" });
    const dup = await engine.sendEvent(run.run_id, "other", 1, { idempotency_key: "k2" });
    expect(dup).toMatchObject({ buffered: true, duplicate: true });
    const received = (await engine.listEvents(run.run_id)).filter((e) => e.type === "event.received");
    expect(received).toHaveLength(2);
    expect((await engine.sendEvent(run.run_id, "tick", { n: 2 })).delivered_to).toEqual({ node_id: "two", visit: 1 });
    expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
  });

  it("no event within the node's timeout: FAILED event_timeout, routed by next_on_failure", async () => {
    const { engine, clock } = await testEngine({ agents: { fallback: () => ({ fell_back: true }) } });
    await engine.registerWorkflow({
      id: "late",
      nodes: [
        {
          node_id: "wait",
          agent_type: "wait_event",
          payload: { event: "callback" },
          timeout: 60,
          next_on_failure: "fallback",
        },
        { node_id: "fallback", agent_type: "fallback" },
      ],
    });
    const parked = nextEvent(engine, waiting("wait"));
    const run = await engine.startRun("late");
    await parked;
    await clock.advance(59_999);
    expect((await engine.getRun(run.run_id)).nodes[0]).toMatchObject({ state: "WAITING" });
    const done = engine.waitForRun(run.run_id);
    await clock.advance(1);
    const finished = await done;
    expect(finished.nodes[0]).toMatchObject({ state: "FAILED", reason: "event_timeout", handled: true });
    expect(finished.nodes[0]?.error?.message).toMatch(/no event "callback" arrived within 60 s/);
    expect(finished.nodes[1]).toMatchObject({ node_id: "fallback", state: "SUCCEEDED" });
    expect(finished.status).toBe("SUCCEEDED");
  });

  it("an event kept in the inbox survives an engine restart; a wait without a timeout waits the run's TTL", async () => {
    const first = await testEngine();
    await first.engine.registerWorkflow({
      id: "durable",
      timeout: 600,
      nodes: [
        { node_id: "before", agent_type: "later", next_on_success: "paid" },
        { node_id: "paid", agent_type: "wait_event", payload: { event: "paid" } },
      ],
    });
    const run = await first.engine.startRun("durable");
    expect(await first.engine.sendEvent(run.run_id, "paid", { total: 1 })).toMatchObject({ buffered: true });
    await first.engine.close();

    // Another engine, with the agent the first one lacked: the wait begins there and takes the event.
    const second = await testEngine({ database: first.database, clock: first.clock, agents: { later: () => ({}) } });
    const done = await second.engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[1]).toMatchObject({ node_id: "paid", output: { total: 1 } });

    await second.engine.registerWorkflow({
      id: "ttl",
      timeout: 600,
      nodes: [{ node_id: "paid", agent_type: "wait_event", payload: { event: "paid" } }],
    });
    const parked = nextEvent(second.engine, waiting("paid"));
    const waitsTtl = await second.engine.startRun("ttl");
    await parked;
    const stored = await second.engine.getRun(waitsTtl.run_id);
    expect(stored.nodes[0]?.deadline_at).toBe(stored.deadline_at);
  });

  it("refuses a wait_event without an event name, with the path", async () => {
    const { engine } = await testEngine();
    const bad = engine.registerWorkflow({
      id: "bad",
      nodes: [{ node_id: "w", agent_type: "wait_event", payload: { key: "x" } }],
    });
    await expect(bad).rejects.toThrow(ValidationError);
    await expect(bad).rejects.toMatchObject({ problems: [expect.objectContaining({ path: "nodes[0].payload" })] });
  });
});

describe("a run's inbox is bounded and read by name (DESIGN §13.1)", () => {
  /** A run held at `before` (a gate), then waiting for `x` twice: what is sent meanwhile stays in its inbox. */
  async function heldRun(options: Parameters<typeof testEngine>[0] = {}) {
    const g = gate();
    const { engine } = await testEngine({ agents: { gate: g.agent }, ...options });
    await engine.registerWorkflow({
      id: "inbox",
      nodes: [
        { node_id: "before", agent_type: "gate", next_on_success: "first" },
        { node_id: "first", agent_type: "wait_event", payload: { event: "x" }, next_on_success: "second" },
        { node_id: "second", agent_type: "wait_event", payload: { event: "x" } },
      ],
    });
    const run = await engine.startRun("inbox");
    await g.started;
    return { engine, run, open: g.open };
  }

  it("holds at most 1,000 events: the next send is refused (LimitError), nothing of it stored; waits take the oldest of their name", async () => {
    const { engine, run, open } = await heldRun();
    // Other names first: a wait looks its name up, whatever else the inbox holds.
    await Promise.all(Array.from({ length: 998 }, (_, i) => engine.sendEvent(run.run_id, "other", { i })));
    await engine.sendEvent(run.run_id, "x", { n: 1 });
    await engine.sendEvent(run.run_id, "x", { n: 2 });
    const refused = await engine.sendEvent(run.run_id, "x", { n: 3 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LimitError);
    expect(refused).toMatchObject({ scope: "client", retryAfterSeconds: 5 });
    expect((refused as Error).message).toBe(
      `the inbox of run ${run.run_id} is full: it holds at most 1000 events that no wait_event took yet; ` +
        'send "x" again once a wait_event of the run has taken events, or send a reference to large data',
    );
    const received = (await engine.listEvents(run.run_id, { limit: 2000 })).filter((e) => e.type === "event.received");
    expect(received).toHaveLength(1000);
    open();
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.map((n) => n.output)).toEqual([{ opened: true }, { n: 1 }, { n: 2 }]);
  });

  it("holds at most 16 MiB of payloads: a send past it is refused with the sizes", async () => {
    const { engine, run } = await heldRun({ maxPayloadBytes: 4 * 1024 * 1024 });
    const big = { data: "a".repeat(3 * 1024 * 1024) };
    for (let i = 0; i < 5; i++) await engine.sendEvent(run.run_id, "x", big);
    const refused = await engine.sendEvent(run.run_id, "x", big).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LimitError);
    expect((refused as Error).message).toContain(
      `it holds at most 16777216 bytes of payloads (it holds ${5 * (3 * 1024 * 1024 + 11)} bytes; this event is ${3 * 1024 * 1024 + 11})`,
    );
    // A small one still fits.
    await expect(engine.sendEvent(run.run_id, "x", { small: true })).resolves.toMatchObject({ buffered: true });
  });
});

describe("events by key (publishEvent)", () => {
  const keyed = (buffer?: number) => ({
    id: `orders${buffer ?? ""}`,
    nodes: [
      {
        node_id: "paid",
        agent_type: "wait_event",
        payload: {
          event: "paid",
          key: "{{ input.order }}",
          ...(buffer === undefined ? {} : { buffer_seconds: buffer }),
        },
      },
    ],
  });

  it("reaches every run waiting on that name and key, and no other", async () => {
    const { engine } = await testEngine();
    await engine.registerWorkflow(keyed());
    const runs = [];
    for (const order of ["o-1", "o-1", "o-2"]) {
      const parked = nextEvent(engine, waiting("paid"));
      runs.push(await engine.startRun("orders", { input: { order } }));
      await parked;
    }
    const [a, b, c] = runs as [(typeof runs)[0], (typeof runs)[0], (typeof runs)[0]];
    const answer = await engine.publishEvent("paid", "o-1", { total: 5 });
    expect(answer.delivered_to.map((d) => d.run_id).sort()).toEqual([a.run_id, b.run_id].sort());
    for (const r of [a, b]) expect((await engine.waitForRun(r.run_id)).output).toEqual({ paid: { total: 5 } });
    // Published again under one idempotency key: the second is a duplicate and reaches nobody.
    const once = await engine.publishEvent("paid", "o-2", { total: 6 }, { idempotency_key: "p1" });
    expect(once.delivered_to.map((d) => d.run_id)).toEqual([c.run_id]);
    expect(await engine.publishEvent("paid", "o-2", { total: 6 }, { idempotency_key: "p1" })).toEqual({
      event_id: once.event_id,
      delivered_to: [],
      duplicate: true,
      started: [],
      not_started: [],
    });
    expect((await engine.waitForRun(c.run_id)).output).toEqual({ paid: { total: 6 } });
    // A run's own event reaches a keyed wait too.
    const parked = nextEvent(engine, waiting("paid"));
    const d = await engine.startRun("orders", { input: { order: "o-3" } });
    await parked;
    expect((await engine.sendEvent(d.run_id, "paid", { total: 7 })).delivered_to).toMatchObject({ node_id: "paid" });
  });

  it("is kept for buffer_seconds for waits on that key that start within that time", async () => {
    const { engine, clock } = await testEngine();
    await engine.registerWorkflow(keyed(60));
    const early = await engine.publishEvent("paid", "o-9", { total: 9 });
    expect(early.delivered_to).toEqual([]);
    await clock.advance(59_000);
    const within = await engine.startRun("orders60", { input: { order: "o-9" } });
    expect((await engine.waitForRun(within.run_id)).output).toEqual({ paid: { total: 9 } });
    await clock.advance(2_000);
    const parked = nextEvent(engine, waiting("paid"));
    const after = await engine.startRun("orders60", { input: { order: "o-9" } });
    await parked;
    expect((await engine.getRun(after.run_id)).nodes[0]).toMatchObject({ state: "WAITING" });
    // Without a buffer a wait that starts later does not see it.
    await engine.registerWorkflow(keyed());
    await engine.publishEvent("paid", "o-8", 1);
    const parked2 = nextEvent(engine, waiting("paid"));
    const unbuffered = await engine.startRun("orders", { input: { order: "o-8" } });
    await parked2;
    expect((await engine.getRun(unbuffered.run_id)).nodes[0]).toMatchObject({ state: "WAITING" });
  });
});

describe("long waits on the system clock", () => {
  it("a timer for a wait past 24.8 days is capped, not fired at once (Node's TimeoutOverflowWarning)", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on("warning", onWarning);
    const handle = systemClock.setTimeout(() => {}, 30 * 24 * 3600 * 1000);
    // Node emits the warning (and runs the timer after 1 ms) when the delay overflows; the event comes on a next tick.
    await new Promise((resolve) => setImmediate(resolve));
    systemClock.clearTimeout(handle);
    process.off("warning", onWarning);
    expect(warnings).not.toContain("TimeoutOverflowWarning");
  });
});
