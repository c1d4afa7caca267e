/**
 * Lost connections (DESIGN §7–8): the server terminates every connection of two engines
 * (`pg_terminate_backend`) twice while they serve runs. The engines reconnect, retry the
 * transactions that failed and listen again; every run finishes, every node succeeds once, and
 * no agent's result is lost (none runs again because its result was dropped).
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createEngine, type Engine, type Task } from "../../src/index.js";
import { within } from "../fixtures/child.js";
import { PG_URL } from "../helpers.js";

const RUNS = 40;
const CHAIN = {
  id: "chain",
  defaults: { retry_count: 0, timeout: 60 },
  nodes: Array.from({ length: 6 }, (_, i) => ({
    node_id: `s${i}`,
    agent_type: i % 2 === 0 ? "even" : "odd",
    ...(i > 0 ? { depends_on: [`s${i - 1}`] } : {}),
  })),
};

const engines: Engine[] = [];
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close({ timeoutMs: 100 })));
});

describe("PostgreSQL connections terminated mid-run", () => {
  it("resumes on new connections and loses nothing", async () => {
    const schema = `skein_term_${randomBytes(4).toString("hex")}`;
    // application_name marks this test's connections, so only they are terminated.
    const url = `${PG_URL}?schema=${schema}&application_name=${schema}`;
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    const calls = new Map<string, number>();
    let succeeded = 0;
    const waiters: { n: number; resolve: () => void }[] = [];
    const agent = async (t: Task) => {
      calls.set(`${t.execution_id}#${t.attempt}`, (calls.get(`${t.execution_id}#${t.attempt}`) ?? 0) + 1);
      await new Promise((resolve) => setTimeout(resolve, 5));
      return { node: t.node_id };
    };
    try {
      // Two engines, each with one of the agent types: every step crosses engines (NOTIFY).
      for (const type of ["even", "odd"]) {
        const engine = await createEngine({ database: url, agents: { [type]: agent }, maxConcurrency: 8 });
        engines.push(engine);
        engine.subscribe((e) => {
          if (e.type !== "node.succeeded") return;
          succeeded += 1;
          for (const w of waiters.filter((x) => succeeded >= x.n)) w.resolve();
        });
      }
      const progress = (n: number) =>
        new Promise<void>((resolve) => {
          if (succeeded >= n) resolve();
          else waiters.push({ n, resolve });
        });
      const [first] = engines as [Engine];
      await first.registerWorkflow(CHAIN);
      const runs = await Promise.all(Array.from({ length: RUNS }, () => first.startRun(CHAIN.id)));

      const terminate = async () => {
        const { rows } = await admin.query(
          "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1",
          [schema],
        );
        return rows.length;
      };
      const total = RUNS * CHAIN.nodes.length;
      await within(20_000, "a third of the nodes", progress(Math.floor(total / 3)));
      expect(await terminate()).toBeGreaterThan(1);
      await within(20_000, "two thirds of the nodes", progress(Math.floor((2 * total) / 3)));
      expect(await terminate()).toBeGreaterThan(1);

      const done = await within(60_000, "every run's end", Promise.all(runs.map((r) => first.waitForRun(r.run_id))));
      for (const run of done) {
        expect(run.status, JSON.stringify(run.error)).toBe("SUCCEEDED");
        expect(run.nodes.map((n) => [n.state, n.visit])).toEqual(CHAIN.nodes.map(() => ["SUCCEEDED", 1]));
      }
      // No result was dropped: each visit succeeded at its first attempt, called once.
      for (const run of done) for (const n of run.nodes) expect(n.attempt, n.execution_id).toBe(1);
      expect([...calls.values()].every((c) => c === 1)).toBe(true);
      expect(calls.size).toBe(total);
    } finally {
      await Promise.all(engines.splice(0).map((e) => e.close({ timeoutMs: 100 })));
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
  }, 120_000);
});
