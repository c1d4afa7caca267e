/**
 * The external-agent protocol over HTTP: claim, heartbeat, complete, fail; 409 for a zombie
 * worker; the identical report twice; agent tokens limited to their agent types.
 */
import { describe, expect, it } from "vitest";
import { HttpWorker } from "../../src/worker/http-worker.js";
import { bearer, TOKENS, testApi } from "./helpers.js";

const EXTERNAL = {
  id: "external",
  nodes: [
    { node_id: "draft", agent_type: "ext_writer", timeout: 600 },
    { node_id: "check", agent_type: "ext_checker", depends_on: ["draft"], next_on_success: ["publish", "rework"] },
    { node_id: "publish", agent_type: "ext_writer" },
    { node_id: "rework", agent_type: "ext_writer" },
  ],
};

const AGENT_TOKEN = "agent-external-0123456789";
/** The worker of most reports here: the claims' worker_id, attempt 1. */
const W1 = { worker_id: "w1", attempt: 1 };
/** A well-formed run id no run has. */
const UNKNOWN_RUN = "0190a4b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b";

async function api() {
  const t = await testApi({
    server: {
      tokens: [
        { token: TOKENS.admin, role: "admin", name: "ops" },
        { token: TOKENS.alice, role: "reviewer", name: "alice" },
        { token: AGENT_TOKEN, role: "agent", name: "py-worker", agent_types: ["ext_writer", "ext_checker"] },
        { token: TOKENS.agent, role: "agent", name: "writer-only", agent_types: ["ext_writer"] },
      ],
    },
  });
  await t.engine.registerWorkflow(EXTERNAL);
  const post = (url: string, payload: object, token = AGENT_TOKEN) =>
    t.app.inject({ method: "POST", url, headers: bearer(token), payload });
  const claim = async (body: object, token = AGENT_TOKEN) => {
    const res = await post("/v1/tasks/claim", { worker_id: "w1", ...body }, token);
    expect(res.statusCode, res.body).toBe(200);
    return res.json().tasks as { execution_id: string; attempt: number; node_id: string; lease_expires_at: number }[];
  };
  return { ...t, post, claim };
}

