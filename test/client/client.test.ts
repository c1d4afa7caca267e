/**
 * skein/client's calls against a real server: each family of operations (workflows, runs,
 * reviews, events) does what the API does, and refusals throw SkeinApiError with the API's
 * status, code and message.
 */
import { describe, expect, it } from "vitest";
import { OPERATIONS, SkeinApiError } from "../../src/client/index.js";
import { nextEvent } from "../helpers.js";
import { listening, TOKENS, WORKFLOWS } from "./helpers.js";

const PAID = {
  id: "paid",
  nodes: [{ node_id: "paid", agent_type: "wait_event", payload: { event: "paid", key: "{{ input.order }}" } }],
};
const WAITS = { id: "waits", nodes: [{ node_id: "go", agent_type: "wait_event", payload: { event: "go" } }] };

/** The error a call throws (fails the test when it does not throw). */
async function refusal(call: Promise<unknown>): Promise<SkeinApiError> {
  const error = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SkeinApiError);
  return error as SkeinApiError;
}

describe("skein/client", () => {
  it("registers and lists workflows", async () => {
    const { client } = await listening();
    const admin = client();
    const registered = await admin.registerWorkflow({ id: "simple", body: WORKFLOWS.simple });
    expect(registered).toMatchObject({ id: "simple", version: 1 });
    const { workflows } = await admin.listWorkflows();
    expect(workflows.map((w) => w.id)).toEqual(["simple"]);
    expect(await admin.getWorkflow({ id: "simple" })).toMatchObject({ id: "simple" });
  });

  it("starts, reads, lists, cancels and retries runs", async () => {
    const { client, engine } = await listening();
    const admin = client();
    await admin.registerWorkflow({ id: "simple", body: WORKFLOWS.simple });
    await admin.registerWorkflow({ id: "waits", body: WAITS });
    await admin.registerWorkflow({ id: "failing", body: WORKFLOWS.failing });

    const simple = await admin.startRun({ body: { workflow_id: "simple", input: { topic: "x" } } });
    expect(simple.status).toBe("RUNNING");
    await engine.waitForRun(simple.run_id);
    const read = await admin.getRun({ run_id: simple.run_id });
    expect(read.status).toBe("SUCCEEDED");
    expect(read.nodes.map((n) => [n.node_id, n.state])).toEqual([
      ["a", "SUCCEEDED"],
      ["b", "SUCCEEDED"],
    ]);

    const waiting = await admin.startRun({ body: { workflow_id: "waits" } });
    const running = await admin.listRuns({ status: "RUNNING" });
    expect(running.runs.map((r) => r.run_id)).toEqual([waiting.run_id]);
    const cancelled = await admin.cancelRun({ run_id: waiting.run_id, body: { reason: "not needed" } });
    expect(cancelled.status).toBe("CANCELLED");

    const failing = await admin.startRun({ body: { workflow_id: "failing" } });
    expect((await engine.waitForRun(failing.run_id)).status).toBe("FAILED");
    const retried = await admin.retryRun({ run_id: failing.run_id, body: {} });
    expect(retried).toMatchObject({ run_id: failing.run_id, status: "RUNNING" });
    // The same call by its operationId.
    expect((await admin.call("getRun", { run_id: failing.run_id })).run_id).toBe(failing.run_id);
  });

  it("lists pending reviews and decides one", async () => {
    const { client, engine } = await listening();
    await client().registerWorkflow({ id: "review", body: WORKFLOWS.review });
    // The draft runs first: the review is pending once the engine has reached it.
    const requested = nextEvent(engine, (e) => e.type === "review.requested");
    const run = await client().startRun({ body: { workflow_id: "review" } });
    await requested;
    const alice = client(TOKENS.alice);
    const pending = await alice.listReviews();
    expect(pending.reviews).toMatchObject([{ run_id: run.run_id, node_id: "check" }]);
    await alice.decideReview({ run_id: run.run_id, node_id: "check", body: { decision: "approve", comment: "ok" } });
    expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
    expect((await alice.listReviews()).reviews).toEqual([]);
  });

  it("sends an event to a run and publishes one by key", async () => {
    const { client, engine } = await listening();
    const admin = client();
    await admin.registerWorkflow({ id: "waits", body: WAITS });
    await admin.registerWorkflow({ id: "paid", body: PAID });
    const waits = await admin.startRun({ body: { workflow_id: "waits" } });
    const paid = await admin.startRun({ body: { workflow_id: "paid", input: { order: "o-1" } } });

    await admin.sendEvent({ run_id: waits.run_id, body: { name: "go", payload: { n: 1 } } });
    expect((await engine.waitForRun(waits.run_id)).status).toBe("SUCCEEDED");
    await admin.publishEvent({ body: { name: "paid", key: "o-1", payload: { amount: 3 } } });
    expect((await engine.waitForRun(paid.run_id)).status).toBe("SUCCEEDED");
  });

  it("throws SkeinApiError with the API's status, code and message", async () => {
    const { client } = await listening();
    const missing = await refusal(client().getRun({ run_id: "no-such-run" }));
    expect(missing).toMatchObject({ status: 404, code: "not_found" });
    expect(missing.message).toContain("no-such-run");

    const invalid = await refusal(client().startRun({ body: { workflow_id: "" } }));
    expect(invalid).toMatchObject({ status: 400, code: "validation" });
    expect(invalid.details.problems).toEqual(
      expect.arrayContaining([expect.objectContaining({ path: "body.workflow_id" })]),
    );

    expect(await refusal(client(null).listRuns())).toMatchObject({ status: 401, code: "unauthorized" });
    expect(await refusal(client("not-a-token-0123456789").listRuns())).toMatchObject({
      status: 401,
      code: "unauthorized",
    });
    const forbidden = await refusal(client(TOKENS.alice).startRun({ body: { workflow_id: "simple" } }));
    expect(forbidden).toMatchObject({ status: 403, code: "forbidden", name: "SkeinApiError" });
  });
});

describe("every operation of the document through skein/client", () => {
  it("reaches its route (answered by the route, not by the server's no-such-route 404)", async () => {
    const { client } = await listening();
    const call = client().call as (operationId: string, input: Record<string, unknown>) => Promise<unknown>;
    const answers: Record<string, string> = {};
    for (const [operationId, [, path]] of Object.entries(OPERATIONS)) {
      const input: Record<string, unknown> = Object.fromEntries(
        [...path.matchAll(/\{([^}]+)\}/g)].map(([, name]) => [name, "x"]),
      );
      // streamEvents of a run that does not exist: refused before the stream opens.
      if (operationId === "streamEvents") input.run_id = "no-such-run";
      if (path !== "/v1/stream" && ["POST", "PUT"].includes(OPERATIONS[operationId as keyof typeof OPERATIONS][0])) {
        input.body = {};
      }
      const answer = await call(operationId, input).then(
        () => "ok",
        (e: unknown) => (e instanceof SkeinApiError ? `${e.status} ${e.code}: ${e.message}` : String(e)),
      );
      answers[operationId] = answer;
    }
    const unreached = Object.entries(answers).filter(([, a]) => a.includes("no route") || !/^(ok|\d{3} )/.test(a));
    expect(unreached).toEqual([]);
    expect(Object.keys(answers).sort()).toEqual(Object.keys(OPERATIONS).sort());
  });
});
