/**
 * Progress over HTTP (DESIGN §11.6, §15): `GET /v1/stream` sends it as `event: node.progress`
 * with its id in the run's one ordered stream (scoped tokens see only their workflows'), and a
 * worker posts its own to `POST /v1/tasks/{execution_id}/progress`, checked like a heartbeat and
 * kept with the run's events.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Task } from "../../src/index.js";
import { HttpWorker } from "../../src/worker/http-worker.js";
import { bearer, TOKENS, testApi } from "./helpers.js";
import { closeStreams, openStream } from "./sse.js";

afterEach(closeStreams);

const open = (base: string, path: string, token: string) => openStream(base, path, bearer(token));

const ORDERS = "reviewer-orders-0123456789";
const FLEET_A = "agent-fleet-a-0123456789";
const FLEET_B = "agent-fleet-b-0123456789";
const WRITERS = "agent-writers-0123456789";

/** In-process `streamer` handlers wait for the test; `ext_*` types are for workers. */
async function api(engine: { taskLimits?: { requestsPerSecond: number; burst: number } } = {}) {
  const tasks: Task[] = [];
  const finishers: (() => void)[] = [];
  const waiting = new Set<() => void>();
  const streamer = (task: Task) =>
    new Promise((resolve) => {
      tasks.push(task);
      finishers.push(() => resolve("done"));
      for (const w of [...waiting]) w();
    });
  const started = (n: number) =>
    new Promise<void>((resolve) => {
      const w = () => {
        if (tasks.length < n) return;
        waiting.delete(w);
        resolve();
      };
      waiting.add(w);
      w();
    });
  const t = await testApi({
    engine: { agents: { streamer }, progressIntervalMs: 0, ...engine },
    server: {
      tokens: [
        { token: TOKENS.admin, role: "admin", name: "ops" },
        { token: ORDERS, role: "reviewer", name: "orders", workflows: ["order-*"] },
        { token: FLEET_A, role: "agent", name: "fleet-a", agent_types: ["ext_writer", "ext_checker"] },
        { token: FLEET_B, role: "agent", name: "fleet-b", agent_types: ["ext_writer", "ext_checker"] },
        { token: WRITERS, role: "agent", name: "writers", agent_types: ["ext_writer"] },
      ],
    },
  });
  for (const id of ["order-eu", "payroll"]) {
    await t.engine.registerWorkflow({ id, nodes: [{ node_id: "s", agent_type: "streamer" }] });
  }
  await t.engine.registerWorkflow({
    id: "external",
    nodes: [
      { node_id: "draft", agent_type: "ext_writer" },
      { node_id: "check", agent_type: "ext_checker", depends_on: ["draft"] },
    ],
  });
  const post = (url: string, payload: object, token: string = FLEET_A) =>
    t.app.inject({ method: "POST", url, headers: bearer(token), payload });
  return { ...t, tasks, finishers, started, post };
}

describe("progress on GET /v1/stream", () => {
  it("is sent as event: node.progress with its id, in the run's one ordered stream", async () => {
    const t = await api();
    const base = await t.app.listen({ host: "127.0.0.1", port: 0 });
    const stream = await open(base, "/v1/stream", TOKENS.admin);
    const run = await t.engine.startRun("payroll");
    await t.started(1);
    t.tasks[0]?.progress({ content: "Hello" });
    t.finishers[0]?.();
    await stream.until(() => stream.messages.some((e) => e.data.type === "run.succeeded"));
    const sent = stream.messages;
    const progress = sent.filter((e) => e.data.type === "node.progress");
    expect(progress).toEqual([
      {
        event: "node.progress",
        id: expect.stringMatching(/^\d+$/),
        data: expect.objectContaining({ run_id: run.run_id, data: { attempt: 1, progress: { content: "Hello" } } }),
      },
    ]);
    const others = sent.filter((e) => e.data.type !== "node.progress");
    expect(others.every((e) => e.event === null && e.id !== null)).toBe(true);
    expect(sent.map((e) => e.id)).toEqual((await t.engine.listEvents(run.run_id)).map((e) => String(e.seq)));
  });

  it("shows a scoped token only its workflows' progress", async () => {
    const t = await api();
    const base = await t.app.listen({ host: "127.0.0.1", port: 0 });
    const stream = await open(base, "/v1/stream", ORDERS);
    const outside = await t.engine.startRun("payroll");
    const inside = await t.engine.startRun("order-eu");
    await t.started(2);
    for (const task of t.tasks) task.progress(`from ${task.run_id}`);
    for (const f of t.finishers) f();
    await t.engine.waitForRun(outside.run_id);
    await stream.until(() => stream.messages.some((e) => e.data.type === "run.succeeded"));
    const progress = stream.messages.filter((e) => e.event === "node.progress");
    expect(progress.map((e) => e.data.run_id)).toEqual([inside.run_id]);
  });
});

