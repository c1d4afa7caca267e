/**
 * The http section: external workers over a real port. The server (an engine with no in-process
 * agents and the HTTP API on a fresh SQLite file, synchronous=normal) runs in a child process
 * (http-server-child.ts); the workers run in this process, so client and server each have a
 * core of this 2-core machine.
 *
 * - `claim_complete_per_s`: 8 concurrent workers, each a loop of `POST /v1/tasks/claim`
 *   (max_tasks 1, no wait) then `POST .../complete`, over runs of one external node started
 *   beforehand; completed round trips per second over a 5 s window after a 1 s warm-up.
 * - `dag8_external_runs_per_s`: the 8-node DAG8 with every agent (collectors, reviewer,
 *   publishers; the aggregator is built in) served by `HttpWorker`s (src/worker, what `skein
 *   worker` runs: long-poll claims, heartbeats, reports), 4 workers of 16 slots, 64 runs kept
 *   in flight by the server; runs ended per second over a 5 s window after a 2 s warm-up.
 */
import { HttpWorker, postJson } from "../src/worker/http-worker.js";
import { BenchChild, type Message } from "./children.js";
import { type Measured, progress, tempDb } from "./lib.js";
import { noop } from "./workloads.js";

const WORKERS = 8;
const RUNS = 20_000;

async function withServer<T>(name: string, fn: (server: BenchChild, url: string) => Promise<T>): Promise<T> {
  const db = tempDb(name);
  const server = new BenchChild("http server", "bench/http-server-child.ts", [db.url]);
  try {
    const { port } = await server.take<Message & { port: number }>("ready", 60_000);
    return await fn(server, `http://127.0.0.1:${port}`);
  } finally {
    await server.stop();
    db.cleanup();
  }
}

async function post(url: string, body: object): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await postJson(new URL(url), body);
  return { status: res.status, json: res.body as Record<string, unknown> };
}

export async function benchClaimComplete(): Promise<Measured> {
  return withServer("http-claim", async (server, url) => {
    server.send({ cmd: "start", runs: RUNS });
    await server.take("started", 120_000);
    progress(`http: ${RUNS} runs waiting for external workers`);
    let completed = 0;
    let conflicts = 0;
    let stop = false;
    const worker = async (i: number) => {
      while (!stop) {
        const claimed = await post(`${url}/v1/tasks/claim`, { agent_types: ["ext_work"], worker_id: `w${i}` });
        const [task] = (claimed.json.tasks ?? []) as { execution_id: string; attempt: number }[];
        if (!task) throw new Error(`http: claim found no task (${claimed.status}): the bench ran out of runs`);
        const done = await post(`${url}/v1/tasks/${encodeURIComponent(task.execution_id)}/complete`, {
          attempt: task.attempt,
          worker_id: `w${i}`,
          output: { ok: true },
        });
        if (done.status === 200) completed += 1;
        else conflicts += 1;
      }
    };
    const loops = Array.from({ length: WORKERS }, (_, i) => worker(i));
    await new Promise((r) => setTimeout(r, 1000));
    const c0 = completed;
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, 5000));
    const c1 = completed;
    const seconds = (performance.now() - t0) / 1000;
    stop = true;
    await Promise.all(loops);
    const rate = (c1 - c0) / seconds;
    progress(`http: ${c1 - c0} claim → complete round trips in ${seconds.toFixed(2)} s`);
    return {
      metrics: { claim_complete_per_s: rate },
      meta: { http_claim_complete: { workers: WORKERS, window_s: seconds, completed: c1 - c0 } },
      ...(conflicts > 0 ? { failures: [`http: ${conflicts} completes were refused`] } : {}),
    };
  });
}

export async function benchDag8External(): Promise<Measured> {
  return withServer("http-dag8", async (server, url) => {
    const agents = { collector: noop, reviewer: noop, publisher: noop };
    const workers = Array.from(
      { length: 4 },
      (_, i) => new HttpWorker({ server: url, agents, concurrency: 16, workerId: `bench-${i}`, leaseSeconds: 60 }),
    );
    const running = workers.map((w) => w.run());
    const count = async () => {
      server.send({ cmd: "count" });
      return server.take<Message & { ended: number; failed: number }>("count", 10_000);
    };
    server.send({ cmd: "loop", in_flight: 64 });
    await new Promise((r) => setTimeout(r, 2000));
    const c0 = await count();
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, 5000));
    const c1 = await count();
    const seconds = (performance.now() - t0) / 1000;
    for (const w of workers) w.stop();
    await Promise.all(running);
    const runs = c1.ended - c0.ended;
    progress(`http: ${runs} DAG8 runs with external workers in ${seconds.toFixed(2)} s`);
    return {
      metrics: { dag8_external_runs_per_s: runs / seconds },
      meta: { http_dag8_external: { workers: 4, slots_per_worker: 16, in_flight: 64, window_s: seconds, runs } },
      ...(c1.failed > 0 ? { failures: [`http: ${c1.failed} DAG8 runs did not succeed`] } : {}),
    };
  });
}
