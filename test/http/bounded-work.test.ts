/**
 * Bounded dynamic work (DESIGN §13.1, issue 32 defect 3): while a tree grows and while it is
 * cancelled, the API answers. The probe the issue asks for, with its timing assertions (the one
 * exception to "no timing assertions"): a real server on a port, a scoped token, `/v1/health`
 * polled throughout (each answer within 100 ms of the process running: expectAnswered), the
 * root's cancel answered within 1 s; then the tree stops growing, within maxRunsPerTree, and every
 * run of it has ended. On both stores.
 * Health is polled from before the start request: the map's list comes from a template (a
 * range), so the start and the resolution of 100,000 items are inside the probe. The file runs
 * in the `processes` project, alone after the others, as timing probes must (vitest.config.ts).
 */
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import Database from "better-sqlite3";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import type { TokenEntry } from "../../src/http/auth.js";
import { createServer } from "../../src/http/server.js";
import type { Engine, Task } from "../../src/index.js";
import { fetchApi, tempDb, testEngine } from "../helpers.js";

const TEAM_A = "team-a-0123456789abcdef";
const TOKENS: TokenEntry[] = [{ token: TEAM_A, role: "admin", name: "team-a", workflows: ["team-a-*"] }];
const auth = { authorization: `Bearer ${TEAM_A}`, "content-type": "application/json" };

/** Attempts of `hang` started so far in this test, and who waits for how many. */
let hangs = 0;
const hangWaiters: { n: number; resolve: () => void }[] = [];

/** Each item's attempt holds until it is cancelled: the tree only grows while the probe runs. */
const hang = (task: Task) => {
  hangs += 1;
  for (const w of hangWaiters.filter((w) => hangs >= w.n)) {
    hangWaiters.splice(hangWaiters.indexOf(w), 1);
    w.resolve();
  }
  return new Promise((_, reject) => task.signal.addEventListener("abort", () => reject(new Error("cancelled"))));
};

/** Resolves once `n` attempts of `hang` have started (an agent's map items are rows, not runs). */
function hung(n: number): Promise<void> {
  return new Promise((resolve) => {
    if (hangs >= n) resolve();
    else hangWaiters.push({ n, resolve });
  });
}

const closing: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
  hangs = 0;
  hangWaiters.length = 0;
});

type Store = "sqlite" | "postgres";

/** One number a query answers, read beside the engine (a read-only SQLite connection, or a pg client). */
type Count = (sql: string, param?: string) => Promise<number>;

async function counter(database: string): Promise<Count> {
  if (database.startsWith("sqlite:")) {
    const db = new Database(database.slice("sqlite:".length), { readonly: true });
    closing.push(async () => db.close());
    return async (sql, param) =>
      Number(
        db
          .prepare(sql.replace(/\$1/g, "?"))
          .pluck()
          .get(...(param ? [param] : [])),
      );
  }
  const url = new URL(database);
  const schema = url.searchParams.get("schema") as string;
  url.search = "";
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  closing.push(() => client.end());
  await client.query(`SET search_path TO ${pg.escapeIdentifier(schema)}`);
  return async (sql, param) => Number(Object.values((await client.query(sql, param ? [param] : [])).rows[0])[0]);
}

async function serve(store: Store, maxRunsPerTree: number) {
  // As many attempts in flight as a map's window below: the engine's own cap must not be what bounds it.
  const { engine, database } = await testEngine({
    agents: { hang },
    maxRunsPerTree,
    maxConcurrency: 10_000,
    database: tempDb(store),
  });
  const app = await createServer({ engine, tokens: TOKENS });
  await app.listen({ host: "127.0.0.1", port: 0 });
  closing.push(() => app.close());
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  // One answer before the probe: the first request of a process loads and compiles the fetch
  // client and the server's route (90 to 110 ms of CPU here), which is not the engine's time.
  // The probe's first answer took that, and failed CI once.
  expect((await fetchApi(`${base}/v1/health`)).status).toBe(200);
  return { engine, base, count: await counter(database) };
}

/**
 * One health answer: its time, and the CPU time this process (the engine, the server, this
 * client) had meanwhile, ms. The engine delays an answer only by running: time the process spent
 * waiting for a core (other processes on a shared, loaded machine) is the neighbours'.
 */
interface Answer {
  ms: number;
  cpuMs: number;
}

/**
 * Between two health requests, ms. Without a pause the poller and the server's answers (540 a
 * second) took most of the one core `taskset -c 0` gives, and the work the probe watches slowed
 * with it: PostgreSQL's self-recursive map took 37 s, then over the test's 60 s.
 */
const POLL_GAP_MS = 5;

/**
 * Polls /v1/health every POLL_GAP_MS until stopped; every answer's time, counted from when its
 * request was due: a loop the engine blocks fires the pause's timer late, and the lateness counts.
 */
function pollHealth(base: string): { stop(): Promise<Answer[]> } {
  const times: Answer[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const cpu = process.cpuUsage();
      const t = performance.now() + POLL_GAP_MS;
      await new Promise((resolve) => setTimeout(resolve, POLL_GAP_MS));
      const res = await fetchApi(`${base}/v1/health`);
      await res.arrayBuffer();
      const used = process.cpuUsage(cpu);
      times.push({ ms: performance.now() - t, cpuMs: (used.user + used.system) / 1000 });
      expect(res.status).toBe(200);
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return times;
    },
  };
}

