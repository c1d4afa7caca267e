/**
 * A full disk through the HTTP API (issue 14 item 8): `skein serve`'s server over an engine
 * whose SQLite file lives on a small tmpfs the test fills for real. Requests are answered 503
 * with Retry-After (not 500), /v1/ready says not ready, and once space is freed the result
 * that arrived meanwhile is applied (no attempt timeout: the manual clock never moves) and the
 * server is ready again.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/index.js";
import { mountSmallDisk, type SmallDisk } from "../fixtures/full-disk.js";
import { nextEvent } from "../helpers.js";
import { bearer, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

let disk: SmallDisk | null = null;
let refused = "";
beforeAll(() => {
  const mounted = mountSmallDisk("8m");
  if ("refused" in mounted) refused = mounted.refused;
  else disk = mounted;
});
afterAll(() => disk?.unmount());

const admin = { ...bearer(TOKENS.admin), "content-type": "application/json" };

describe("a full disk under skein serve", () => {
  it("answers 503 with Retry-After, is not ready until space returns, then applies what arrived", async (ctx) => {
    if (!disk) return ctx.skip(`no tmpfs for a full disk: ${refused}`);
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const writer = async (t: Task) => {
      if (t.node_id === "a") await released;
      return { node: t.node_id };
    };
    const { app, engine } = await testApi({ engine: { database: `sqlite:${disk.dir}/serve.db`, agents: { writer } } });
    await engine.registerWorkflow(WORKFLOWS.simple);
    const started = nextEvent(engine, (e) => e.type === "node.started");
    const created = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: admin,
      payload: { workflow_id: "simple" },
    });
    expect(created.statusCode).toBe(201);
    await started;
    expect((await app.inject({ url: "/v1/ready" })).statusCode).toBe(200);

    disk.fill();
    ctx.onTestFinished(() => disk?.free());
    release(); // a's result arrives while nothing can be written
    const refusedStart = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: admin,
      payload: { workflow_id: "simple" },
    });
    expect(refusedStart.statusCode).toBe(503);
    expect(refusedStart.headers["retry-after"]).toMatch(/^[1-9][0-9]*$/);
    expect(refusedStart.json().error).toMatchObject({
      code: "unavailable",
      message: expect.stringMatching(/retry later/),
    });
    const notReady = await app.inject({ url: "/v1/ready" });
    expect(notReady.statusCode).toBe(503);
    expect(notReady.headers["retry-after"]).toMatch(/^[1-9][0-9]*$/);
    expect(notReady.json().error.code).toBe("unavailable");

    disk.free();
    const done = await engine.waitForRun(created.json().run_id);
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes.map((n) => [n.node_id, n.attempt])).toEqual([
      ["a", 1],
      ["b", 1],
    ]);
    expect((await app.inject({ url: "/v1/ready" })).statusCode).toBe(200);
    const again = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: admin,
      payload: { workflow_id: "simple" },
    });
    expect(again.statusCode).toBe(201);
  });
});
