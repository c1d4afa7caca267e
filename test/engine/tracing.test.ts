/**
 * OpenTelemetry traces (DESIGN §9) with the SDK's in-memory exporter: a run's start and end
 * spans, one `skein.attempt` span per attempt with the run's trace and parent, the caller's
 * active context as the run's parent, handlers' and external workers' own spans nested under
 * their attempt, held visits' spans, and a run that outlives its engine (closed, or SIGKILLed:
 * test/fixtures/trace-child.ts) staying in one trace; no span holds a secret a failed attempt's error carried.
 */

import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { context, ROOT_CONTEXT, type Span, type SpanContext, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createServer } from "../../src/http/server.js";
import { systemClock, type Task } from "../../src/index.js";
import { HttpWorker } from "../../src/worker/http-worker.js";
import { Child, type Message, within } from "../fixtures/child.js";
import { startOpenAIServer } from "../fixtures/openai-server.js";
import { describeSqlite, nextEvent, tempDir, testEngine } from "../helpers.js";
import { json, startServer } from "../local-server.js";

const FAN = {
  id: "fan",
  nodes: [
    { node_id: "a", agent_type: "step" },
    { node_id: "b", agent_type: "step", depends_on: ["a"] },
    { node_id: "c", agent_type: "step", depends_on: ["a"] },
    { node_id: "d", agent_type: "step", depends_on: ["b", "c"] },
  ],
};

const ONE = { id: "one", nodes: [{ node_id: "a", agent_type: "step", retry_interval: 0 }] };

let exporter: InMemorySpanExporter;
let provider: BasicTracerProvider;
/** Resolves the promises of `ended` when a matching span ends: no polling for spans. */
let waiters: { match: (s: ReadableSpan) => boolean; resolve: (s: ReadableSpan) => void }[] = [];

beforeEach(() => {
  exporter = new InMemorySpanExporter();
  const notify: SpanProcessor = {
    onStart: () => undefined,
    onEnd: (span) => {
      for (const w of waiters.filter((x) => x.match(span))) {
        waiters = waiters.filter((x) => x !== w);
        w.resolve(span);
      }
    },
    forceFlush: async () => undefined,
    shutdown: async () => undefined,
  };
  provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter), notify] });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
});

afterEach(async () => {
  trace.disable();
  context.disable();
  waiters = [];
  await provider.shutdown();
});

/** A span that has ended (now or later). */
function ended(match: (s: ReadableSpan) => boolean): Promise<ReadableSpan> {
  const done = exporter.getFinishedSpans().find(match);
  if (done) return Promise.resolve(done);
  return new Promise((resolve) => waiters.push({ match, resolve }));
}

const named = (name: string) => exporter.getFinishedSpans().filter((s) => s.name === name);
const byName = (name: string) => (s: ReadableSpan) => s.name === name;
const idOf = (s: ReadableSpan | Span) => s.spanContext().spanId;
const traceOf = (s: ReadableSpan) => s.spanContext().traceId;

/** The span context a W3C traceparent names, as a worker in another process would read it. */
function remote(traceparent: string): SpanContext {
  const [, traceId, spanId] = traceparent.split("-") as [string, string, string];
  return { traceId, spanId, traceFlags: 1, isRemote: true };
}

