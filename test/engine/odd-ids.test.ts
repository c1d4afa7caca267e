/**
 * Ids the database refuses never wedge an engine (issue 14 item 4, the store's half): run ids,
 * execution ids, workflow ids and idempotency keys with a NUL character (PostgreSQL cannot store
 * one) or SQL-looking text are bound as parameters, never written into SQL, and a value the
 * database refuses is an error of that call (not a lost connection to retry for ever). Each
 * call gets a precise error, and the engine goes on: a normal run succeeds, close() returns.
 */
import { describe, expect, it } from "vitest";
import { type Engine, SkeinError } from "../../src/index.js";
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

  it("refuses an idempotency key with a NUL character, or stores it as given, and goes on", async () => {
    const { engine } = await testEngine({ agents: { echo: () => ({ echoed: true }) } });
    await engine.registerWorkflow(WORKFLOW);
    for (const key of ["k\u0000", "'); DELETE FROM runs; --"]) {
      const outcome = await within(
        10_000,
        `startRun with key ${JSON.stringify(key)}`,
        engine.startRun(WORKFLOW.id, { idempotency_key: key }).catch((e: unknown) => e),
      );
      if (outcome instanceof SkeinError) {
        // PostgreSQL cannot store a NUL: refused as bad input, with what to do.
        expect(outcome.code).toBe("validation");
        expect(outcome.message).toMatch(/NUL/);
      } else {
        const again = await engine.startRun(WORKFLOW.id, { idempotency_key: key });
        expect(again.run_id).toBe((outcome as { run_id: string }).run_id);
      }
      await stillWorks(engine);
    }
    await within(10_000, "close()", engine.close());
  });
});
