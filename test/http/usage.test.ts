/**
 * Usage and budgets over HTTP (DESIGN §12): a run's budget in the start body, its usage and
 * budget in the run, a worker's usage in its complete and fail bodies.
 */
import { describe, expect, it } from "vitest";
import { bearer, TOKENS, testApi } from "./helpers.js";

const REMOTE = {
  id: "remote",
  nodes: [
    { node_id: "a", agent_type: "writer", retry_count: 1, retry_interval: 0, next_on_success: "b" },
    { node_id: "b", agent_type: "writer" },
  ],
};

describe("usage and budgets over HTTP", () => {
  it("starts a run with a budget; a worker's usage counts; the budget stops the next attempt", async () => {
    const { app, engine } = await testApi({ engine: { agents: {} } });
    await engine.registerWorkflow(REMOTE);
    const post = (url: string, payload: object, token: string = TOKENS.agent) =>
      app.inject({ method: "POST", url, headers: bearer(token), payload });

    const started = await post("/v1/runs", { workflow_id: "remote", budget: { max_tokens: 100 } }, TOKENS.admin);
    expect(started.statusCode, started.body).toBe(201);
    const run = started.json();
    expect(run).toMatchObject({ budget: { max_tokens: 100 }, usage: { tokens_in: 0, tokens_out: 0, cost: 0 } });

    const bad = await post("/v1/runs", { workflow_id: "remote", budget: { max_tokens: -5 } }, TOKENS.admin);
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toContain("budget");

    const claimed = await post("/v1/tasks/claim", { worker_id: "w1", agent_types: ["writer"] });
    const [task] = claimed.json().tasks as { execution_id: string; attempt: number }[];
    expect(task).toBeDefined();
    expect(task).not.toHaveProperty("usage_runs");
    const url = `/v1/tasks/${task?.execution_id}`;
    const wrong = await post(`${url}/fail`, {
      worker_id: "w1",
      attempt: 1,
      error: { message: "x" },
      usage: { tokens: 1 },
    });
    expect(wrong.statusCode).toBe(400);
    const failed = await post(`${url}/fail`, {
      worker_id: "w1",
      attempt: 1,
      error: { message: "flaky" },
      usage: { tokens_in: 60 },
    });
    expect(failed.statusCode, failed.body).toBe(200);
    await post("/v1/tasks/claim", { worker_id: "w1", agent_types: ["writer"] });
    const done = await post(`${url}/complete`, {
      worker_id: "w1",
      attempt: 2,
      output: {},
      usage: { tokens_out: 40, cost: 0.3 },
    });
    expect(done.statusCode, done.body).toBe(200);

    // b's claim finds the budget reached (100 tokens): no task, b fails budget_exceeded.
    const none = await post("/v1/tasks/claim", { worker_id: "w1", agent_types: ["writer"] });
    expect(none.json().tasks).toEqual([]);
    const final = await engine.waitForRun(run.run_id);
    const shown = await app.inject({ method: "GET", url: `/v1/runs/${run.run_id}`, headers: bearer(TOKENS.admin) });
    expect(shown.json()).toMatchObject({
      usage: { tokens_in: 60, tokens_out: 40, cost: 0.3 },
      budget: { max_tokens: 100 },
    });
    expect(final.nodes.find((n) => n.node_id === "b")).toMatchObject({ state: "FAILED", reason: "budget_exceeded" });
  });
});
