/**
 * A commit whose acknowledgement is lost (PostgreSQL): the connection drops after the server
 * committed, so the engine cannot know. It applies the inputs again (a started run is found,
 * not inserted twice), and attempts that transaction claimed, RUNNING under this engine but
 * never started, are recovered at once instead of waiting for their deadline.
 */
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { onPostgres, PG_URL, testEngine } from "../helpers.js";

/**
 * A TCP proxy to the PostgreSQL server that, once armed, passes the next COMMIT to the server
 * and then cuts the client's connection instead of passing back the answer.
 */
class CommitCutter {
  readonly server: net.Server;
  armed = false;
  cut = 0;

  constructor(target: URL) {
    this.server = net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 5432), target.hostname);
      let cutting = false;
      client.on("data", (chunk) => {
        // The simple-protocol query "COMMIT" (not "READ COMMITTED" in a BEGIN).
        if (this.armed && chunk.includes("COMMIT\0")) {
          this.armed = false;
          cutting = true;
        }
        upstream.write(chunk);
      });
      upstream.on("data", (chunk) => {
        if (cutting) {
          // The server answered the COMMIT: it committed. The client never hears it.
          this.cut += 1;
          client.destroy();
          upstream.destroy();
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
      const admin = new (await import("pg")).default.Client({ connectionString: PG_URL });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
  });
});
