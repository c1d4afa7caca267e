/**
 * A commit whose acknowledgement is lost (PostgreSQL): the connection drops after the server
 * committed, so the engine cannot know. It applies the inputs again (a started run is found,
 * not inserted twice), and attempts that transaction claimed, RUNNING under this engine but
 * never started, are recovered at once instead of waiting for their deadline, even when another
 * transaction holds their run as the engine tries again.
 */
import net from "node:net";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createClient } from "../../src/index.js";
import { onPostgres, PG_URL, testEngine } from "../helpers.js";

/**
 * A TCP proxy to the PostgreSQL server that, once armed, passes the next COMMIT of a transaction
 * that claims a visit (it writes a RUNNING state) to the server and, once the server answered
 * it, cuts the client's connection instead of passing back what the server said since. Another
 * of the engine's transactions committing meanwhile (a flush with nothing to claim) is let through.
 */
class CommitCutter {
  readonly server: net.Server;
  armed = false;
  cut = 0;
  /** Done after the server answered the cut COMMIT and before the client's connection is cut. */
  beforeCut: () => Promise<void> = async () => {};

  constructor(target: URL) {
    this.server = net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 5432), target.hostname);
      let cutting = false;
      let cuts = 0;
      let held = Buffer.alloc(0);
      // What the client sent since its last BEGIN: the transaction the next COMMIT ends.
      let tx = Buffer.alloc(0);
      client.on("data", (chunk) => {
        const begin = chunk.lastIndexOf("BEGIN");
        tx = begin >= 0 ? chunk.subarray(begin) : Buffer.concat([tx, chunk]);
        // The simple-protocol query "COMMIT" (not "READ COMMITTED" in a BEGIN).
        if (this.armed && chunk.includes("COMMIT\0") && tx.includes("RUNNING")) {
          this.armed = false;
          cutting = true;
          cuts = this.cut;
        }
        upstream.write(chunk);
      });
      upstream.on("data", (chunk) => {
        if (cutting) {
          // Nothing after the COMMIT reaches the client. Once the server's answer to it came
          // (its CommandComplete tag), it committed: the client's connection is cut.
          held = Buffer.concat([held, chunk]);
          if (held.includes("COMMIT\0") && this.cut === cuts) {
            this.cut += 1;
            void this.beforeCut().finally(() => {
              client.destroy();
              upstream.destroy();
            });
          }
          return;
        }
        client.write(chunk);
      });
      const close = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on("error", close);
      upstream.on("error", close);
      client.on("close", close);
      upstream.on("close", close);
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return (this.server.address() as net.AddressInfo).port;
  }
}

const proxies: CommitCutter[] = [];
afterEach(async () => {
  for (const p of proxies.splice(0)) p.server.close();
});

