import { describe, expect, it } from "vitest";
import { z } from "zod";
import { EventSchema, RunSchema, RunWithNodesSchema } from "../../src/http/schemas.js";
import { bearer, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

const admin = bearer(TOKENS.admin);
const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

async function withWorkflows() {
  const t = await testApi();
  for (const w of Object.values(WORKFLOWS)) await t.engine.registerWorkflow(w);
  return t;
}

describe("runs", () => {
  it("POST starts a run (201) in the caller's trace; GET reads it with its nodes once it has run", async () => {
    const { app, engine } = await withWorkflows();
    const res = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: { ...admin, traceparent: `00-${TRACE}-00f067aa0ba902b7-01` },
      payload: { workflow_id: "simple", input: { topic: "x" } },
    });
    expect(res.statusCode).toBe(201);
    const run = RunSchema.parse(res.json());
    expect(run).toMatchObject({ workflow_id: "simple", input: { topic: "x" }, trace_id: TRACE });

    await engine.waitForRun(run.run_id);
    const read = await app.inject({ url: `/v1/runs/${run.run_id}`, headers: admin });
    expect(read.statusCode).toBe(200);
    const done = RunWithNodesSchema.parse(read.json());
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.map((n) => [n.node_id, n.state])).toEqual([
      ["a", "SUCCEEDED"],
      ["b", "SUCCEEDED"],
    ]);
  });

  it("GET shows a parent's children and a child's parent (workflow nodes)", async () => {
    const { app, engine } = await withWorkflows();
    await engine.registerWorkflow({
      id: "outer",
      nodes: [{ node_id: "sub", agent_type: "workflow", payload: { workflow_id: "simple" } }],
    });
    const run = await engine.startRun("outer");
    await engine.waitForRun(run.run_id);
    const read = await app.inject({ url: `/v1/runs/${run.run_id}`, headers: admin });
    const parent = RunWithNodesSchema.parse(read.json());
    expect(parent).toMatchObject({ status: "SUCCEEDED", parent: null });
    expect(parent.children).toEqual([
      { node_id: "sub", visit: 1, attempt: 1, run_id: expect.any(String), workflow_id: "simple", status: "SUCCEEDED" },
    ]);
    const child = await app.inject({ url: `/v1/runs/${parent.children[0]?.run_id}`, headers: admin });
    expect(RunWithNodesSchema.parse(child.json()).parent).toEqual({
      run_id: run.run_id,
      node_id: "sub",
      visit: 1,
      attempt: 1,
      depth: 1,
      ancestors: [run.run_id],
    });
  });

  it("POST without a traceparent starts the run in the request's own trace", async () => {
    const { app } = await withWorkflows();
    const res = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: admin,
      payload: { workflow_id: "simple" },
    });
    expect(res.json().trace_id).toMatch(/^[0-9a-f]{32}$/);
    expect(res.json().traceparent).toMatch(new RegExp(`^00-${res.json().trace_id}-[0-9a-f]{16}-01$`));
  });

  it("POST with the same idempotency key returns the same run; another input with it is a 409", async () => {
    const { app } = await withWorkflows();
    const start = (input: unknown) =>
      app.inject({
        method: "POST",
        url: "/v1/runs",
        headers: admin,
        payload: { workflow_id: "simple", input, idempotency_key: "order-42" },
      });
    const first = await start({ n: 1 });
    const second = await start({ n: 1 });
    expect(second.json().run_id).toBe(first.json().run_id);
    const conflict = await start({ n: 2 });
    expect(conflict.statusCode).toBe(409);
    expect(conflict.json().error.code).toBe("conflict");
  });

  it("POST refuses bad bodies with every problem and its path, and unknown workflows with 404", async () => {
    const { app } = await withWorkflows();
    const bad = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: admin,
      payload: { workflow: "simple", idempotency_key: 7 },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details.problems).toEqual(
      expect.arrayContaining([
        { path: "body.workflow_id", message: "is required" },
        { path: "body.idempotency_key", message: expect.stringContaining("expected a string") },
        { path: "body", message: 'unknown field "workflow"' },
      ]),
    );
    const unknown = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: admin,
      payload: { workflow_id: "nope" },
    });
    expect(unknown.statusCode).toBe(404);
  });

  it("POST takes a priority, which a worker's claims go by (lower first); one not 0 to 9 is a 400 naming it", async () => {
    const { app, engine, clock } = await withWorkflows();
    await engine.registerWorkflow({ id: "remote", nodes: [{ node_id: "n", agent_type: "ext" }] });
    const start = (body: object) =>
      app.inject({ method: "POST", url: "/v1/runs", headers: admin, payload: { workflow_id: "remote", ...body } });
    const started: Record<string, string> = {};
    for (const [label, priority] of [
      ["later", 8],
      ["plain", undefined],
      ["urgent", 0],
    ] as const) {
      await clock.advance(1);
      const res = await start({ input: { label }, ...(priority === undefined ? {} : { priority }) });
      expect(res.statusCode, res.body).toBe(201);
      const run = RunSchema.parse(res.json());
      expect(run.priority).toBe(priority ?? 5);
      started[label] = run.run_id;
    }
    const order: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await app.inject({
        method: "POST",
        url: "/v1/tasks/claim",
        headers: admin,
        payload: { worker_id: "w", agent_types: ["ext"], max_tasks: 1 },
      });
      expect(res.statusCode, res.body).toBe(200);
      order.push(...(res.json().tasks as { input: { label: string } }[]).map((t) => t.input.label));
    }
    expect(order).toEqual(["urgent", "plain", "later"]);
    const read = await app.inject({ url: `/v1/runs/${started.urgent}`, headers: admin });
    expect(RunWithNodesSchema.parse(read.json()).priority).toBe(0);

    const refusals: Record<string, string> = {};
    for (const priority of [10, -1, 2.5, "high"]) {
      const bad = await start({ priority });
      expect(bad.statusCode, bad.body).toBe(400);
      const [problem, ...more] = bad.json().error.details.problems as { path: string; message: string }[];
      expect(more).toEqual([]);
      expect(problem?.path).toBe("body.priority");
      refusals[String(priority)] = problem?.message ?? "";
    }
    expect(refusals).toEqual({
      "10": "must be <= 9, got 10",
      "-1": "must be >= 0, got -1",
      "2.5": "expected an integer, got 2.5",
      high: 'expected a number, got "high"',
    });
  });

  it("POST answers 400 for an input that does not match the workflow's input_schema, with the input's paths", async () => {
    const { app, engine } = await withWorkflows();
    await engine.registerWorkflow({
      id: "typed",
      input_schema: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
      nodes: [{ node_id: "a", agent_type: "writer" }],
    });
    const res = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: admin,
      payload: { workflow_id: "typed", input: { topic: 3 } },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details.problems).toEqual([{ path: "input.topic", message: "must be string" }]);
  });

  it("GET /v1/runs pages newest first with an opaque cursor, and filters by status and workflow", async () => {
    const { app, engine, clock } = await withWorkflows();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const run = await engine.startRun("simple", { input: { i } });
      ids.push(run.run_id);
      await engine.waitForRun(run.run_id);
      await clock.advance(1); // runs of one millisecond have no order among themselves
    }
    const failed = await engine.startRun("failing");
    await engine.waitForRun(failed.run_id);

    const Page = z.object({ runs: z.array(RunSchema), next_cursor: z.string().nullable() });
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = `workflow_id=simple&limit=2${cursor ? `&cursor=${cursor}` : ""}`;
      const res = await app.inject({ url: `/v1/runs?${query}`, headers: admin });
      expect(res.statusCode).toBe(200);
      const page = Page.parse(res.json());
      seen.push(...page.runs.map((r) => r.run_id));
      cursor = page.next_cursor;
      pages += 1;
    } while (cursor !== null);
    expect(seen).toEqual([...ids].reverse());
    expect(pages).toBe(3);

    const onlyFailed = await app.inject({ url: "/v1/runs?status=FAILED", headers: admin });
    expect(onlyFailed.json().runs.map((r: { run_id: string }) => r.run_id)).toEqual([failed.run_id]);
  });

  it("GET /v1/runs refuses a cursor it did not make, a bad status and a bad limit (400 with paths)", async () => {
    const { app } = await withWorkflows();
    const res = await app.inject({ url: "/v1/runs?cursor=not-a-cursor", headers: admin });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details.problems).toEqual([{ path: "query.cursor", message: expect.any(String) }]);
    const bad = await app.inject({ url: "/v1/runs?status=DONE&limit=5000", headers: admin });
    expect(bad.json().error.details.problems.map((p: { path: string }) => p.path)).toEqual([
      "query.status",
      "query.limit",
    ]);
  });

  it("GET of an unknown run is a 404 in the one error shape", async () => {
    const { app } = await withWorkflows();
    const res = await app.inject({ url: "/v1/runs/0193-nope", headers: admin });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({
      error: { code: "not_found", message: expect.stringContaining("0193-nope"), details: {} },
    });
  });

  it("cancel ends a waiting run (200), then answers 409; unknown runs 404", async () => {
    const { app, engine } = await withWorkflows();
    const run = await engine.startRun("review");
    const cancel = () =>
      app.inject({
        method: "POST",
        url: `/v1/runs/${run.run_id}/cancel`,
        headers: admin,
        payload: { reason: "no longer needed" },
      });
    const res = await cancel();
    expect(res.statusCode).toBe(200);
    expect(RunSchema.parse(res.json()).status).toBe("CANCELLED");
    expect((await cancel()).statusCode).toBe(409);
    const unknown = await app.inject({ method: "POST", url: "/v1/runs/nope/cancel", headers: admin });
    expect(unknown.statusCode).toBe(404);
    const bad = await app.inject({
      method: "POST",
      url: `/v1/runs/${run.run_id}/cancel`,
      headers: admin,
      payload: { compensate: "yes" },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details.problems[0].path).toBe("body.compensate");
  });

  it("retry redrives a FAILED run (200) and refuses a running one (409) and an unknown from node (404)", async () => {
    const { app, engine } = await withWorkflows();
    const failed = await engine.startRun("failing");
    await engine.waitForRun(failed.run_id);
    const res = await app.inject({
      method: "POST",
      url: `/v1/runs/${failed.run_id}/retry`,
      headers: admin,
      payload: {},
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ run_id: failed.run_id, status: "RUNNING" });
    await engine.waitForRun(failed.run_id);

    const waiting = await engine.startRun("review");
    const running = await app.inject({ method: "POST", url: `/v1/runs/${waiting.run_id}/retry`, headers: admin });
    expect(running.statusCode).toBe(409);
    const from = await app.inject({
      method: "POST",
      url: `/v1/runs/${failed.run_id}/retry`,
      headers: admin,
      payload: { from: "ghost" },
    });
    expect(from.statusCode).toBe(404);
  });

  it("events: the run's history oldest first, paged by after_seq; 404 for an unknown run", async () => {
    const { app, engine } = await withWorkflows();
    const run = await engine.startRun("simple");
    await engine.waitForRun(run.run_id);
    const Page = z.object({ events: z.array(EventSchema), next_after_seq: z.number().nullable() });
    const all = Page.parse((await app.inject({ url: `/v1/runs/${run.run_id}/events`, headers: admin })).json());
    expect(all.events[0]?.type).toBe("run.started");
    expect(all.events.at(-1)?.type).toBe("run.succeeded");
    expect(all.next_after_seq).toBeNull();

    const first = Page.parse(
      (await app.inject({ url: `/v1/runs/${run.run_id}/events?limit=2`, headers: admin })).json(),
    );
    expect(first.events).toEqual(all.events.slice(0, 2));
    const rest = Page.parse(
      (
        await app.inject({ url: `/v1/runs/${run.run_id}/events?after_seq=${first.next_after_seq}`, headers: admin })
      ).json(),
    );
    expect(rest.events).toEqual(all.events.slice(2));

    expect((await app.inject({ url: "/v1/runs/nope/events", headers: admin })).statusCode).toBe(404);
    const bad = await app.inject({ url: `/v1/runs/${run.run_id}/events?after_seq=-1`, headers: admin });
    expect(bad.statusCode).toBe(400);
  });

  it("graph: Mermaid text of the run with its node states; 404 for an unknown run", async () => {
    const { app, engine } = await withWorkflows();
    const run = await engine.startRun("simple");
    await engine.waitForRun(run.run_id);
    const res = await app.inject({ url: `/v1/runs/${run.run_id}/graph`, headers: admin });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/plain/);
    expect(res.body).toMatch(/^flowchart TD\n/);
    expect(res.body).toContain("class n0,n1 succeeded");
    expect((await app.inject({ url: "/v1/runs/nope/graph", headers: admin })).statusCode).toBe(404);
  });
});
