/**
 * A claimed task is bound to its holder (DESIGN §13): heartbeats and reports must come with the
 * token and worker_id that claimed it, for an agent type that token may claim, and only for an
 * attempt a worker holds. Everything else is 403 or 409 and changes nothing: no state, no
 * event, no `when` or decide hook evaluated. Ids are checked at the edge (400 with the path).
 */
import { describe, expect, it } from "vitest";
import type { Task } from "../../src/index.js";
import { nextEvent, onPostgres, tempDb } from "../helpers.js";
import { bearer, TOKENS, testApi } from "./helpers.js";

const FLEET_A = "agent-fleet-a-0123456789";
const FLEET_B = "agent-fleet-b-0123456789";
const WRITERS = "agent-writers-0123456789";
const TYPES = ["ext_writer", "ext_checker", "ext_undo", "inproc"];

const WORKFLOW = {
  id: "bound",
  nodes: [
    { node_id: "draft", agent_type: "ext_writer" },
    {
      node_id: "check",
      agent_type: "ext_checker",
      depends_on: ["draft"],
      decide: "count_decisions",
      next_on_success: ["publish", "rework"],
    },
    { node_id: "publish", agent_type: "ext_writer" },
    { node_id: "rework", agent_type: "ext_writer" },
  ],
};

/** An in-process step that runs until it is aborted, then a step that fails: its compensation runs in process too. */
const IN_PROCESS = {
  id: "in-process",
  nodes: [
    { node_id: "slow", agent_type: "inproc" },
    { node_id: "book", agent_type: "ext_writer", compensation: { agent_type: "inproc" } },
    { node_id: "pay", agent_type: "ext_writer", depends_on: ["book"] },
  ],
};

/** A handler that holds its attempt until the engine aborts it (close). */
const hold = (task: Task) => new Promise((resolve) => task.signal.addEventListener("abort", () => resolve(null)));

async function api(options: { open?: boolean; database?: string } = {}) {
  const decisions: string[] = [];
  const t = await testApi({
    ...(options.open ? { open: true } : {}),
    engine: {
      agents: { inproc: hold },
      decideHooks: {
        count_decisions: (output) => {
          decisions.push(JSON.stringify(output));
          return ["publish"];
        },
      },
      ...(options.database ? { database: options.database } : {}),
    },
    server: options.open
      ? {}
      : {
          tokens: [
            { token: TOKENS.admin, role: "admin", name: "ops" },
            { token: FLEET_A, role: "agent", name: "fleet-a", agent_types: TYPES },
            { token: FLEET_B, role: "agent", name: "fleet-b", agent_types: TYPES },
            { token: WRITERS, role: "agent", name: "writers", agent_types: ["ext_writer"] },
          ],
        },
  });
  await t.engine.registerWorkflow(WORKFLOW);
  await t.engine.registerWorkflow(IN_PROCESS);
  const post = (url: string, payload: object, token: string | null = FLEET_A) =>
    t.app.inject({ method: "POST", url, headers: token ? bearer(token) : {}, payload });
  const claim = async (agentTypes: string[], workerId = "w1", token: string | null = FLEET_A) => {
    const res = await post("/v1/tasks/claim", { agent_types: agentTypes, worker_id: workerId }, token);
    expect(res.statusCode, res.body).toBe(200);
    return res.json().tasks as { execution_id: string; attempt: number; node_id: string }[];
  };
  /** The run as stored, with its events: what a refused report must leave exactly as it was. */
  const snapshot = async (runId: string) => ({
    run: await t.engine.getRun(runId),
    events: (await t.engine.listEvents(runId)).map((e) => [e.type, e.node_id, e.data]),
  });
  return { ...t, post, claim, snapshot, decisions };
}

type Api = Awaited<ReturnType<typeof api>>;

/** A well-formed body of each report route, from worker w1 for attempt 1. */
const BODIES = {
  heartbeat: { worker_id: "w1", attempt: 1 },
  complete: { worker_id: "w1", attempt: 1, output: 1 },
  fail: { worker_id: "w1", attempt: 1, error: { message: "m" } },
};