describe.skipIf(!onPostgres)("a commit whose outcome was lost (PostgreSQL)", () => {
  it("starts the run once and runs its claimed attempt now, not at its deadline", async () => {
    const target = new URL(PG_URL);
    const cutter = new CommitCutter(target);
    proxies.push(cutter);
    const port = await cutter.listen();
    const schema = `skein_t_lost_${process.pid}_${Date.now()}`;
    const url = `postgres://${target.username}@127.0.0.1:${port}${target.pathname}?schema=${schema}`;
    const calls: number[] = [];
    const { engine } = await testEngine({
      database: url,
      agents: {
        work: (t) => {
          calls.push(t.attempt);
          return { done: t.attempt };
        },
      },
    });
    await engine.registerWorkflow({ id: "one", nodes: [{ node_id: "a", agent_type: "work", timeout: 3600 }] });
    try {
      // A first run, so that the engine's start-up flushes are over before the cut is armed.
      await engine.waitForRun((await engine.startRun("one")).run_id);
      calls.length = 0;
      cutter.armed = true; // the start's transaction inserts the run and claims `a`: its COMMIT is cut
      const run = await engine.startRun("one");
      expect(cutter.cut).toBe(1);
      const done = await engine.waitForRun(run.run_id);
      expect(done.status).toBe("SUCCEEDED");
      expect(calls).toEqual([2]); // attempt 1 was claimed by the lost transaction and never started
      expect(done.nodes[0]).toMatchObject({ state: "SUCCEEDED", interruptions: 1 });
      expect(await engine.listRuns({ workflow_id: "one" })).toHaveLength(2);
    } finally {
      await engine.close();
      await dropSchema(schema);
    }
  });

  it("starts a trigger's run once when the publish's commit is lost", async () => {
    const target = new URL(PG_URL);
    const cutter = new CommitCutter(target);
    proxies.push(cutter);
    const port = await cutter.listen();
    const schema = `skein_t_lost_trigger_${process.pid}_${Date.now()}`;
    const url = `postgres://${target.username}@127.0.0.1:${port}${target.pathname}?schema=${schema}`;
    const { engine } = await testEngine({ database: url, agents: { work: (t) => ({ done: t.attempt }) } });
    await engine.registerWorkflow({
      id: "one",
      triggers: [{ event: "paid" }],
      nodes: [{ node_id: "a", agent_type: "work", timeout: 3600 }],
    });
    try {
      await engine.waitForRun((await engine.startRun("one")).run_id);
      cutter.armed = true; // the publish's transaction inserts the trigger's run and claims `a`: its COMMIT is cut
      const answer = await engine.publishEvent("paid", "o-1", { n: 1 });
      expect(cutter.cut).toBe(1);
      // Applied again, the event is found (it committed) and so is the run its trigger started.
      expect(answer.started).toHaveLength(1);
      const run = await engine.waitForRun(answer.started[0]?.run_id as string);
      expect(run).toMatchObject({ status: "SUCCEEDED", triggered_by: { event: "paid", key: "o-1" } });
      expect(await engine.listRuns({ workflow_id: "one" })).toHaveLength(2);
    } finally {
      await engine.close();
      await dropSchema(schema);
    }
  });

  it("gives back an attempt it claimed for a run another transaction holds as it tries again", async () => {
    const target = new URL(PG_URL);
    const cutter = new CommitCutter(target);
    proxies.push(cutter);
    const port = await cutter.listen();
    const schema = `skein_t_lost_held_${process.pid}_${Date.now()}`;
    const url = `postgres://${target.username}@127.0.0.1:${port}${target.pathname}?schema=${schema}`;
    const calls: number[] = [];
    const { engine, clock } = await testEngine({
      database: url,
      agents: {
        work: (t) => {
          calls.push(t.attempt);
          return { done: t.attempt };
        },
      },
    });
    // The client starts runs on a connection of its own: the engine claims their first visits
    // in flushes whose inputs are other runs' (or none), as it hears of them.
    const client = await createClient({ database: `${PG_URL}?schema=${schema}`, clock });
    const holder = new pg.Client({ connectionString: PG_URL });
    await holder.connect();
    try {
      await engine.registerWorkflow({ id: "one", nodes: [{ node_id: "a", agent_type: "work", timeout: 3600 }] });
      await engine.waitForRun((await client.startRun("one")).run_id);
      calls.length = 0;
      // Once the claiming transaction committed, and before the engine hears that it is cut off,
      // another transaction takes the run's lock: the engine tries again while it is held.
      cutter.beforeCut = async () => {
        await holder.query("BEGIN");
        await holder.query(`SELECT run_id FROM "${schema}".runs FOR UPDATE`);
      };
      cutter.armed = true;
      const run = await client.startRun("one");
      // The engine waits for the run: the attempt it may have claimed is given back, not left
      // RUNNING under it until its deadline (an hour). Whether its retry met the lock is timing
      // (CI once saw it not wait within 10 s); the outcome below is the contract either way.
      await waitUntil(
        async () => {
          // Waiting for this session's lock: other tests' sessions on the server may wait on theirs.
          const { rows } = await holder.query(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))",
          );
          return rows[0].n > 0;
        },
        async () => {
          const { rows } = await holder.query(`SELECT run_id FROM "${schema}".runs`);
          const acts = await holder.query(
            "SELECT pid, state, wait_event_type, left(query, 120) AS q FROM pg_stat_activity WHERE datname = current_database()",
          );
          return JSON.stringify({
            cut: cutter.cut,
            runs: rows,
            calls,
            run: await engine.getRun(run.run_id).catch((e) => String(e)),
            acts: acts.rows.filter((r) => r.q.includes(schema) || r.state !== "idle"),
          });
        },
      );
      await holder.query("ROLLBACK");
      const done = await engine.waitForRun(run.run_id);
      expect(cutter.cut).toBe(1);
      expect(done.status).toBe("SUCCEEDED");
      expect(calls).toEqual([2]);
      expect(done.nodes[0]).toMatchObject({ state: "SUCCEEDED", interruptions: 1 });
    } finally {
      await holder.end();
      await client.close();
      await engine.close();
      await dropSchema(schema);
    }
  });
});

/**
 * Polls `check` every 20 ms, at most 10 s; then says (with `debug`) that it never held, and
 * returns: what the test asserts next is the contract, this only lines the timing up.
 */
async function waitUntil(check: () => Promise<boolean>, debug: () => Promise<string>): Promise<void> {
  const until = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > until) {
      console.warn(`lost-commit: the engine did not wait for the held run within 10 s: ${await debug()}`);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function dropSchema(schema: string): Promise<void> {
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
}