describe("traces (DESIGN §9)", () => {
  it("gives a fan-out/join run a start span, four attempt spans under it and an end span, in one trace", async () => {
    const { engine } = await testEngine({ agents: { step: (t: Task) => ({ node: t.node_id }) } });
    await engine.registerWorkflow(FAN);
    const run = await engine.startRun(FAN.id, { input: {} });
    await engine.waitForRun(run.run_id);
    const end = await ended(byName("skein.run.end"));

    const [start] = named("skein.run.start");
    if (!start) throw new Error("no skein.run.start span");
    expect(start.parentSpanContext).toBeUndefined(); // nothing was active: a new trace
    expect(traceOf(start)).toBe(run.trace_id);
    expect(run.traceparent).toBe(`00-${run.trace_id}-${idOf(start)}-01`);
    expect(start.attributes).toMatchObject({ "skein.run_id": run.run_id, "skein.workflow_id": "fan" });

    const attempts = named("skein.attempt");
    expect(attempts.map((s) => s.attributes["skein.node_id"]).sort()).toEqual(["a", "b", "c", "d"]);
    for (const s of attempts) {
      expect(traceOf(s)).toBe(run.trace_id);
      expect(s.parentSpanContext?.spanId).toBe(idOf(start));
      const node = s.attributes["skein.node_id"];
      expect(s.attributes).toEqual({
        "skein.run_id": run.run_id,
        "skein.node_id": node,
        "skein.visit": 1,
        "skein.attempt": 1,
        "skein.execution_id": `${run.run_id}:${node}:1`,
        "skein.agent_type": "step",
        "skein.outcome": "succeeded",
      });
    }
    expect(traceOf(end)).toBe(run.trace_id);
    expect(end.parentSpanContext?.spanId).toBe(idOf(start));
    expect(end.attributes).toMatchObject({ "skein.run_id": run.run_id, "skein.status": "SUCCEEDED" });
  });

  it("starts a run inside the caller's active span in the caller's trace, and a given traceparent wins", async () => {
    const { engine } = await testEngine({ agents: { step: () => ({}) } });
    await engine.registerWorkflow(ONE);
    const caller = trace.getTracer("caller");
    const { run, span } = await caller.startActiveSpan("caller.request", async (span) => {
      const run = await engine.startRun(ONE.id, { input: {} });
      span.end();
      return { run, span };
    });
    await engine.waitForRun(run.run_id);
    const attempt = await ended(byName("skein.attempt"));
    const start = named("skein.run.start")[0] as ReadableSpan;
    expect(run.trace_id).toBe(span.spanContext().traceId);
    expect(start.parentSpanContext?.spanId).toBe(idOf(span));
    // The attempt is the run's, not the caller's (whose context the flush may have run in).
    expect(attempt.parentSpanContext?.spanId).toBe(idOf(start));

    const given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const other = await caller.startActiveSpan("caller.other", async (s) => {
      const r = await engine.startRun(ONE.id, { input: {}, traceparent: given });
      s.end();
      return r;
    });
    expect(other.trace_id).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
    const second = named("skein.run.start").find((s) => s.attributes["skein.run_id"] === other.run_id);
    expect(second?.parentSpanContext).toMatchObject({ spanId: "00f067aa0ba902b7", isRemote: true });
  });

  it("keeps a retried attempt in the run's trace, the failed attempt's span marked retrying", async () => {
    const { engine } = await testEngine({
      agents: {
        step: (t: Task) => {
          if (t.attempt === 1) throw new Error("transient");
          return {};
        },
      },
    });
    await engine.registerWorkflow(ONE);
    const run = await engine.startRun(ONE.id, { input: {} });
    await engine.waitForRun(run.run_id);
    await ended(byName("skein.run.end"));
    const start = named("skein.run.start")[0] as ReadableSpan;
    const attempts = named("skein.attempt").sort(
      (x, y) => Number(x.attributes["skein.attempt"]) - Number(y.attributes["skein.attempt"]),
    );
    expect(attempts.map((s) => [s.attributes["skein.attempt"], s.attributes["skein.outcome"]])).toEqual([
      [1, "retrying"],
      [2, "succeeded"],
    ]);
    expect(attempts[0]?.status).toMatchObject({ code: 2, message: "transient" });
    for (const s of attempts) {
      expect(traceOf(s)).toBe(run.trace_id);
      expect(s.parentSpanContext?.spanId).toBe(idOf(start));
    }
  });

  it("holds no secret in any span of a failed attempt whose error carried it (percent-encoded in a URL path)", async () => {
    const value = `sk_${randomBytes(8).toString("hex")} é~+`;
    // Echoes the path it was asked (percent-encoded) and its decoded form into the error's excerpt.
    const service = await startServer((req, res) => {
      const path = `${req.url} ${decodeURIComponent(req.url)}`;
      json(res, service.requests.length === 1 ? 503 : 404, { error: path });
    });
    try {
      const { engine } = await testEngine({ secrets: { KEY: { value, hosts: ["127.0.0.1"] } } });
      await engine.registerWorkflow({
        id: "leak",
        nodes: [
          {
            node_id: "a",
            agent_type: "http",
            retry_count: 1,
            retry_interval: 0,
            payload: { url: "{{ input.base }}/items/{{ secrets.KEY }}" },
          },
        ],
      });
      const run = await engine.waitForRun((await engine.startRun("leak", { input: { base: service.url } })).run_id);
      expect(run.status).toBe("FAILED");
      await ended(byName("skein.run.end"));
      // The service got the secret (the request is right) and answered with it, twice.
      expect(service.requests.map((r) => decodeURIComponent(r.url))).toEqual([`/items/${value}`, `/items/${value}`]);

      const attempts = named("skein.attempt");
      expect(attempts.map((s) => s.attributes["skein.outcome"]).sort()).toEqual(["failed", "retrying"]);
      for (const s of attempts) expect(s.status.message).toContain("/items/[secret KEY]");
      expect(named("skein.run.end")[0]?.status.message).toContain("/items/[secret KEY]");
      const forms = [value, encodeURIComponent(value), new URL(`http://h/${value}`).pathname.slice(1)];
      for (const span of exporter.getFinishedSpans()) {
        const seen = JSON.stringify({
          name: span.name,
          attributes: span.attributes,
          status: span.status,
          events: span.events,
          links: span.links,
        });
        for (const form of forms) expect(seen, `${span.name} holds ${form}`).not.toContain(form);
      }
    } finally {
      await service.close();
    }
  });

  it("marks an attempt span timeout when its deadline passes, and cancelled when its run is cancelled", async () => {
    const { engine, clock } = await testEngine({ agents: { step: () => new Promise(() => undefined) } }); // hangs
    await engine.registerWorkflow({
      id: "slow",
      nodes: [{ node_id: "a", agent_type: "step", timeout: 1, retry_count: 0 }],
    });
    let started = nextEvent(engine, (e) => e.type === "node.started");
    const timedOut = await engine.startRun("slow", { input: {} });
    await started;
    await clock.advance(1000);
    expect((await engine.waitForRun(timedOut.run_id)).status).toBe("FAILED");
    const first = await ended((s) => s.name === "skein.attempt" && s.attributes["skein.run_id"] === timedOut.run_id);
    expect(first.attributes).toMatchObject({ "skein.outcome": "timeout", "skein.reason": "timeout" });
    expect(first.status.code).toBe(2);
    const failedEnd = await ended(byName("skein.run.end"));
    expect(failedEnd.attributes["skein.status"]).toBe("FAILED");
    expect(failedEnd.status.code).toBe(2);

    started = nextEvent(engine, (e) => e.type === "node.started");
    const cancelled = await engine.startRun("slow", { input: {} });
    await started;
    await engine.cancelRun(cancelled.run_id);
    const second = await ended((s) => s.name === "skein.attempt" && s.attributes["skein.run_id"] === cancelled.run_id);
    expect(second.attributes["skein.outcome"]).toBe("cancelled");
  });

  it("runs an in-process handler inside its attempt span: the handler's own spans nest under it", async () => {
    const seen: string[] = [];
    const { engine } = await testEngine({
      agents: {
        step: (t: Task) =>
          trace.getTracer("agent").startActiveSpan("agent.llm_call", async (span) => {
            await new Promise((resolve) => setImmediate(resolve)); // the context survives an await
            trace.getTracer("agent").startSpan("agent.fetch").end(); // under the active agent span
            seen.push(t.traceparent);
            span.end();
            return {};
          }),
      },
    });
    await engine.registerWorkflow(ONE);
    const run = await engine.startRun(ONE.id, { input: {} });
    await engine.waitForRun(run.run_id);
    const attempt = await ended(byName("skein.attempt"));
    const [call] = named("agent.llm_call");
    const [fetch] = named("agent.fetch");
    expect(call?.parentSpanContext?.spanId).toBe(idOf(attempt));
    expect(fetch?.parentSpanContext?.spanId).toBe(call && idOf(call));
    expect(call && traceOf(call)).toBe(run.trace_id);
    expect(seen).toEqual([`00-${run.trace_id}-${idOf(attempt)}-01`]);
  });

  it("gives an agent node's model turns and tool calls GenAI spans under its attempt: model, tokens, tool name and call id", async () => {
    const model = await startOpenAIServer();
    try {
      model.reply(
        {
          tool_calls: [{ id: "c1", name: "lookup", arguments: "{}" }],
          usage: { prompt_tokens: 12, completion_tokens: 3 },
        },
        { text: "Done.", usage: { prompt_tokens: 20, completion_tokens: 2 } },
      );
      const { engine } = await testEngine({
        llm: { providers: { default: { base_url: model.baseUrl } } },
        agents: { orders: () => "shipped" },
      });
      await engine.registerWorkflow({
        id: "assist",
        nodes: [
          {
            node_id: "a",
            agent_type: "agent",
            payload: { model: "gpt-test", input: "?", tools: [{ name: "lookup", agent_type: "orders" }] },
          },
        ],
      });
      const run = await engine.startRun("assist", { input: {} });
      expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
      const attempt = await ended(byName("skein.attempt"));
      const chats = named("chat gpt-test");
      expect(chats.map((s) => s.attributes)).toEqual([
        expect.objectContaining({
          "skein.step": "turn:1",
          "gen_ai.operation.name": "chat",
          "gen_ai.request.model": "gpt-test",
          "gen_ai.usage.input_tokens": 12,
          "gen_ai.usage.output_tokens": 3,
          "gen_ai.response.finish_reasons": ["tool_calls"],
        }),
        expect.objectContaining({
          "skein.step": "turn:2",
          "gen_ai.usage.input_tokens": 20,
          "gen_ai.usage.output_tokens": 2,
        }),
      ]);
      const [tool] = named("execute_tool lookup");
      expect(tool?.attributes).toMatchObject({
        "skein.step": "tool:1:0",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "c1",
      });
      for (const s of [...chats, tool]) expect(s?.parentSpanContext?.spanId).toBe(idOf(attempt));
    } finally {
      await model.close();
    }
  });

  it("gives each durable step that runs a skein.step span under its attempt's; a replayed step has none", async () => {
    const { engine } = await testEngine({
      agents: {
        step: async (t: Task) => {
          await t.step("plan", () => ({ topics: 2 }));
          await t.step("search", () => {
            if (t.attempt === 1) throw new Error("rate limited");
            return { hits: 3 };
          });
          return {};
        },
      },
    });
    await engine.registerWorkflow(ONE);
    const run = await engine.startRun(ONE.id, { input: {} });
    expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
    await ended((s) => s.name === "skein.attempt" && s.attributes["skein.attempt"] === 2);
    const attempts = named("skein.attempt");
    const steps = named("skein.step").map((s) => ({
      step: s.attributes["skein.step"],
      attempt: s.attributes["skein.attempt"],
      parent: s.parentSpanContext?.spanId,
      failed: s.status.code === 2,
    }));
    const attemptSpan = (n: number) => idOf(attempts.find((a) => a.attributes["skein.attempt"] === n) as ReadableSpan);
    expect(steps).toEqual([
      { step: "plan", attempt: 1, parent: attemptSpan(1), failed: false },
      { step: "search", attempt: 1, parent: attemptSpan(1), failed: true },
      { step: "search", attempt: 2, parent: attemptSpan(2), failed: false },
    ]);
  });

  it("gives an external worker the traceparent of its attempt span, which its own span can parent on", async () => {
    const { engine } = await testEngine();
    await engine.registerWorkflow(ONE);
    const run = await engine.startRun(ONE.id, { input: {} });
    const [task] = await engine.claimTasks({ agent_types: ["step"], worker_id: "w1" });
    if (!task) throw new Error("nothing claimed");
    // The worker, in its own process: its span's parent comes from the task alone.
    const work = trace
      .getTracer("worker")
      .startSpan("worker.work", {}, trace.setSpanContext(ROOT_CONTEXT, remote(task.traceparent)));
    work.end();
    await engine.completeTask(task.execution_id, { worker_id: "w1", attempt: task.attempt, output: {} });
    await engine.waitForRun(run.run_id);
    const attempt = await ended(byName("skein.attempt"));
    const start = named("skein.run.start")[0] as ReadableSpan;
    expect(task.traceparent).toBe(`00-${run.trace_id}-${idOf(attempt)}-01`);
    expect(attempt.parentSpanContext?.spanId).toBe(idOf(start));
    expect(attempt.attributes).toMatchObject({ "skein.holder": "worker:w1", "skein.outcome": "succeeded" });
    const [worker] = named("worker.work");
    expect(worker?.parentSpanContext?.spanId).toBe(idOf(attempt));
    expect(worker && traceOf(worker)).toBe(run.trace_id);
  });

  it("gives a review, an event wait and a child run a span each, from the hold to the decision, event or child's end", async () => {
    const { engine } = await testEngine({ agents: { step: (t: Task) => ({ node: t.node_id }) } });
    await engine.registerWorkflow({ id: "child", nodes: [{ node_id: "inner", agent_type: "step" }] });
    await engine.registerWorkflow({
      id: "held",
      nodes: [
        { node_id: "check", agent_type: "human_review", payload: { assignees: ["editor"] } },
        { node_id: "paid", agent_type: "wait_event", depends_on: ["check"], payload: { event: "payment" } },
        { node_id: "sub", agent_type: "workflow", depends_on: ["paid"], payload: { workflow_id: "child" } },
      ],
    });
    const requested = nextEvent(engine, (e) => e.type === "review.requested");
    const run = await engine.startRun("held", { input: {} });
    await requested;
    const waiting = nextEvent(engine, (e) => e.type === "node.waiting" && e.node_id === "paid");
    await engine.review(run.run_id, "check", { decision: "approve", by: "editor" });
    await waiting;
    await engine.sendEvent(run.run_id, "payment", { amount: 12 });
    expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
    await ended(byName("skein.run.end"));
    const start = named("skein.run.start")[0] as ReadableSpan;
    const [review] = named("skein.review");
    const [wait] = named("skein.event_wait");
    const [child] = named("skein.child_run");
    for (const s of [review, wait, child]) {
      expect(s && traceOf(s)).toBe(run.trace_id);
      expect(s?.parentSpanContext?.spanId).toBe(idOf(start));
      expect(s?.attributes["skein.outcome"]).toBe("succeeded");
    }
    expect(review?.attributes).toMatchObject({
      "skein.node_id": "check",
      "skein.execution_id": `${run.run_id}:check:1`,
    });
    expect(wait?.attributes).toMatchObject({ "skein.node_id": "paid", "skein.event": "payment" });
    const childEnd = named("skein.run.end").find((s) => s.attributes["skein.run_id"] !== run.run_id);
    const childRun = String(childEnd?.attributes["skein.run_id"]);
    expect(child?.attributes).toMatchObject({ "skein.node_id": "sub", "skein.child_run_id": childRun });
    // The child run is in the parent's trace, its attempt and its end under its child_run span.
    expect((await engine.getRun(childRun)).trace_id).toBe(run.trace_id);
    const inner = named("skein.attempt").find((s) => s.attributes["skein.node_id"] === "inner");
    expect(inner && traceOf(inner)).toBe(run.trace_id);
    expect(inner?.parentSpanContext?.spanId).toBe(child && idOf(child));
    expect(childEnd?.parentSpanContext?.spanId).toBe(child && idOf(child));
  });

  it("runs a `skein worker`'s handler under the attempt span it claimed over HTTP", async () => {
    const { engine } = await testEngine({ clock: systemClock });
    await engine.registerWorkflow(ONE);
    const app = await createServer({ engine });
    await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const { port } = app.server.address() as { port: number };
      const worker = new HttpWorker({
        server: `http://127.0.0.1:${port}`,
        workerId: "w1",
        agents: {
          step: async () => {
            await trace.getTracer("agent").startActiveSpan("agent.remote_call", async (span) => {
              await new Promise((resolve) => setImmediate(resolve));
              span.end();
            });
            return {};
          },
        },
      });
      const working = worker.run();
      const run = await engine.startRun(ONE.id, { input: {} });
      await engine.waitForRun(run.run_id);
      worker.stop();
      await working;
      const attempt = await ended(byName("skein.attempt"));
      const call = await ended(byName("agent.remote_call"));
      expect(attempt.attributes).toMatchObject({ "skein.holder": "worker:w1", "skein.outcome": "succeeded" });
      expect(call.parentSpanContext?.spanId).toBe(idOf(attempt));
      expect(traceOf(call)).toBe(run.trace_id);
    } finally {
      await app.close();
    }
  });

  it("keeps a run's trace when a new engine re-runs the attempt another engine left unfinished", async () => {
    const first = await testEngine({ agents: { step: () => new Promise(() => undefined) } }); // hangs
    await first.engine.registerWorkflow(ONE);
    const started = nextEvent(first.engine, (e) => e.type === "node.started");
    const run = await first.engine.startRun(ONE.id, { input: {} });
    await started;
    await first.engine.close({ timeoutMs: 50 }); // the attempt is still running: the next engine recovers it

    const second = await testEngine({ database: first.database, agents: { step: () => ({ again: true }) } });
    const done = await second.engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    await ended(byName("skein.run.end"));
    const start = named("skein.run.start")[0] as ReadableSpan;
    const attempts = named("skein.attempt");
    expect(attempts.map((s) => s.attributes["skein.outcome"]).sort()).toEqual(["succeeded", "unknown"]);
    for (const s of attempts) {
      expect(traceOf(s)).toBe(run.trace_id);
      expect(s.parentSpanContext?.spanId).toBe(idOf(start));
    }
    const end = named("skein.run.end")[0];
    expect(end?.parentSpanContext?.spanId).toBe(idOf(start));
  });
});