describe("POST /v1/tasks/{execution_id}/progress", () => {
  it("delivers the holder's progress (202), refuses others' (409, 403) and answers delivered: false once the attempt ended", async () => {
    const t = await api();
    const got: unknown[] = [];
    let kept: () => void = () => {};
    const firstKept = new Promise<void>((resolve) => {
      kept = resolve;
    });
    t.engine.subscribe((e) => {
      if (e.type !== "node.progress") return;
      got.push(e.data);
      kept();
    });
    const run = await t.engine.startRun("external");
    const claim = await t.post("/v1/tasks/claim", { agent_types: ["ext_writer"], worker_id: "w1" });
    const [draft] = claim.json().tasks as { execution_id: string; attempt: number }[];
    const url = `/v1/tasks/${draft?.execution_id}/progress`;
    const before = await t.engine.listEvents(run.run_id);

    const ok = await t.post(url, { attempt: 1, worker_id: "w1", progress: { content: "half" } });
    expect(ok.statusCode, ok.body).toBe(202);
    expect(ok.json()).toEqual({ delivered: true });
    await firstKept;
    expect(got).toEqual([{ attempt: 1, progress: { content: "half" } }]);

    const otherWorker = await t.post(url, { attempt: 1, worker_id: "w2", progress: "forged" });
    expect(otherWorker.statusCode).toBe(409);
    const otherToken = await t.post(url, { attempt: 1, worker_id: "w1", progress: "forged" }, FLEET_B);
    expect(otherToken.statusCode).toBe(409);
    const wrongAttempt = await t.post(url, { attempt: 2, worker_id: "w1", progress: "forged" });
    expect(wrongAttempt.statusCode).toBe(409);
    expect(got).toHaveLength(1);
    // Kept with the run's events: the holder's value only.
    const after = await t.engine.listEvents(run.run_id);
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.slice(before.length).map((e) => [e.type, e.data])).toEqual([
      ["node.progress", { attempt: 1, progress: { content: "half" } }],
    ]);

    const done = await t.post(`/v1/tasks/${draft?.execution_id}/complete`, { attempt: 1, worker_id: "w1", output: 1 });
    expect(done.statusCode, done.body).toBe(200);
    const late = await t.post(url, { attempt: 1, worker_id: "w1", progress: "late" });
    expect(late.statusCode).toBe(202);
    expect(late.json()).toEqual({ delivered: false });
    expect(got).toHaveLength(1);

    // A token that may not claim the agent type may not stream it: 403.
    const next = await t.post("/v1/tasks/claim", { agent_types: ["ext_checker"], worker_id: "w1" });
    const [check] = next.json().tasks as { execution_id: string }[];
    const forbidden = await t.post(
      `/v1/tasks/${check?.execution_id}/progress`,
      { attempt: 1, worker_id: "w1", progress: 1 },
      WRITERS,
    );
    expect(forbidden.statusCode).toBe(403);
  });

  it("checks the holder once a second: a streaming worker does not spend its token's rate of claims and heartbeats", async () => {
    // A token may send 2 claims or heartbeats (the claim and the progress route's first check).
    const t = await api({ taskLimits: { requestsPerSecond: 0.001, burst: 2 } });
    await t.engine.startRun("external");
    const claim = await t.post("/v1/tasks/claim", { agent_types: ["ext_writer"], worker_id: "w1" });
    const [draft] = claim.json().tasks as { execution_id: string }[];
    const url = `/v1/tasks/${draft?.execution_id}/progress`;
    for (let i = 0; i < 5; i++) {
      const res = await t.post(url, { attempt: 1, worker_id: "w1", progress: i });
      expect(res.statusCode, res.body).toBe(202);
    }
    // Another worker's post is checked, and over the rate.
    expect((await t.post(url, { attempt: 1, worker_id: "w2", progress: "x" })).statusCode).toBe(429);
    await t.clock.advance(1000); // the check no longer stands: the next post is checked again
    expect((await t.post(url, { attempt: 1, worker_id: "w1", progress: 5 })).statusCode).toBe(429);
  });

  it("answers 400 for a body without progress or with unknown fields", async () => {
    const t = await api();
    await t.engine.startRun("external");
    const claim = await t.post("/v1/tasks/claim", { agent_types: ["ext_writer"], worker_id: "w1" });
    const [draft] = claim.json().tasks as { execution_id: string }[];
    const url = `/v1/tasks/${draft?.execution_id}/progress`;
    expect((await t.post(url, { attempt: 1, worker_id: "w1", progress: 1, extra: true })).statusCode).toBe(400);
  });
});

describe("skein worker's task.progress", () => {
  it("posts the handler's progress to the server, which delivers it live; a value that is not JSON is dropped", async () => {
    const t = await api();
    const base = await t.app.listen({ host: "127.0.0.1", port: 0 });
    const got: unknown[] = [];
    let seen!: () => void;
    const firstSeen = new Promise<void>((resolve) => {
      seen = resolve;
    });
    t.engine.subscribe((e) => {
      if (e.type !== "node.progress") return;
      got.push(e.data.progress);
      seen();
    });
    const lines: string[] = [];
    const worker = new HttpWorker({
      server: base,
      token: WRITERS,
      workerId: "w1",
      waitSeconds: 0,
      log: (line) => lines.push(line),
      agents: {
        ext_writer: async (task) => {
          task.progress(() => "not JSON");
          task.progress({ content: "first" });
          await firstSeen;
          return "written";
        },
      },
    });
    const run = await t.engine.startRun("external");
    const working = worker.run();
    await firstSeen;
    // The draft's success: the worker reported after its progress.
    await new Promise<void>((resolve) => {
      const off = t.engine.subscribe(
        (e) => {
          if (e.type === "node.succeeded" && e.node_id === "draft") {
            off();
            resolve();
          }
        },
        { run_id: run.run_id },
      );
    });
    worker.stop();
    await working;
    expect(got).toEqual([{ content: "first" }]);
    expect(lines.some((l) => l.includes("not JSON"))).toBe(true);
  });
});
