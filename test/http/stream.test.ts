import { afterEach, describe, expect, it } from "vitest";
import type { Engine, RunEvent } from "../../src/index.js";
import { bearer, TOKENS, testApi, WORKFLOWS } from "./helpers.js";
import { closeStreams, openStream } from "./sse.js";

afterEach(closeStreams);

const open = (base: string, path: string, headers: Record<string, string> = {}) =>
  openStream(base, path, { ...bearer(TOKENS.alice), ...headers });

async function served(server: { heartbeatMs?: number } = {}) {
  const t = await testApi({ server });
  for (const w of Object.values(WORKFLOWS)) await t.engine.registerWorkflow(w);
  const base = await t.app.listen({ host: "127.0.0.1", port: 0 });
  return { ...t, base };
}

const ended = (e: RunEvent) => e.type === "run.succeeded" || e.type === "run.failed";

async function storedEvents(engine: Engine, runId: string): Promise<RunEvent[]> {
  return engine.listEvents(runId);
}

describe("GET /v1/stream", () => {
  it("sends every event of a run as it commits, in order, with its seq as the event id", async () => {
    const { engine, base } = await served();
    const stream = await open(base, "/v1/stream");
    const run = await engine.startRun("simple");
    await stream.until((s) => s.events.some(ended));
    const stored = await storedEvents(engine, run.run_id);
    expect(stream.events).toEqual(stored);
    expect(stream.ids).toEqual(stored.map((e) => String(e.seq)));
  });

  it("with run_id, sends only that run's events", async () => {
    const { engine, base } = await served();
    const run = await engine.startRun("review");
    const stream = await open(base, `/v1/stream?run_id=${run.run_id}`);
    const other = await engine.startRun("simple");
    await engine.waitForRun(other.run_id);
    await engine.cancelRun(run.run_id);
    await stream.until((s) => s.events.some((e) => e.type === "run.cancelled"));
    expect(new Set(stream.events.map((e) => e.run_id))).toEqual(new Set([run.run_id]));
  });

  it("replays a run's events after Last-Event-ID, then goes on live without a gap or a repeat", async () => {
    const { engine, base, app } = await served();
    const run = await engine.startRun("review");
    const before = await storedEvents(engine, run.run_id);
    const first = before[0];
    if (!first) throw new Error("no events");
    const stream = await open(base, `/v1/stream?run_id=${run.run_id}`, { "last-event-id": String(first.seq) });
    await stream.until((s) => s.events.length >= before.length - 1);
    const decided = await app.inject({
      method: "POST",
      url: `/v1/runs/${run.run_id}/nodes/check/review`,
      headers: bearer(TOKENS.alice),
      payload: { decision: "approve" },
    });
    expect(decided.statusCode).toBe(200);
    await stream.until((s) => s.events.some(ended));
    expect(stream.events).toEqual((await storedEvents(engine, run.run_id)).slice(1));
  });

  it("with after=<seq> replays the run's events after it (exclusive), after_seq too, then goes on live", async () => {
    const { engine, base, app } = await served();
    const run = await engine.startRun("review");
    const before = await storedEvents(engine, run.run_id);
    const second = before[1];
    if (!second) throw new Error("fewer than two events");
    const whole = await open(base, `/v1/stream?run_id=${run.run_id}&after=0`);
    const tail = await open(base, `/v1/stream?run_id=${run.run_id}&after=${second.seq}`);
    const alias = await open(base, `/v1/stream?run_id=${run.run_id}&after_seq=${second.seq}`);
    await tail.until((s) => s.events.length >= before.length - 2);
    const decided = await app.inject({
      method: "POST",
      url: `/v1/runs/${run.run_id}/nodes/check/review`,
      headers: bearer(TOKENS.alice),
      payload: { decision: "approve" },
    });
    expect(decided.statusCode).toBe(200);
    for (const s of [whole, tail, alias]) await s.until((x) => x.events.some(ended));
    const stored = await storedEvents(engine, run.run_id);
    expect(whole.events).toEqual(stored);
    expect(tail.events).toEqual(stored.slice(2));
    expect(alias.events).toEqual(stored.slice(2));
  });

  it("a reconnect's Last-Event-ID past the URL's after resumes after the later one", async () => {
    const { engine, base } = await served();
    const run = await engine.startRun("simple");
    await engine.waitForRun(run.run_id);
    const stored = await storedEvents(engine, run.run_id);
    const third = stored[2];
    if (!third) throw new Error("fewer than three events");
    const stream = await open(base, `/v1/stream?run_id=${run.run_id}&after=0`, { "last-event-id": String(third.seq) });
    await stream.until((s) => s.events.some(ended));
    expect(stream.events).toEqual(stored.slice(3));
  });

  it("sends heartbeat comments while idle", async () => {
    const { base } = await served({ heartbeatMs: 10 });
    const stream = await open(base, "/v1/stream");
    await stream.until((s) => s.comments.includes("heartbeat"));
  });

  it("unsubscribes when the client goes away", async () => {
    const { engine, base } = await served();
    const subscribe = engine.subscribe.bind(engine);
    let unsubscribed!: () => void;
    const gone = new Promise<void>((resolve) => {
      unsubscribed = resolve;
    });
    engine.subscribe = (listener, filter) => {
      const off = subscribe(listener, filter);
      return () => {
        off();
        unsubscribed();
      };
    };
    const stream = await open(base, "/v1/stream");
    stream.close();
    await gone;
  });

  it("ends open streams when the server closes", async () => {
    const { app, base } = await served();
    const stream = await open(base, "/v1/stream");
    await app.close();
    await stream.until((s) => s.ended);
  });

  it("answers 404 for an unknown run, 400 for after (or after_seq) without run_id or both at once, 401 without a token", async () => {
    const { app } = await served();
    const headers = bearer(TOKENS.alice);
    expect((await app.inject({ url: "/v1/stream?run_id=nope", headers })).statusCode).toBe(404);
    const bad = await app.inject({ url: "/v1/stream?after_seq=3", headers });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details.problems[0].path).toBe("query.after_seq");
    const noRun = await app.inject({ url: "/v1/stream?after=3", headers });
    expect(noRun.statusCode).toBe(400);
    expect(noRun.json().error.details.problems[0]).toMatchObject({ path: "query.after", message: /needs run_id/ });
    const both = await app.inject({ url: "/v1/stream?run_id=x&after=3&after_seq=3", headers });
    expect(both.statusCode).toBe(400);
    expect(both.json().error.details.problems[0].message).toMatch(/pass one of them/);
    expect((await app.inject({ url: "/v1/stream" })).statusCode).toBe(401);
  });
});