/** Every report and heartbeat of attempt 1 of `id` is answered `status`, and the run is left as it was. */
async function refusedAll(
  t: Api,
  runId: string,
  id: string,
  status: number,
  who: { worker_id: string; token: string | null },
) {
  const before = await t.snapshot(runId);
  const bodies = {
    heartbeat: { attempt: 1, worker_id: who.worker_id },
    complete: { attempt: 1, worker_id: who.worker_id, output: { forged: true } },
    fail: { attempt: 1, worker_id: who.worker_id, error: { message: "forged" }, retryable: false },
  };
  for (const [route, body] of Object.entries(bodies)) {
    const res = await t.post(`/v1/tasks/${id}/${route}`, body, who.token);
    expect(res.statusCode, `${route}: ${res.body}`).toBe(status);
    expect(res.json().error.code).toBe(status === 403 ? "forbidden" : "conflict");
  }
  expect(await t.snapshot(runId)).toEqual(before);
}

describe("tasks bound to their holder", () => {
  it("refuses another worker's, another token's and another agent type's reports; the holder still completes", async () => {
    const t = await api();
    const run = await t.engine.startRun(WORKFLOW.id);
    const [draft] = await t.claim(["ext_writer"], "w1");
    const id = draft!.execution_id;
    await refusedAll(t, run.run_id, id, 409, { worker_id: "w2", token: FLEET_A }); // same token, another worker
    await refusedAll(t, run.run_id, id, 409, { worker_id: "w1", token: FLEET_B }); // same worker_id, another token
    await refusedAll(t, run.run_id, id, 409, { worker_id: "w1", token: TOKENS.admin }); // even an admin's
    const [check] = await (async () => {
      const ok = await t.post(`/v1/tasks/${id}/complete`, { worker_id: "w1", attempt: 1, output: "v1" });
      expect(ok.json()).toMatchObject({ status: "accepted" });
      return t.claim(["ext_checker"], "w1");
    })();
    // A token that may not claim ext_checker may not report it either, whatever worker_id it sends.
    await refusedAll(t, run.run_id, check!.execution_id, 403, { worker_id: "w1", token: WRITERS });
    const hb = await t.post(`/v1/tasks/${check!.execution_id}/heartbeat`, { worker_id: "w1", attempt: 1 });
    expect(hb.json()).toMatchObject({ status: "accepted" });
  });

  it("evaluates a report's decision only for the holder of the running attempt, and keeps 'duplicate' for it", async () => {
    const t = await api();
    const run = await t.engine.startRun(WORKFLOW.id);
    const [draft] = await t.claim(["ext_writer"]);
    await t.post(`/v1/tasks/${draft!.execution_id}/complete`, { worker_id: "w1", attempt: 1, output: "v1" });
    const [check] = await t.claim(["ext_checker"]);
    const url = `/v1/tasks/${check!.execution_id}/complete`;
    expect((await t.post(url, { worker_id: "intruder", attempt: 1, output: { ok: 1 } })).statusCode).toBe(409);
    expect((await t.post(url, { worker_id: "w1", attempt: 1, output: { ok: 1 } }, FLEET_B)).statusCode).toBe(409);
    expect(t.decisions).toEqual([]); // the decide hook never ran for them

    const first = await t.post(url, { worker_id: "w1", attempt: 1, output: { ok: 1 } });
    expect(first.json()).toMatchObject({ status: "accepted" });
    expect(t.decisions).toEqual(['{"ok":1}']);
    // Replays of a finished task: the holder's is a duplicate, anyone else's a 409; no decision is worked out again.
    expect((await t.post(url, { worker_id: "w1", attempt: 1, output: { ok: 1 } })).json()).toMatchObject({
      status: "duplicate",
    });
    expect((await t.post(url, { worker_id: "w9", attempt: 1, output: { ok: 1 } })).statusCode).toBe(409);
    expect((await t.post(url, { worker_id: "w1", attempt: 1, output: { ok: 2 } })).statusCode).toBe(409);
    expect(t.decisions).toEqual(['{"ok":1}']);
    const fenced = (await t.engine.listEvents(run.run_id)).filter((e) => e.type === "result.fenced");
    expect(fenced.map((e) => e.data)).toEqual([expect.objectContaining({ by: "worker:fleet-a/w1", attempt: 1 })]);
  });

  it("refuses reports for an engine's in-process attempt and for a compensation an engine runs", async () => {
    const t = await api();
    const run = await t.engine.startRun(IN_PROCESS.id);
    const [book] = await t.claim(["ext_writer"]);
    expect(book?.node_id).toBe("book");
    const slow = (await t.engine.getRun(run.run_id)).nodes.find((n) => n.node_id === "slow");
    expect(slow).toMatchObject({ state: "RUNNING", holder: t.engine.engineId });
    await refusedAll(t, run.run_id, `${run.run_id}:slow:1`, 409, { worker_id: "w1", token: FLEET_A });
    await refusedAll(t, run.run_id, `${run.run_id}:slow:1`, 409, { worker_id: "w1", token: TOKENS.admin });

    // book succeeds, pay fails for good: the run compensates book in process.
    await t.post(`/v1/tasks/${book!.execution_id}/complete`, { worker_id: "w1", attempt: 1, output: 1 });
    const started = nextEvent(t.engine, (e) => e.type === "compensation.started");
    const [pay] = await t.claim(["ext_writer"]);
    await t.post(`/v1/tasks/${pay!.execution_id}/fail`, {
      worker_id: "w1",
      attempt: 1,
      error: { message: "declined" },
      retryable: false,
    });
    expect((await started).data).toMatchObject({ holder: t.engine.engineId });
    await refusedAll(t, run.run_id, `${book!.execution_id}:compensate`, 409, { worker_id: "w1", token: FLEET_A });
    expect((await t.engine.getRun(run.run_id)).compensations[0]).toMatchObject({ state: "RUNNING" });
  });

  it("binds by worker_id alone without tokens", async () => {
    const t = await api({ open: true });
    const run = await t.engine.startRun(WORKFLOW.id);
    const [draft] = await t.claim(["ext_writer"], "w1", null);
    await refusedAll(t, run.run_id, draft!.execution_id, 409, { worker_id: "w2", token: null });
    const done = await t.post(
      `/v1/tasks/${draft!.execution_id}/complete`,
      { worker_id: "w1", attempt: 1, output: 1 },
      null,
    );
    expect(done.json()).toMatchObject({ status: "accepted" });
    expect((await t.engine.getRun(run.run_id)).nodes[0]).toMatchObject({ state: "SUCCEEDED" });
  });

  it("refuses a worker_id that is free text", async () => {
    const t = await api();
    for (const workerId of ["", "w 1", "w/1", "w\u0000", "x".repeat(129), "worker:ops/w1\n"]) {
      const res = await t.post("/v1/tasks/claim", { agent_types: ["ext_writer"], worker_id: workerId });
      expect(res.statusCode, JSON.stringify(workerId)).toBe(400);
      expect(res.json().error.details.problems.map((p: { path: string }) => p.path)).toEqual(["body.worker_id"]);
    }
  });
});

