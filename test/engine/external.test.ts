/**
 * External agents (DESIGN §5): nodes whose agent_type has no in-process handler wait for
 * workers that claim them with a lease, heartbeat and report. Reports for attempts the worker
 * no longer holds are conflicts; the identical report twice is accepted once.
 */
import { describe, expect, it } from "vitest";
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from "../../src/index.js";
import { testEngine } from "../helpers.js";

const CHAIN = {
  id: "external-chain",
  nodes: [
    { node_id: "draft", agent_type: "writer", timeout: 600 },
    { node_id: "check", agent_type: "checker", depends_on: ["draft"], next_on_success: ["publish", "rework"] },
    { node_id: "publish", agent_type: "writer" },
    { node_id: "rework", agent_type: "writer" },
  ],
};

/** book → pay; each undone by an external `undo` worker when the run fails. */
const SAGA = {
  id: "external-saga",
  nodes: [
    { node_id: "book", agent_type: "step", compensation: { agent_type: "undo", payload: { of: "{{ self.output }}" } } },
    {
      node_id: "pay",
      agent_type: "step",
      depends_on: ["book"],
      compensation: { agent_type: "undo", payload: { of: "{{ self.execution_id }}" } },
    },
  ],
};

/** A well-formed run id no run has. */
const UNKNOWN_RUN = "0190a4b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b";

async function setup() {
  const t = await testEngine();
  await t.engine.registerWorkflow(CHAIN);
  return t;
}