/** Resolves once `n` runs have started in the engine (its own events: no polling). */
function started(engine: Engine, n: number): Promise<void> {
  let count = 0;
  return new Promise((resolve) => {
    const off = engine.subscribe((e) => {
      if (e.type === "run.started" && ++count >= n) {
        off();
        resolve();
      }
    });
  });
}

/**
 * Starts a run through the API with the scoped token, cancels its root once the work grew
 * (`grown` runs started, or `grown` item attempts of an agent's map), and checks the probe.
 */
async function probe(store: Store, workflow: object, limit: number, grown: { runs: number } | { attempts: number }) {
  const { engine, base, count } = await serve(store, limit);
  await engine.registerWorkflow(workflow as Parameters<Engine["registerWorkflow"]>[0]);
  const growing = "runs" in grown ? started(engine, grown.runs) : hung(grown.attempts);
  const health = pollHealth(base);
  // Stopped before the server closes (closing runs last first), also when the test fails.
  closing.push(() => health.stop());
  const res = await fetchApi(`${base}/v1/runs`, {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ workflow_id: (workflow as { id: string }).id, input: {} }),
  });
  expect(res.status).toBe(201);
  const { run_id } = (await res.json()) as { run_id: string };
  await growing;
  const t = performance.now();
  const cancel = await fetchApi(`${base}/v1/runs/${run_id}/cancel`, { method: "POST", headers: auth, body: "{}" });
  const cancelMs = performance.now() - t;
  expect(cancel.status).toBe(200);
  const done = await engine.waitForRun(run_id);
  // The cascade goes on in chunks after the answer: wait until every run of the tree has ended.
  const active = () => count("SELECT count(*) FROM runs WHERE ended_at IS NULL");
  for (;;) {
    let off = () => {};
    const ended = new Promise<void>((resolve) => {
      off = engine.subscribe((e) => {
        if (e.type === "run.cancelled" || e.type === "run.failed" || e.type === "run.succeeded") resolve();
      });
    });
    const left = await active();
    if (left > 0) await ended;
    off();
    if (left === 0) break;
  }
  const times = await health.stop();
  // A root that never started a run has no row: a tree of one.
  const tree = await count("SELECT coalesce((SELECT runs FROM run_trees WHERE root_run_id = $1), 1)", run_id);
  const total = await count("SELECT count(*) FROM runs");
  return { done, cancelMs, times, tree, total };
}

/**
 * The probe's timing: the cancel answered within 1 s, every health answer within 100 ms of this
 * process's running. An answer later than that while the process ran less than 100 ms waited for
 * a core, not for the engine: under `taskset -c 0` beside other work, 12 of 19,854 answers took
 * 104 to 557 ms that way. One that took 100 ms of the process's CPU is the engine's, however loaded.
 */
function expectAnswered(cancelMs: number, times: Answer[]): void {
  expect(cancelMs, "the root's cancel, ms").toBeLessThan(1000);
  expect(times.length).toBeGreaterThan(10);
  const slow = times
    .filter((t) => t.ms >= 100 && t.cpuMs >= 100)
    .map((t) => `${Math.round(t.ms)} ms (${Math.round(t.cpuMs)} ms CPU)`);
  expect(slow, `health answers of ${times.length} over 100 ms, the process running 100 ms of it`).toEqual([]);
}

describe.each(["sqlite", "postgres"] as const)(
  "the API answers while dynamic work grows and is cancelled (DESIGN §13.1), on %s",
  (store) => {
    it("a self-recursive map: health within 100 ms, the cancel within 1 s, the tree within maxRunsPerTree", async () => {
      const rec = {
        id: "team-a-rec",
        timeout: 3600,
        // Each run holds (so the tree stays in progress until the cancel) and maps over itself; the
        // runs at the depth limit fail, tolerated, so the tree grows wide until maxRunsPerTree.
        nodes: [
          { node_id: "hold", agent_type: "hang" },
          {
            node_id: "fan",
            agent_type: "map",
            payload: {
              items: "{{ [0,1,2,3,4,5,6,7,8,9] }}",
              each: { workflow_id: "team-a-rec" },
              max_concurrency: 10,
              tolerated_failure_percent: 100,
            },
          },
        ],
      };
      const { done, cancelMs, times, tree, total } = await probe(store, rec, 2000, { runs: 1500 });
      expect(done.status).toBe("CANCELLED");
      // Every run of the tree was counted, and the tree stopped at the limit.
      expect(total).toBe(tree);
      expect(tree).toBeLessThanOrEqual(2000);
      expectAnswered(cancelMs, times);
    }, 60_000);

    it("a 100,000-item map with max_concurrency 10,000: health within 100 ms, the cancel within 1 s", async () => {
      const wide = {
        id: "team-a-wide",
        timeout: 3600,
        nodes: [
          {
            node_id: "fan",
            agent_type: "map",
            payload: {
              items: "{{ [0..99999] }}",
              each: { agent_type: "hang", payload: { v: "{{ item }}" } },
              max_items: 100_000,
              max_concurrency: 10_000,
            },
          },
        ],
      };
      const { done, cancelMs, times, tree, total } = await probe(store, wide, 100_000, { attempts: 2000 });
      expect(done.status).toBe("CANCELLED");
      expect(total).toBe(tree);
      expect(tree).toBe(1); // an agent's items are rows holding their attempts, not runs
      expectAnswered(cancelMs, times);
    }, 60_000);
  },
);