for (const store of onPostgres ? [] : (["sqlite", "postgres"] as const)) {
  describe(`task ids checked at the edge (${store})`, () => {
    it("answers 400 with the field's path for malformed ids, before the engine sees them", async () => {
      const t = await api({ database: tempDb(store) });
      const run = await t.engine.startRun(WORKFLOW.id);
      const urls = [
        "/v1/tasks/%00:x:1/heartbeat",
        `/v1/tasks/${run.run_id}:dr%01aft:1/heartbeat`,
        `/v1/tasks/${run.run_id}:draft:0/complete`,
        `/v1/tasks/${run.run_id.toUpperCase()}:draft:1/fail`,
        "/v1/tasks/nope:x:1/heartbeat",
      ];
      for (const url of urls) {
        const res = await t.post(url, BODIES[url.endsWith("heartbeat") ? "heartbeat" : "fail"]);
        expect(res.statusCode, url).toBe(400);
        expect(res.json().error.details.problems.map((p: { path: string }) => p.path)).toContain("params.execution_id");
      }
      const next = await t.post(`/v1/tasks/${run.run_id}:draft:1/complete`, {
        worker_id: "w1",
        attempt: 1,
        next: ["pub\u0000lish"],
      });
      expect(next.statusCode).toBe(400);
      // The engine still works: the run's first task is there to claim and complete.
      const [draft] = await t.claim(["ext_writer"]);
      const done = await t.post(`/v1/tasks/${draft!.execution_id}/complete`, BODIES.complete);
      expect(done.json()).toMatchObject({ status: "accepted" });
    });

    it("answers 404 for a well-formed id naming a node the run does not have", async () => {
      const t = await api({ database: tempDb(store) });
      const run = await t.engine.startRun(WORKFLOW.id);
      for (const [route, id] of [
        ["heartbeat", `${run.run_id}:ghost:1`],
        ["complete", `${run.run_id}:ghost:1`],
        ["fail", `${run.run_id}:ghost:1`],
        ["complete", `${run.run_id}:ghost:1:compensate`],
      ] as const) {
        const res = await t.post(`/v1/tasks/${id}/${route}`, BODIES[route]);
        expect(res.statusCode, `${route} ${id}: ${res.body}`).toBe(404);
        expect(res.json().error).toMatchObject({ code: "not_found", message: expect.stringContaining(id) });
      }
    });
  });
}