describeSqlite("traces across a crash (SIGKILL)", () => {
  const children: Child[] = [];
  afterEach(async () => {
    await Promise.all(children.splice(0).map((c) => c.kill()));
  });

  it("joins the killed engine's trace: the attempt re-run by the next engine has the run's trace and parent", async () => {
    const db = join(tempDir(), "skein.db");
    const child = new Child("test/fixtures/trace-child.ts", [db]);
    children.push(child);
    const run = (await child.waitFor("run", (m) => m.type === "run")) as Message & { run_id: string; trace_id: string };
    const hung = (await child.waitFor("hung", (m) => m.type === "hung")) as Message & { traceparent: string };
    const spanOf = (name: string) =>
      child.waitFor(name, (m) => m.type === "span" && m.name === name) as Promise<
        Message & { trace_id: string; span_id: string; parent_span_id: string | null }
      >;
    const start = await spanOf("skein.run.start");
    const work = await spanOf("agent.work");
    await child.kill(); // its attempt span never ends: the process is gone

    const killedAttempt = hung.traceparent.split("-")[2];
    expect(start.trace_id).toBe(run.trace_id);
    expect(work).toMatchObject({ trace_id: run.trace_id, parent_span_id: killedAttempt });

    const { engine } = await testEngine({ database: `sqlite:${db}`, clock: systemClock, agents: { step: () => ({}) } });
    const done = await within(20_000, "the recovered run's end", engine.waitForRun(run.run_id));
    expect(done.status).toBe("SUCCEEDED");
    const attempt = await ended(byName("skein.attempt"));
    expect(traceOf(attempt)).toBe(run.trace_id);
    expect(attempt.parentSpanContext?.spanId).toBe(start.span_id); // the run's start span, in the dead process
    expect(attempt.attributes).toMatchObject({ "skein.node_id": "a", "skein.outcome": "succeeded" });
    expect(idOf(attempt)).not.toBe(killedAttempt);
    const end = await ended(byName("skein.run.end"));
    expect(end.parentSpanContext?.spanId).toBe(start.span_id);
  });
});