describe("external agents", () => {
  it("claims a task with DESIGN §5's fields, completes it, and routes by the reported next", async () => {
    const { engine, clock } = await setup();
    const run = await engine.startRun(CHAIN.id, { input: { topic: "leases" } });
    const [draft] = await engine.claimTasks({ agent_types: ["writer"], worker_id: "w1", lease_seconds: 30 });
    expect(draft).toMatchObject({
      run_id: run.run_id,
      node_id: "draft",
      agent_type: "writer",
      visit: 1,
      attempt: 1,
      execution_id: `${run.run_id}:draft:1`,
      input: { topic: "leases" },
      trace_id: run.trace_id,
      lease_expires_at: clock.now() + 30_000,
    });
    expect(draft?.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect((await engine.getRun(run.run_id)).nodes[0]).toMatchObject({ state: "RUNNING", holder: "worker:w1" });

    expect(
      await engine.completeTask(draft!.execution_id, { worker_id: "w1", attempt: 1, output: { text: "v1" } }),
    ).toMatchObject({
      status: "accepted",
    });
    const [check] = await engine.claimTasks({ agent_types: ["checker"], worker_id: "w2" });
    expect(check?.deps).toEqual({ draft: { status: "SUCCEEDED", output: { text: "v1" }, error: null } });
    await engine.completeTask(check!.execution_id, {
      worker_id: "w2",
      attempt: 1,
      output: { ok: true },
      next: "publish",
    });
    const [publish] = await engine.claimTasks({ agent_types: ["writer"], worker_id: "w1", max_tasks: 5 });
    expect(publish?.node_id).toBe("publish");
    await engine.completeTask(publish!.execution_id, { worker_id: "w1", attempt: 1, output: "done" });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.find((n) => n.node_id === "rework")?.state).toBe("SKIPPED");
  });

  it("refuses a route the node does not declare at once, naming its targets, and keeps the attempt held", async () => {
    const { engine } = await setup();
    const run = await engine.startRun(CHAIN.id);
    const [draft] = await engine.claimTasks({ agent_types: ["writer"], worker_id: "w1" });
    await engine.completeTask(draft!.execution_id, { worker_id: "w1", attempt: 1, output: "v1" });
    const [check] = await engine.claimTasks({ agent_types: ["checker"], worker_id: "w2", lease_seconds: 30 });
    const held = (await engine.getRun(run.run_id)).nodes.find((n) => n.node_id === "check");
    const w2 = { worker_id: "w2", attempt: 1, output: { ok: true } };
    for (const next of ["publsh", ["publish", "$end"], ["publish", "draft"]]) {
      const refused = await engine.completeTask(check!.execution_id, { ...w2, next }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(ValidationError);
      expect((refused as ValidationError).problems).toEqual([
        { path: "next", message: expect.stringContaining("the attempt is still held") },
      ]);
    }
    await expect(engine.completeTask(check!.execution_id, { ...w2, next: "publsh" })).rejects.toThrow(
      /route to "publsh" is outside the declared targets of check \(publish, rework\)/,
    );
    // Nothing changed: the attempt is the worker's, at the same lease, and its run has no failure.
    const after = await engine.getRun(run.run_id);
    expect(after.status).toBe("RUNNING");
    expect(after.nodes.find((n) => n.node_id === "check")).toEqual(held);
    expect((await engine.listEvents(run.run_id)).map((e) => e.type)).not.toContain("node.failed");

    expect((await engine.completeTask(check!.execution_id, { ...w2, next: "rework" })).status).toBe("accepted");
    const [rework] = await engine.claimTasks({ agent_types: ["writer"], worker_id: "w1" });
    expect(rework?.node_id).toBe("rework");
  });

  it("accepts the identical report twice, answering the same way, and refuses a different one", async () => {
    const { engine } = await setup();
    await engine.startRun(CHAIN.id);
    const [task] = await engine.claimTasks({ agent_types: ["writer"], worker_id: "w1" });
    const id = task!.execution_id;
    const w1 = { worker_id: "w1", attempt: 1 };
    expect((await engine.completeTask(id, { ...w1, output: { n: 1 } })).status).toBe("accepted");
    expect((await engine.completeTask(id, { ...w1, output: { n: 1 } })).status).toBe("duplicate");
    await expect(engine.completeTask(id, { ...w1, output: { n: 2 } })).rejects.toThrow(ConflictError);
    await expect(engine.failTask(id, { ...w1, error: { message: "late" } })).rejects.toThrow(/no longer held/);
  });

  it("refuses a zombie worker's heartbeat and report once its lease expired and another worker took over", async () => {
    const { engine, clock } = await setup();
    const run = await engine.startRun(CHAIN.id);
    const [zombie] = await engine.claimTasks({ agent_types: ["writer"], worker_id: "zombie", lease_seconds: 5 });
    const renewed = await engine.heartbeatTask(zombie!.execution_id, {
      worker_id: "zombie",
      attempt: 1,
      lease_seconds: 10,
    });
    expect(renewed).toEqual({ status: "accepted", lease_expires_at: clock.now() + 10_000 });

    await clock.advance(10_000); // the lease passes; the sweep fails the attempt (lease_expired) and retries it
    await expect(engine.heartbeatTask(zombie!.execution_id, { worker_id: "zombie", attempt: 1 })).rejects.toThrow(
      ConflictError,
    );
    await clock.advance(60_000); // past the retry's backoff
    const [again] = await engine.claimTasks({ agent_types: ["writer"], worker_id: "healthy" });
    expect(again).toMatchObject({ execution_id: zombie!.execution_id, attempt: 2 });
    await engine.completeTask(again!.execution_id, { worker_id: "healthy", attempt: 2, output: "healthy" });

    await expect(
      engine.completeTask(zombie!.execution_id, { worker_id: "zombie", attempt: 1, output: "zombie" }),
    ).rejects.toThrow(/attempt 1 .* no longer held: its current attempt is 2/);
    await expect(engine.heartbeatTask(zombie!.execution_id, { worker_id: "zombie", attempt: 1 })).rejects.toThrow(
      ConflictError,
    );
    const draft = (await engine.getRun(run.run_id)).nodes.find((n) => n.node_id === "draft");
    expect(draft).toMatchObject({ state: "SUCCEEDED", output: "healthy", attempt: 2 });
    const fenced = (await engine.listEvents(run.run_id)).filter((e) => e.type === "result.fenced");
    expect(fenced.map((e) => e.data)).toEqual([
      expect.objectContaining({ attempt: 1, result: "success", reason: "its current attempt is 2" }),
    ]);
  });

  it("retries a failure reported retryable, and fails the visit on one that is not", async () => {
    const { engine, clock } = await setup();
    const run = await engine.startRun(CHAIN.id);
    const [first] = await engine.claimTasks({ agent_types: ["writer"], worker_id: "w1" });
    await engine.failTask(first!.execution_id, {
      worker_id: "w1",
      attempt: 1,
      error: { message: "rate limited", status: 429 },
    });
    const retrying = (await engine.getRun(run.run_id)).nodes[0];
    expect(retrying).toMatchObject({ state: "RETRYING", error: { message: "rate limited", details: { status: 429 } } });
    expect(
      await engine.failTask(first!.execution_id, { worker_id: "w1", attempt: 1, error: { message: "rate limited" } }),
    ).toMatchObject({
      status: "duplicate",
    });
    await clock.advance(60_000);
    const [second] = await engine.claimTasks({ agent_types: ["writer"], worker_id: "w1" });
    await engine.failTask(second!.execution_id, {
      worker_id: "w1",
      attempt: 2,
      error: { message: "bad input" },
      retryable: false,
    });
    expect((await engine.waitForRun(run.run_id)).status).toBe("FAILED");
  });

  it("waits for a task when none is ready (long poll), and returns empty when the wait ends", async () => {
    const { engine, clock } = await setup();
    const waiting = engine.claimTasks({ agent_types: ["writer"], worker_id: "w1", wait_seconds: 20 });
    const run = await engine.startRun(CHAIN.id);
    const [task] = await waiting;
    expect(task?.run_id).toBe(run.run_id);

    const nothing = engine.claimTasks({ agent_types: ["checker"], worker_id: "w1", wait_seconds: 3 });
    await clock.advance(3_000);
    expect(await nothing).toEqual([]);
  });

  it("hands a failed run's compensations to external workers, in order, fenced like visits", async () => {
    const { engine } = await testEngine();
    await engine.registerWorkflow(SAGA);
    const run = await engine.startRun(SAGA.id);
    const [book] = await engine.claimTasks({ agent_types: ["step"], worker_id: "w" });
    await engine.completeTask(book!.execution_id, { worker_id: "w", attempt: 1, output: { booking: 7 } });
    const [pay] = await engine.claimTasks({ agent_types: ["step"], worker_id: "w" });
    await engine.failTask(pay!.execution_id, {
      worker_id: "w",
      attempt: 1,
      error: { message: "card declined" },
      retryable: false,
    });

    // The failed visit is undone first, then the success before it.
    const [undoPay] = await engine.claimTasks({ agent_types: ["undo"], worker_id: "u", max_tasks: 5 });
    expect(undoPay).toMatchObject({
      execution_id: `${pay!.execution_id}:compensate`,
      node_id: "pay",
      agent_type: "undo",
      payload: { of: pay!.execution_id },
      compensates: { execution_id: pay!.execution_id, output: null, error: { message: "card declined" } },
    });
    expect(await engine.claimTasks({ agent_types: ["undo"], worker_id: "u2" })).toEqual([]);
    await expect(
      engine.completeTask(undoPay!.execution_id, { worker_id: "u", attempt: 1, output: {}, next: "book" }),
    ).rejects.toThrow(ValidationError);
    expect(
      (await engine.completeTask(undoPay!.execution_id, { worker_id: "u", attempt: 1, output: { refunded: true } }))
        .status,
    ).toBe("accepted");
    expect(
      (await engine.completeTask(undoPay!.execution_id, { worker_id: "u", attempt: 1, output: { refunded: true } }))
        .status,
    ).toBe("duplicate");
    await expect(
      engine.failTask(undoPay!.execution_id, { worker_id: "u", attempt: 1, error: { message: "late" } }),
    ).rejects.toThrow(ConflictError);

    const [undoBook] = await engine.claimTasks({ agent_types: ["undo"], worker_id: "u" });
    expect(undoBook).toMatchObject({ node_id: "book", payload: { of: { booking: 7 } } });
    expect((await engine.heartbeatTask(undoBook!.execution_id, { worker_id: "u", attempt: 1 })).status).toBe(
      "accepted",
    );
    await engine.completeTask(undoBook!.execution_id, { worker_id: "u", attempt: 1, output: null });
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("FAILED");
    expect(done.compensations.map((c) => [c.node_id, c.state, c.output])).toEqual([
      ["pay", "SUCCEEDED", { refunded: true }],
      ["book", "SUCCEEDED", null],
    ]);
  });

  it("rejects malformed claims and reports with the field at fault", async () => {
    const { engine } = await setup();
    const problems = async (p: Promise<unknown>) => {
      const e = await p.then(
        () => null,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(ValidationError);
      return (e as ValidationError).problems.map((x) => x.path);
    };
    expect(await problems(engine.claimTasks({ agent_types: [], worker_id: "w" }))).toEqual(["agent_types"]);
    expect(await problems(engine.claimTasks({ agent_types: ["human_review"], worker_id: "w" }))).toEqual([
      "agent_types",
    ]);
    expect(
      await problems(engine.claimTasks({ agent_types: ["x"], worker_id: "w", max_tasks: 0, wait_seconds: 31 })),
    ).toEqual(["max_tasks", "wait_seconds"]);
    expect(await problems(engine.claimTasks({ agent_types: ["x"], worker_id: "w 1; DROP" }))).toEqual(["worker_id"]);
    // Ids are checked before anything reaches the database (a NUL byte once wedged a PostgreSQL engine).
    for (const id of ["nope", "\u0000:x:1", "nope:x:1", `${UNKNOWN_RUN}:x\u0001:1`]) {
      expect(await problems(engine.heartbeatTask(id, { worker_id: "w", attempt: 1 }))).toEqual(["execution_id"]);
      expect(await problems(engine.completeTask(id, { worker_id: "w", attempt: 1 }))).toEqual(["execution_id"]);
    }
    expect(
      await problems(engine.failTask(`${UNKNOWN_RUN}:x:1`, { worker_id: "", attempt: 0, error: { message: "m" } })),
    ).toEqual(["worker_id", "attempt"]);
    await expect(engine.completeTask(`${UNKNOWN_RUN}:x:1`, { worker_id: "w", attempt: 1 })).rejects.toThrow(
      NotFoundError,
    );
    await expect(engine.heartbeatTask(`${UNKNOWN_RUN}:x:1`, { worker_id: "w", attempt: 1 })).rejects.toThrow(
      NotFoundError,
    );
    const run = await engine.startRun(CHAIN.id);
    // A well-formed id naming a node the run does not have.
    for (const report of [
      () => engine.completeTask(`${run.run_id}:ghost:1`, { worker_id: "w", attempt: 1, output: 1 }),
      () => engine.failTask(`${run.run_id}:ghost:1`, { worker_id: "w", attempt: 1, error: { message: "m" } }),
      () => engine.heartbeatTask(`${run.run_id}:ghost:1`, { worker_id: "w", attempt: 1 }),
      () => engine.completeTask(`${run.run_id}:ghost:1:compensate`, { worker_id: "w", attempt: 1 }),
    ]) {
      await expect(report()).rejects.toThrow(NotFoundError);
    }
    const [task] = await engine.claimTasks({ agent_types: ["writer"], worker_id: "w" });
    expect(
      await problems(engine.completeTask(task!.execution_id, { worker_id: "w", attempt: 1, output: { f: () => 1 } })),
    ).toEqual(["output"]);
    expect(await problems(engine.completeTask(task!.execution_id, { worker_id: "w", attempt: 0, output: 1 }))).toEqual([
      "attempt",
    ]);
  });

  it("keeps an external lease no longer than the node's heartbeat_timeout after the claim and each heartbeat", async () => {
    const { engine, clock } = await testEngine();
    await engine.registerWorkflow({
      id: "beat",
      nodes: [{ node_id: "a", agent_type: "slow", timeout: 600, heartbeat_timeout: 1, retry_count: 0 }],
    });
    const run = await engine.startRun("beat");
    const w = { worker_id: "w1", attempt: 1 };
    const [task] = await engine.claimTasks({ agent_types: ["slow"], worker_id: "w1", lease_seconds: 4 });
    expect(task?.lease_expires_at).toBe(clock.now() + 1_000);
    await clock.advance(900);
    const beat = await engine.heartbeatTask(task!.execution_id, { ...w, lease_seconds: 4 });
    expect(beat).toEqual({ status: "accepted", lease_expires_at: clock.now() + 1_000 });
    await clock.advance(1_000); // 1 s after the last heartbeat, though the worker asked for 4
    const failed = await engine.waitForRun(run.run_id);
    expect(failed.nodes[0]).toMatchObject({ state: "FAILED", error: { reason: "lease_expired" } });
    await expect(engine.completeTask(task!.execution_id, { ...w, output: "late" })).rejects.toThrow(ConflictError);
    await expect(engine.heartbeatTask(task!.execution_id, w)).rejects.toThrow(ConflictError);
  });

  it("binds an attempt to the worker and token that claimed it, also after a restart", async () => {
    const { engine, database, clock } = await setup();
    const run = await engine.startRun(CHAIN.id);
    const fleet = { name: "fleet", agent_types: ["writer", "checker"] };
    const [task] = await engine.claimTasks({ agent_types: ["writer"], worker_id: "w1", token: fleet });
    const id = task!.execution_id;
    expect((await engine.getRun(run.run_id)).nodes[0]?.holder).toBe("worker:fleet/w1");
    const strangers = [
      { worker_id: "w2", token: fleet },
      { worker_id: "w1", token: { name: "other", agent_types: null } },
      { worker_id: "w1" },
      { worker_id: "fleet/w1" },
    ];
    const events = (await engine.listEvents(run.run_id)).length;
    for (const who of strangers) {
      await expect(engine.heartbeatTask(id, { ...who, attempt: 1 })).rejects.toThrow(
        /not held by this worker|worker_id/,
      );
      await expect(engine.completeTask(id, { ...who, attempt: 1, output: 1 })).rejects.toThrow(
        /not held by this worker|worker_id/,
      );
      await expect(engine.failTask(id, { ...who, attempt: 1, error: { message: "x" } })).rejects.toThrow(
        /not held by this worker|worker_id/,
      );
    }
    const writers = { worker_id: "w1", token: { name: "fleet", agent_types: ["checker"] } };
    await expect(engine.completeTask(id, { ...writers, attempt: 1, output: 1 })).rejects.toThrow(ForbiddenError);
    await expect(engine.heartbeatTask(id, { ...writers, attempt: 1 })).rejects.toThrow(ForbiddenError);
    expect((await engine.listEvents(run.run_id)).length).toBe(events);
    expect((await engine.getRun(run.run_id)).nodes[0]).toMatchObject({ state: "RUNNING", holder: "worker:fleet/w1" });

    const holder = { worker_id: "w1", token: fleet, attempt: 1 };
    expect((await engine.completeTask(id, { ...holder, output: "v1" })).status).toBe("accepted");
    // A new engine knows the attempt's holder only from the database (the run's events).
    await engine.close();
    const { engine: restarted } = await testEngine({ database, clock });
    expect((await restarted.completeTask(id, { ...holder, output: "v1" })).status).toBe("duplicate");
    await expect(restarted.completeTask(id, { ...holder, worker_id: "w2", output: "v1" })).rejects.toThrow(
      /not held by this worker/,
    );
    await expect(restarted.completeTask(id, { ...holder, attempt: 2, output: "v1" })).rejects.toThrow(/never claimed/);
  });

  it("starts compensation as soon as a cancelled external attempt reports late, without waiting for its deadline", async () => {
    const { engine } = await testEngine();
    await engine.registerWorkflow({
      id: "parallel-saga",
      nodes: [
        { node_id: "ship", agent_type: "step", timeout: 3600, compensation: { agent_type: "undo" } },
        { node_id: "charge", agent_type: "step" },
      ],
    });
    const run = await engine.startRun("parallel-saga");
    const tasks = await engine.claimTasks({ agent_types: ["step"], worker_id: "w", max_tasks: 2 });
    const ship = tasks.find((t) => t.node_id === "ship");
    const charge = tasks.find((t) => t.node_id === "charge");
    const w = { worker_id: "w", attempt: 1 };
    await engine.failTask(charge!.execution_id, { ...w, error: { message: "declined" }, retryable: false });
    // ship was cancelled mid-attempt: its undo waits for the attempt to return (or its deadline, an hour away).
    expect(await engine.claimTasks({ agent_types: ["undo"], worker_id: "u" })).toEqual([]);
    await expect(engine.completeTask(ship!.execution_id, { ...w, output: "shipped" })).rejects.toThrow(/CANCELLED/);
    const [undo] = await engine.claimTasks({ agent_types: ["undo"], worker_id: "u" });
    expect(undo).toMatchObject({ execution_id: `${ship!.execution_id}:compensate` });
    await engine.completeTask(undo!.execution_id, { worker_id: "u", attempt: 1, output: null });
    expect((await engine.waitForRun(run.run_id)).status).toBe("FAILED");
  });
});