describe("tasks API", () => {
  it("drives a run end to end: claim, heartbeat, complete with a route", async () => {
    const { engine, clock, post, claim } = await api();
    const run = await engine.startRun(EXTERNAL.id, { input: { topic: "http" } });
    const [draft] = await claim({ agent_types: ["ext_writer"], lease_seconds: 20 });
    expect(draft).toMatchObject({ run_id: run.run_id, node_id: "draft", attempt: 1, input: { topic: "http" } });
    expect(draft?.lease_expires_at).toBe(clock.now() + 20_000);

    const hb = await post(`/v1/tasks/${draft!.execution_id}/heartbeat`, { ...W1, lease_seconds: 40 });
    expect(hb.json()).toEqual({ status: "accepted", lease_expires_at: clock.now() + 40_000 });
    const done = await post(`/v1/tasks/${draft!.execution_id}/complete`, { ...W1, output: { text: "v1" } });
    expect(done.json()).toMatchObject({ status: "accepted" });

    const [check] = await claim({ agent_types: ["ext_checker", "ext_writer"], max_tasks: 3 });
    expect(check?.node_id).toBe("check");
    await post(`/v1/tasks/${check!.execution_id}/complete`, { ...W1, output: { ok: true }, next: ["publish"] });
    const [publish] = await claim({ agent_types: ["ext_writer"] });
    await post(`/v1/tasks/${publish!.execution_id}/complete`, { ...W1, output: "published" });
    const finished = await engine.waitForRun(run.run_id);
    expect(finished.status).toBe("SUCCEEDED");
    expect(finished.nodes.map((n) => [n.node_id, n.state])).toEqual([
      ["draft", "SUCCEEDED"],
      ["check", "SUCCEEDED"],
      ["publish", "SUCCEEDED"],
      ["rework", "SKIPPED"],
    ]);
  });

  it("answers 400 naming the declared targets to a route the node does not declare, and keeps the attempt held", async () => {
    const { engine, post, claim } = await api();
    const run = await engine.startRun(EXTERNAL.id);
    const [draft] = await claim({ agent_types: ["ext_writer"] });
    await post(`/v1/tasks/${draft!.execution_id}/complete`, { ...W1, output: "v1" });
    const [check] = await claim({ agent_types: ["ext_checker"] });
    const before = (await engine.getRun(run.run_id)).nodes.find((n) => n.node_id === "check");
    const url = `/v1/tasks/${check!.execution_id}/complete`;
    const refused = await post(url, { ...W1, output: { ok: true }, next: "publsh" });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toEqual({
      code: "validation",
      message: "Report is invalid",
      details: {
        problems: [
          {
            path: "next",
            message: expect.stringContaining(
              'route to "publsh" is outside the declared targets of check (publish, rework)',
            ),
          },
        ],
      },
    });
    const after = (await engine.getRun(run.run_id)).nodes.find((n) => n.node_id === "check");
    expect(after).toEqual(before);
    expect(after).toMatchObject({ state: "RUNNING", attempt: 1 });
    const again = await post(url, { ...W1, output: { ok: true }, next: ["publish"] });
    expect(again.json()).toMatchObject({ status: "accepted" });
  });

  it("skein worker's handler routing to an undeclared target: the refusal is logged and fails the task", async () => {
    const { app, engine } = await api();
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const lines: string[] = [];
    const worker = new HttpWorker({
      server: base,
      token: AGENT_TOKEN,
      workerId: "w1",
      waitSeconds: 0,
      log: (line) => lines.push(line),
      agents: { ext_writer: () => "v1", ext_checker: (task) => task.route("publsh", { ok: true }) },
    });
    const run = await engine.startRun(EXTERNAL.id);
    const working = worker.run();
    const done = await engine.waitForRun(run.run_id);
    worker.stop();
    await working;
    const declared = 'route to "publsh" is outside the declared targets of check (publish, rework)';
    expect(lines.find((l) => l.startsWith("report of"))).toContain(declared);
    expect(done.status).toBe("FAILED");
    // Not retried: the handler would route the same way again.
    expect(done.nodes.find((n) => n.node_id === "check")).toMatchObject({
      state: "FAILED",
      attempt: 1,
      error: { message: expect.stringContaining(declared) },
    });
  });

  it("answers 409 to a zombie worker's complete and heartbeat after another worker took the task over", async () => {
    const { engine, clock, post, claim } = await api();
    const run = await engine.startRun(EXTERNAL.id);
    const [zombie] = await claim({ agent_types: ["ext_writer"], lease_seconds: 5 });
    await clock.advance(70_000); // the lease passes and the retry falls due
    const [healthy] = await claim({ agent_types: ["ext_writer"], worker_id: "w2" });
    expect(healthy).toMatchObject({ execution_id: zombie!.execution_id, attempt: 2 });
    await post(`/v1/tasks/${healthy!.execution_id}/complete`, { worker_id: "w2", attempt: 2, output: "from w2" });

    const reports = { complete: { ...W1, output: "from zombie" }, heartbeat: W1 };
    for (const [route, body] of Object.entries(reports)) {
      const res = await post(`/v1/tasks/${zombie!.execution_id}/${route}`, body);
      expect(res.statusCode, route).toBe(409);
      expect(res.json().error).toMatchObject({ code: "conflict", message: expect.stringContaining("attempt is 2") });
    }
    const draft = (await engine.getRun(run.run_id)).nodes[0];
    expect(draft).toMatchObject({ state: "SUCCEEDED", output: "from w2" });
  });

  it("accepts the identical report twice and answers the second 'duplicate'; a different one is 409", async () => {
    const { engine, post, claim } = await api();
    await engine.startRun(EXTERNAL.id);
    const [task] = await claim({ agent_types: ["ext_writer"] });
    const url = `/v1/tasks/${task!.execution_id}/complete`;
    const first = await post(url, { ...W1, output: { n: 1 } });
    const second = await post(url, { ...W1, output: { n: 1 } });
    expect([first.statusCode, second.statusCode]).toEqual([200, 200]);
    expect([first.json().status, second.json().status]).toEqual(["accepted", "duplicate"]);
    expect((await post(url, { ...W1, output: { n: 2 } })).statusCode).toBe(409);
  });

  it("records a failure with its details, retried unless not retryable", async () => {
    const { engine, clock, post, claim } = await api();
    const run = await engine.startRun(EXTERNAL.id);
    const [task] = await claim({ agent_types: ["ext_writer"] });
    const fail = await post(`/v1/tasks/${task!.execution_id}/fail`, {
      ...W1,
      error: { message: "429 from the model", retry_after: 3 },
    });
    expect(fail.statusCode).toBe(200);
    expect((await engine.getRun(run.run_id)).nodes[0]).toMatchObject({
      state: "RETRYING",
      error: { message: "429 from the model", details: { retry_after: 3 } },
    });
    await clock.advance(60_000);
    const [again] = await claim({ agent_types: ["ext_writer"] });
    await post(`/v1/tasks/${again!.execution_id}/fail`, {
      worker_id: "w1",
      attempt: 2,
      error: { message: "no" },
      retryable: false,
    });
    expect((await engine.waitForRun(run.run_id)).status).toBe("FAILED");
  });

  it("long-polls: a claim waiting for work returns the task a new run makes ready", async () => {
    const { engine, claim } = await api();
    const waiting = claim({ agent_types: ["ext_writer"], wait_seconds: 25 });
    const run = await engine.startRun(EXTERNAL.id);
    expect((await waiting).map((t) => t.node_id)).toEqual(["draft"]);
    expect((await waiting)[0]).toMatchObject({ execution_id: `${run.run_id}:draft:1` });
  });

  it("limits an agent token to its agent types and to the task routes", async () => {
    const { app, post } = await api();
    const other = await post("/v1/tasks/claim", { worker_id: "w", agent_types: ["ext_checker"] }, TOKENS.agent);
    expect(other.statusCode).toBe(403);
    expect(other.json().error.message).toContain("ext_checker");
    expect(
      (await post("/v1/tasks/claim", { worker_id: "w", agent_types: ["ext_writer"] }, TOKENS.alice)).statusCode,
    ).toBe(403);
    expect(
      (await post("/v1/tasks/claim", { worker_id: "w", agent_types: ["ext_writer"] }, TOKENS.admin)).statusCode,
    ).toBe(200);
    const anonymous = await app.inject({
      method: "POST",
      url: "/v1/tasks/claim",
      payload: { worker_id: "w", agent_types: ["x"] },
    });
    expect(anonymous.statusCode).toBe(401);
    expect((await post("/v1/runs", { workflow_id: EXTERNAL.id })).statusCode).toBe(403);
  });

  it("answers 400 with paths for malformed bodies and 404 for an unknown task", async () => {
    const { post } = await api();
    const bad = await post("/v1/tasks/claim", { agent_types: [], worker_id: "w", lease_seconds: 0, extra: 1 });
    expect(bad.statusCode).toBe(400);
    expect(
      bad
        .json()
        .error.details.problems.map((p: { path: string }) => p.path)
        .sort(),
    ).toEqual(["body", "body.agent_types", "body.lease_seconds"]);
    const review = await post("/v1/tasks/claim", { agent_types: ["human_review"], worker_id: "w" }, TOKENS.admin);
    expect(review.statusCode).toBe(400);
    const noAttempt = await post(`/v1/tasks/${UNKNOWN_RUN}:n:1/complete`, { output: 1 });
    expect(noAttempt.json().error.details.problems.map((p: { path: string }) => p.path)).toEqual([
      "body.attempt",
      "body.worker_id",
    ]);
    expect((await post(`/v1/tasks/${UNKNOWN_RUN}:n:1/complete`, { ...W1, output: 1 })).statusCode).toBe(404);
    expect((await post(`/v1/tasks/${UNKNOWN_RUN}:x:1/heartbeat`, W1)).statusCode).toBe(404);
  });
});
