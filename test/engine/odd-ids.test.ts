/**
 * Ids the database refuses never wedge an engine (issue 14 item 4, the store's half): run ids,
 * execution ids, workflow ids and idempotency keys with a NUL character (PostgreSQL cannot store
 * one) or SQL-looking text are bound as parameters, never written into SQL, and a value the
 * database refuses is an error of that call (not a lost connection to retry for ever). Each
 * call gets a precise error, and the engine goes on: a normal run succeeds, close() returns. A
 * NUL character in any id, name or key is refused before the store, the same on both (issue 33).
 */
import { describe, expect, it } from "vitest";
import { type Engine, SkeinError, type ValidationError } from "../../src/index.js";
import { within } from "../fixtures/child.js";
import { testEngine } from "../helpers.js";

const WORKFLOW = { id: "odd", nodes: [{ node_id: "a", agent_type: "echo" }] };

const ODD = ["\u0000", "run\u0000id", "'); DROP TABLE runs; --", "\\'", "%00", "😀\u0000"];

/** The call's error: a Skein error saying the id is unknown, refused or not usable, never a hang. */
async function refused(what: string, call: () => Promise<unknown>): Promise<SkeinError> {
  const outcome = await within(
    10_000,
    what,
    call().then(
      () => null,
      (e: unknown) => e,
    ),
  );
  expect(outcome, `${what}: not refused by a Skein error`).toBeInstanceOf(SkeinError);
  const error = outcome as SkeinError;
  expect(["not_found", "validation", "conflict"], `${what}: ${error.code} ${error.message}`).toContain(error.code);
  return error;
}

async function stillWorks(engine: Engine): Promise<void> {
  const run = await engine.startRun(WORKFLOW.id, { input: { ok: true } });
  const done = await within(10_000, "a normal run", engine.waitForRun(run.run_id));
  expect(done.status).toBe("SUCCEEDED");
}

describe("ids the database refuses", () => {
  it("are refused call by call, and the engine keeps working", async () => {
    const { engine } = await testEngine({ agents: { echo: () => ({ echoed: true }) } });
    await engine.registerWorkflow(WORKFLOW);
    await stillWorks(engine);
    for (const id of ODD) {
      const label = JSON.stringify(id);
      await refused(`getRun(${label})`, () => engine.getRun(id));
      await refused(`cancelRun(${label})`, () => engine.cancelRun(id));
      await refused(`retryRun(${label})`, () => engine.retryRun(id));
      await refused(`review(${label})`, () => engine.review(id, "a", { decision: "approve" }));
      await refused(`startRun(${label})`, () => engine.startRun(id));
      // The external-task protocol's ids: run id, node id and visit in one execution id.
      for (const executionId of [`${id}:a:1`, `${id}`, `x:${id}:1`]) {
        await refused(`heartbeatTask(${JSON.stringify(executionId)})`, () =>
          engine.heartbeatTask(executionId, { attempt: 1, worker_id: "w1" }),
        );
        await refused(`completeTask(${JSON.stringify(executionId)})`, () =>
          engine.completeTask(executionId, { attempt: 1, worker_id: "w1", output: {} }),
        );
      }
      await stillWorks(engine);
    }
    // Reads answer as for any unknown run.
    for (const id of ODD) {
      const events = await within(
        10_000,
        "listEvents",
        engine.listEvents(id).catch((e: unknown) => e),
      );
      if (Array.isArray(events)) expect(events).toEqual([]);
      else expect(events).toBeInstanceOf(SkeinError);
    }
    await stillWorks(engine);
    await within(10_000, "close()", engine.close());
  });

  it("refuses a NUL character in every id, name or key a caller sends, naming the field, on both stores", async () => {
    const { engine } = await testEngine({ agents: { echo: () => ({ echoed: true }) } });
    await engine.registerWorkflow(WORKFLOW);
    await engine.registerWorkflow({
      id: "wait",
      nodes: [{ node_id: "w", agent_type: "wait_event", payload: { event: "go" } }],
    });
    const run = await engine.startRun("wait");
    const N = "x\u0000y";
    const calls: [string, () => Promise<unknown>][] = [
      ["idempotency_key", () => engine.startRun(WORKFLOW.id, { idempotency_key: `k${N}` })],
      ["workflow_id", () => engine.startRun(N)],
      ["scope[1]", () => engine.startRun(WORKFLOW.id, { scope: ["odd", N] })],
      ["run_id", () => engine.getRun(N)],
      ["run_id", () => engine.waitForRun(N)],
      ["run_id", () => engine.cancelRun(N)],
      ["from", () => engine.retryRun(run.run_id, { from: N })],
      ["node_id", () => engine.review(run.run_id, N, { decision: "approve" })],
      ["by", () => engine.review(run.run_id, "w", { decision: "approve", by: N })],
      ["name", () => engine.sendEvent(run.run_id, N, 1)],
      ["idempotency_key", () => engine.sendEvent(run.run_id, "go", 1, { idempotency_key: N })],
      ["name", () => engine.publishEvent(N, "k", 1)],
      ["key", () => engine.publishEvent("go", N, 1)],
      ["schedule_id", () => engine.putSchedule({ schedule_id: N, workflow_id: WORKFLOW.id, cron: "0 * * * *" })],
      ["workflow_id", () => engine.putSchedule({ schedule_id: "s", workflow_id: N, cron: "0 * * * *" })],
      ["schedule_id", () => engine.getSchedule(N)],
      ["schedule_id", () => engine.pauseSchedule(N)],
      ["schedule_id", () => engine.deleteSchedule(N)],
      ["workflow_id", () => engine.listRuns({ workflow_id: N })],
      ["run_id", () => engine.listVisits(N)],
      ["run_id", () => engine.listEvents(N)],
      ["run_id", async () => engine.subscribe(() => {}, { run_id: N, from: 0 })],
      ["workflow_id", () => engine.getWorkflow(N)],
      ["node_id", () => engine.listMapItems(run.run_id, N)],
      ["agent_types[0]", () => engine.claimTasks({ agent_types: [N], worker_id: "w1" })],
      ["worker_id", () => engine.claimTasks({ agent_types: ["echo"], worker_id: N })],
      ["run_ids[0]", () => engine.listReviews({ runIds: [N] })],
    ];
    for (const [field, call] of calls) {
      const error = await refused(field, call);
      expect(error.code, `${field}: ${error.message}`).toBe("validation");
      expect((error as ValidationError).problems).toEqual([
        { path: field, message: "holds a NUL character (\\u0000), which the database cannot store: remove it" },
      ]);
    }
    // Nothing was written: the waiting run is as it was, no other run, event or schedule exists.
    expect((await engine.listRuns()).map((r) => r.run_id)).toEqual([run.run_id]);
    expect((await engine.getRun(run.run_id)).nodes[0]?.state).toBe("WAITING");
    expect(await engine.listSchedules()).toEqual([]);
    await stillWorks(engine);
    await within(10_000, "close()", engine.close());
  });
});
