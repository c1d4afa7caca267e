import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { TimerHandle } from "../../src/clock.js";
import { Notifier } from "../../src/engine/telemetry/notifier.js";
import {
  type Engine,
  type Json,
  ManualClock,
  NonRetryableError,
  type Notification,
  type RunEvent,
} from "../../src/index.js";
import { nextEvent, testEngine } from "../helpers.js";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const traceparent = `00-${TRACE}-00f067aa0ba902b7-01`;
const agents = {
  ok: () => "ok",
  bad: () => {
    throw new NonRetryableError("no");
  },
};
const fails = { id: "fails", nodes: [{ node_id: "a", agent_type: "bad" }] };
const succeeds = { id: "ok", nodes: [{ node_id: "a", agent_type: "ok" }] };
// No sweep timer of 1 s: every 1 s / 2 s timer armed in these tests is a notifier's retry.
const quiet = { agents, sweepIntervalMs: 3_600_000, logger: pino({ level: "silent" }) };

/** A ManualClock that tells when a timer of a given length is armed (so a test advances only after it). */
class WatchedClock extends ManualClock {
  private watchers: { ms: number; resolve: () => void }[] = [];
  override setTimeout(fn: () => void, ms: number): TimerHandle {
    const handle = super.setTimeout(fn, ms);
    for (const w of this.watchers.filter((x) => x.ms === ms)) w.resolve();
    this.watchers = this.watchers.filter((x) => x.ms !== ms);
    return handle;
  }
  /** Resolves when a timer of `ms` is armed after this call (bound the wait with `within`). */
  armed(ms: number): Promise<void> {
    return new Promise((resolve) => this.watchers.push({ ms, resolve }));
  }
}

/** Bounds a wait (real time, as a safety net only: tests synchronise on the awaited promise). */
function within<T>(p: Promise<T>, what: string, ms = 5000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  });
  return Promise.race([p, bound]).finally(() => clearTimeout(timer));
}

const notifyFailed = (engine: Engine) => nextEvent(engine, (e) => e.type === "notify.failed");

interface Received {
  headers: IncomingHttpHeaders;
  body: Notification;
}

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

