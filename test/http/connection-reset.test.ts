/**
 * A connection reset before any answer (issue 33: a kept-alive connection the server closed as the
 * client reused it). The worker sends a heartbeat, a report or progress again once (a second copy
 * changes nothing), never a claim; the tests' fetch does the same for what may be sent twice.
 * Between the worker and the API sits a real HTTP server that resets the connection of the
 * requests the test names and hands every other one to the API.
 */
import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../src/index.js";
import { isConnectionReset } from "../../src/worker/connection-reset.js";
import { HttpWorker } from "../../src/worker/http-worker.js";
import { fetchApi } from "../helpers.js";
import { json, startServer, type TestServer } from "../local-server.js";
import { resettingProxy, TOKENS, testApi } from "./helpers.js";

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const WORKERS = "agent-resets-0123456789";

/** The API behind a server that resets the next `resets[route]` requests of each task route. */
async function apiBehindResets(resets: Record<string, number>) {
  const t = await testApi({
    // The worker judges its lease by the real clock: so does this engine.
    engine: { clock: systemClock, progressIntervalMs: 0 },
    server: {
      tokens: [
        { token: TOKENS.admin, role: "admin", name: "ops" },
        { token: WORKERS, role: "agent", name: "resets", agent_types: ["ext_writer"] },
      ],
    },
  });
  await t.engine.registerWorkflow({ id: "external", nodes: [{ node_id: "draft", agent_type: "ext_writer" }] });
  return { ...t, proxy: await resettingProxy(t.app, resets) };
}

/** A worker whose one task heartbeats, posts progress and returns; its log lines. */
function worker(base: string) {
  const lines: string[] = [];
  const beats: boolean[] = [];
  const w = new HttpWorker({
    server: base,
    token: WORKERS,
    workerId: "w1",
    waitSeconds: 1,
    log: (line) => lines.push(line),
    agents: {
      ext_writer: async (task) => {
        beats.push(await task.heartbeat());
        task.progress({ step: "drafted" });
        // The progress request has had its answer (or its failure) before the report.
        while (!lines.some((l) => l.includes("not delivered")) && progressSent() === 0) {
          await new Promise((resolve) => setImmediate(resolve));
        }
        return { text: "written" };
      },
    },
  });
  let progressSent = () => 0;
  return { w, lines, beats, watchProgress: (f: () => number) => (progressSent = f) };
}

describe("a connection reset before any answer", () => {
  it("makes the worker send a heartbeat, progress and its report again, once each", async () => {
    const t = await apiBehindResets({ heartbeat: 1, progress: 1, complete: 1 });
    const progress: unknown[] = [];
    t.engine.subscribe((e) => {
      if (e.type === "node.progress") progress.push(e.data.progress);
    });
    const { w, lines, beats, watchProgress } = worker(t.proxy.url);
    // Delivered progress: the second copy reached the API.
    watchProgress(() => progress.length);
    const run = await t.engine.startRun("external");
    const working = w.run();
    const finished = await t.engine.waitForRun(run.run_id);
    w.stop();
    await working;
    expect(finished.status).toBe("SUCCEEDED");
    expect(beats).toEqual([true]);
    expect(progress).toEqual([{ step: "drafted" }]);
    expect(w.counts).toEqual({ completed: 1, failed: 0, lost: 0 });
    expect(lines).toEqual([]);
    // Each reset request went twice: once into the reset, once to the API.
    expect([t.proxy.sent("heartbeat"), t.proxy.sent("progress"), t.proxy.sent("complete")]).toEqual([2, 2, 2]);
  });

  it("sends progress again only once, and a claim never: the claim loop tries again after its backoff", async () => {
    const t = await apiBehindResets({ claim: 1, progress: 2 });
    const { w, lines, watchProgress } = worker(t.proxy.url);
    watchProgress(() => 0);
    const run = await t.engine.startRun("external");
    const working = w.run();
    const finished = await t.engine.waitForRun(run.run_id);
    w.stop();
    await working;
    expect(finished.status).toBe("SUCCEEDED");
    expect(lines.filter((l) => l.startsWith("claim failed"))).toHaveLength(1);
    expect(lines.filter((l) => l.includes("not delivered"))).toHaveLength(1);
    expect(t.proxy.sent("progress")).toBe(2);
    expect(w.counts).toEqual({ completed: 1, failed: 0, lost: 0 });
  });

  it("is recognised in fetch's failure, and the tests' fetch sends a GET again once", async () => {
    let resets = 1;
    const server = await startServer((_req, res, raw) => {
      if (resets-- > 0) raw.socket.resetAndDestroy();
      else json(res, 200, { ok: true });
    });
    servers.push(server);
    const failure = await fetch(server.url).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isConnectionReset(failure)).toBe(true);
    resets = 1;
    expect(await (await fetchApi(server.url)).json()).toEqual({ ok: true });
    // A POST not marked resendable is not sent twice.
    resets = 1;
    await expect(fetchApi(server.url, { method: "POST", body: "{}" })).rejects.toSatisfy(isConnectionReset);
    resets = 1;
    expect(await (await fetchApi(server.url, { method: "POST", body: "{}", resend: true })).json()).toEqual({
      ok: true,
    });
    // A second reset is the server's answer, not the race: reported.
    resets = 2;
    await expect(fetchApi(server.url)).rejects.toSatisfy(isConnectionReset);
  });
});
