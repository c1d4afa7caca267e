/**
 * A worker's 429 over the HTTP API (DESIGN §17): `skein worker`'s agent throws a RetryableError
 * with `rateLimited`, the worker reports `error.rate_limited` with `retry_after_ms`, and the
 * engine holds the agent type: no claim gets a task of it until the clock passes the hold.
 */
import { describe, expect, it } from "vitest";
import { RetryableError } from "../../src/index.js";
import { HttpWorker } from "../../src/worker/http-worker.js";
import { bearer, TOKENS, testApi } from "./helpers.js";

describe("a worker's rate-limited failure", () => {
  it("holds its agent type for every claim until the Retry-After has passed", async () => {
    const { app, engine, clock } = await testApi({ engine: { agents: {} } });
    const t0 = clock.now();
    await engine.registerWorkflow({ id: "one", nodes: [{ node_id: "a", agent_type: "writer" }] });
    const base = await app.listen({ host: "127.0.0.1", port: 0 });
    const worker = new HttpWorker({
      server: base,
      token: TOKENS.agent,
      workerId: "w1",
      waitSeconds: 0,
      log: () => {},
      agents: {
        writer: () => {
          throw new RetryableError("the provider answered 429", { retryAfterMs: 20_000, rateLimited: true });
        },
      },
    });
    const run = await engine.startRun("one");
    const working = worker.run();
    const retrying = await new Promise<string>((resolve) => {
      const off = engine.subscribe((e) => {
        if (e.type === "node.retrying") {
          off();
          resolve(e.run_id);
        }
      });
    });
    worker.stop();
    await working;
    expect(retrying).toBe(run.run_id);
    expect((await engine.getRun(run.run_id)).nodes[0]?.error).toMatchObject({
      reason: "rate_limited",
      retry_after_ms: 20_000,
    });

    await engine.startRun("one");
    const claim = () =>
      app.inject({
        method: "POST",
        url: "/v1/tasks/claim",
        headers: bearer(TOKENS.agent),
        payload: { worker_id: "w2", agent_types: ["writer"], max_tasks: 2 },
      });
    expect((await claim()).json().tasks).toEqual([]);
    expect((await engine.rateLimitStates()).find((s) => s.agent_type === "writer")).toMatchObject({
      held_until: t0 + 20_000,
    });
    await clock.advance(20_000);
    expect((await claim()).json().tasks).toHaveLength(2);
  });
});