/** A real webhook on 127.0.0.1 answering the n-th request (1-based) with `status(n)`. */
async function webhook(status: (n: number) => number) {
  const received: Received[] = [];
  let waiters: { n: number; resolve: (r: Received) => void }[] = [];
  const server = createServer((req, res) => {
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (text += chunk));
    req.on("end", () => {
      received.push({ headers: req.headers, body: JSON.parse(text) as Notification });
      res.writeHead(status(received.length)).end();
      for (const w of waiters) if (received[w.n - 1]) w.resolve(received[w.n - 1] as Received);
      waiters = waiters.filter((w) => !received[w.n - 1]);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  /** Resolves with the n-th request once it has arrived (or at once if it has). */
  const request = (n: number) => {
    const arrived = new Promise<Received>((resolve) => {
      const r = received[n - 1];
      if (r) resolve(r);
      else waiters.push({ n, resolve });
    });
    return within(arrived, `webhook request ${n}`);
  };
  return { url, received, request };
}

describe("notifiers", () => {
  it("POSTs run.failed to a webhook with the trace id in the body and the traceparent header", async () => {
    const hook = await webhook(() => 204);
    const { engine, clock } = await testEngine({ ...quiet, notify: { webhooks: [hook.url] } });
    await engine.registerWorkflow(fails);
    const run = await engine.startRun("fails", { traceparent });
    const { headers, body } = await hook.request(1);
    expect(body).toMatchObject({ type: "run.failed", run_id: run.run_id, node_id: null, visit: null, trace_id: TRACE });
    expect(body.at).toBe(new Date(clock.now()).toISOString());
    expect(body.data).toMatchObject({ status: "FAILED" });
    expect(headers["content-type"]).toBe("application/json");
    expect(headers.traceparent).toMatch(new RegExp(`^00-${TRACE}-[0-9a-f]{16}-01$`));
    expect(hook.received.map((r) => r.body.type)).toEqual(["run.failed"]); // node.failed etc. do not notify
  });

  it("retries a webhook answering 500 with backoff 1 s, 2 s until it answers 200", async () => {
    const hook = await webhook((n) => (n <= 2 ? 500 : 200));
    const clock = new WatchedClock();
    const { engine } = await testEngine({ ...quiet, clock, notify: { webhooks: [hook.url] } });
    await engine.registerWorkflow(fails);
    const [first, second] = [clock.armed(1000), clock.armed(2000)];
    const run = await engine.startRun("fails", { traceparent });
    await hook.request(1);
    await within(first, "the 1 s retry timer");
    await clock.advance(1000);
    await hook.request(2);
    await within(second, "the 2 s retry timer");
    await clock.advance(2000);
    const third = await hook.request(3);
    expect(third.body).toMatchObject({ type: "run.failed", run_id: run.run_id, trace_id: TRACE });
    await clock.advance(60_000);
    expect(hook.received).toHaveLength(3);
    expect((await engine.listEvents(run.run_id)).map((e) => e.type)).not.toContain("notify.failed");
  });

  it("records notify.failed after the retries of a webhook that always fails, and keeps running runs", async () => {
    const hook = await webhook(() => 500);
    const clock = new WatchedClock();
    const lines: string[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => lines.push(line) });
    const { engine } = await testEngine({ ...quiet, clock, logger, notify: { webhooks: [hook.url], retries: 2 } });
    await engine.registerWorkflow(fails);
    await engine.registerWorkflow(succeeds);
    const [first, second] = [clock.armed(1000), clock.armed(2000)];
    const failed = notifyFailed(engine);
    const run = await engine.startRun("fails", { traceparent });
    await hook.request(1);
    await within(first, "the 1 s retry timer");
    const other = await engine.startRun("ok"); // runs while the notification waits for its retry
    expect((await engine.waitForRun(other.run_id)).status).toBe("SUCCEEDED");
    await clock.advance(1000);
    await hook.request(2);
    await within(second, "the 2 s retry timer");
    await clock.advance(2000);
    const event = await within(failed, "notify.failed");
    expect(hook.received).toHaveLength(3);
    expect(event).toMatchObject({ run_id: run.run_id, trace_id: TRACE, node_id: null });
    expect(event.data).toEqual({ target: hook.url, type: "run.failed", error: "HTTP 500", attempts: 3 });
    expect((await engine.listEvents(run.run_id)).at(-1)?.type).toBe("notify.failed");
    const line = lines.find((l) => l.includes("notification failed for good") && l.includes(run.run_id));
    // The log line names the span id its requests' traceparent carried (one per notification).
    const spanIds = new Set(hook.received.map((r) => String(r.headers.traceparent).split("-")[2]));
    expect(spanIds.size).toBe(1);
    expect(JSON.parse(line ?? "{}")).toMatchObject({ trace_id: TRACE, span_id: [...spanIds][0] });
    const later = await engine.startRun("ok");
    expect((await engine.waitForRun(later.run_id)).status).toBe("SUCCEEDED");
  });

  it("passes the notification to the function hook", async () => {
    const seen: Notification[] = [];
    let resolve: (n: Notification) => void = () => {};
    const got = new Promise<Notification>((r) => (resolve = r));
    const hook = (n: Notification) => {
      seen.push(n);
      resolve(n);
    };
    const { engine } = await testEngine({ ...quiet, notify: { hook } });
    await engine.registerWorkflow(fails);
    const run = await engine.startRun("fails", { traceparent });
    expect(await within(got, "the hook")).toMatchObject({ type: "run.failed", run_id: run.run_id, trace_id: TRACE });
    expect(seen).toHaveLength(1);
  });

  it("a hook that throws does not affect the run; it is retried, then recorded", async () => {
    const clock = new WatchedClock();
    let calls = 0;
    const hook = () => {
      calls++;
      throw new Error("hook down");
    };
    const { engine } = await testEngine({ ...quiet, clock, notify: { hook, retries: 1 } });
    await engine.registerWorkflow(fails);
    await engine.registerWorkflow(succeeds);
    const retry = clock.armed(1000);
    const failed = notifyFailed(engine);
    const run = await engine.startRun("fails", { traceparent });
    const done = await engine.waitForRun(run.run_id);
    await within(retry, "the 1 s retry timer");
    await clock.advance(1000);
    const { data } = await within(failed, "notify.failed");
    expect(data).toEqual({ target: "hook", type: "run.failed", error: "hook down", attempts: 2 });
    expect(calls).toBe(2);
    expect(await engine.getRun(run.run_id)).toEqual(done);
    const other = await engine.startRun("ok");
    expect((await engine.waitForRun(other.run_id)).status).toBe("SUCCEEDED");
  });

  it("notifies review.requested and run.needs_attention only, after notify returns; stop abandons retries", async () => {
    const clock = new ManualClock();
    const seen: Notification[] = [];
    const recorded: Json[] = [];
    const notifier = new Notifier({
      options: { hook: (n) => void seen.push(n) },
      clock,
      logger: pino({ level: "silent" }),
      recordFailure: async (_run, _trace, data) => void recorded.push(data),
    });
    const event = (type: RunEvent["type"], node_id: string | null, visit: number | null, seq: number): RunEvent => ({
      run_id: "r1",
      type,
      node_id,
      visit,
      trace_id: TRACE,
      at: clock.now(),
      data: {},
      seq,
    });
    notifier.notify([
      event("node.started", "a", 1, 1),
      event("review.requested", "review", 2, 2),
      event("run.needs_attention", null, null, 3),
    ]);
    expect(seen).toHaveLength(0); // only enqueued
    await clock.advance(0);
    expect(seen.map((n) => [n.type, n.node_id, n.visit])).toEqual([
      ["review.requested", "review", 2],
      ["run.needs_attention", null, null],
    ]);

    let calls = 0;
    const failing = new Notifier({
      options: {
        hook: async () => {
          calls++;
          throw new Error("down");
        },
      },
      clock,
      logger: pino({ level: "silent" }),
      recordFailure: async (_run, _trace, data) => void recorded.push(data),
    });
    failing.notify([event("run.failed", null, null, 4)]);
    await clock.advance(0);
    failing.stop();
    await clock.advance(600_000);
    expect(calls).toBe(1);
    expect(recorded).toEqual([]);
  });
});
