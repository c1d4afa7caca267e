/**
 * PostgreSQL behind PgBouncer in transaction mode (DESIGN §8 "Behind a pooler"): engines and a
 * client whose database is the pooler (test/fixtures/pgbouncer.ts, a PgBouncer of the test's
 * own with fewer server connections than its clients) and whose listenDatabase is a direct
 * connection, for LISTEN and the engines' liveness locks. One engine is the built CLI
 * (`skein engine --listen-database`, or SKEIN_LISTEN_DATABASE), the other in this process.
 * Every wait is bounded and synchronised by what the processes print or commit.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createClient, createEngine, type Engine, type WorkflowInput } from "../../src/index.js";
import { AGENTS, ROOT, requireBuiltCli, Skein } from "../cli/helpers.js";
import { within } from "../fixtures/child.js";
import { type PgBouncer, startPgBouncer } from "../fixtures/pgbouncer.js";
import { PG_URL } from "../helpers.js";

requireBuiltCli();

/** The direct connection every engine and client is given as listenDatabase. */
const DIRECT = PG_URL;

let bouncer: PgBouncer;
beforeAll(async () => {
  bouncer = await startPgBouncer(PG_URL);
});
afterAll(() => bouncer?.stop());

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A fresh schema (dropped after the test) and its URL through the pooler. */
async function freshSchema(): Promise<{ pooled: string; schema: string }> {
  const schema = `skein_pool_${randomBytes(4).toString("hex")}`;
  cleanup.push(async () => {
    const db = new pg.Client({ connectionString: PG_URL });
    await db.connect();
    await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await db.end();
  });
  return { pooled: `${bouncer.through(PG_URL)}?schema=${schema}`, schema };
}

async function open(options: Parameters<typeof createEngine>[0]): Promise<Engine> {
  const engine = await createEngine({ ...options, listenDatabase: DIRECT });
  cleanup.push(() => engine.close({ timeoutMs: 100 }));
  return engine;
}

async function client(database: string): Promise<Engine> {
  const opened = await createClient({ database, listenDatabase: DIRECT });
  cleanup.push(() => opened.close());
  return opened;
}

/** `skein engine` on the pooler with the CLI's test agents; stopped (SIGTERM) after the test unless killed. */
async function cliEngine(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Skein> {
  const engine = new Skein(["engine", "--agents", AGENTS, ...args], ROOT, env);
  cleanup.push(async () => {
    engine.proc.kill("SIGTERM");
    await engine.result();
  });
  await engine.waitFor(/"msg":"engine started/);
  return engine;
}

describe("PostgreSQL behind PgBouncer (transaction mode)", () => {
  it("refuses the pooler without listenDatabase, saying to set it; opens it with", async () => {
    const { pooled } = await freshSchema();
    await expect(createClient({ database: pooled })).rejects.toThrow(
      /refused a startup parameter \(unsupported startup parameter: options\).*listenDatabase \(CLI --listen-database, env SKEIN_LISTEN_DATABASE\)/,
    );
    const refused = await new Skein(["list", "--db", pooled], ROOT).result();
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/unsupported startup parameter: options.*--listen-database/);

    const listed = await new Skein(["list", "--db", pooled, "--listen-database", DIRECT, "--json"], ROOT).result();
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([]);
  });

  it("refuses a listenDatabase that is not a direct connection to the pooler's database, and one beside SQLite", async () => {
    const { pooled } = await freshSchema();
    // Another database of the same server: the engine's lock there is not seen through the pooler.
    const otherDatabase = new URL(DIRECT);
    otherDatabase.pathname = "/postgres";
    await expect(createEngine({ database: pooled, listenDatabase: otherDatabase.toString() })).rejects.toThrow(
      /the listen database .*\/postgres does not reach the database of .*: .*give listenDatabase a direct connection/,
    );
    // The pooler itself: it refuses the listen connection's session settings.
    await expect(createEngine({ database: pooled, listenDatabase: bouncer.through(DIRECT) })).rejects.toThrow(
      /refused a startup parameter \(unsupported startup parameter: options\)/,
    );
    await expect(createEngine({ database: pooled, listenDatabase: `${DIRECT}?schema=elsewhere` })).rejects.toThrow(
      /listenDatabase names schema "elsewhere" but the database names "skein_pool_.*"; .*drop \?schema= from listenDatabase/,
    );
    await expect(createClient({ database: "sqlite::memory:", listenDatabase: DIRECT })).rejects.toThrow(
      /listenDatabase is for PostgreSQL behind a connection pooler, but the database is "sqlite::memory:"/,
    );
  });

  it("runs workflows across two engines and a client, each node woken by LISTEN on the direct connection", async () => {
    const { pooled } = await freshSchema();
    // a and c run on the CLI engine (echo); b only on the engine here, whose periodic sweep
    // never comes within the test: it learns that b is ready from the notification a's commit
    // sends, which reaches it through the direct connection only.
    const relay: WorkflowInput = {
      id: "relay",
      defaults: { timeout: 30 },
      nodes: [
        { node_id: "a", agent_type: "echo" },
        { node_id: "b", agent_type: "relay", depends_on: ["a"] },
        { node_id: "c", agent_type: "echo", depends_on: ["b"] },
      ],
    };
    const starter = await client(pooled);
    await starter.registerWorkflow(relay);
    await cliEngine(["--db", pooled, "--listen-database", DIRECT]);
    const relayed: string[] = [];
    await open({
      database: pooled,
      sweepIntervalMs: 3_600_000,
      agents: {
        relay: (task) => {
          relayed.push(task.run_id);
          return { relayed: task.input };
        },
      },
    });

    // One run at a time: the engine here has nothing due between them (runs started while it
    // sweeps would make it sweep again as their visits fall due, and find b by itself).
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const id = (await starter.startRun("relay", { input: { i } })).run_id;
      ids.push(id);
      const done = await within(20_000, `run ${i}'s end`, starter.waitForRun(id));
      expect(done.status).toBe("SUCCEEDED");
      const run = await starter.getRun(id);
      expect(run?.nodes.map((n) => [n.node_id, n.state])).toEqual([
        ["a", "SUCCEEDED"],
        ["b", "SUCCEEDED"],
        ["c", "SUCCEEDED"],
      ]);
      expect(run?.nodes.find((n) => n.node_id === "b")?.output).toEqual({ relayed: { i } });
    }
    expect([...relayed].sort()).toEqual([...ids].sort());
  });

  it("re-runs a SIGKILLed engine's attempts on the other engine", async () => {
    const { pooled } = await freshSchema();
    const hold: WorkflowInput = {
      id: "hold",
      defaults: { retry_count: 0, timeout: 300 },
      nodes: [{ node_id: "n", agent_type: "slow", payload: { ms: 600_000 } }],
    };
    const starter = await client(pooled);
    await starter.registerWorkflow(hold);
    // This one takes its listen database from the environment.
    const doomed = await cliEngine(["--db", pooled], { SKEIN_LISTEN_DATABASE: DIRECT });
    const runs = 3;
    const ids: string[] = [];
    for (let i = 0; i < runs; i++) ids.push((await starter.startRun("hold", { input: { i } })).run_id);
    await doomed.waitFor(new RegExp(`(?:"event":"node.started"[\\s\\S]*){${runs}}`));

    // Opened once every attempt is held by the doomed engine: it gets them only by recovering them.
    const reruns = new Map<string, number>();
    await open({
      database: pooled,
      agents: {
        slow: (task) => {
          reruns.set(task.run_id, task.attempt);
          return { attempt: task.attempt };
        },
      },
    });
    doomed.proc.kill("SIGKILL");
    await doomed.exited;

    for (const [i, id] of ids.entries()) {
      const done = await within(20_000, `run ${i} recovered and ended`, starter.waitForRun(id));
      expect(done.status).toBe("SUCCEEDED");
      const events = await starter.listEvents(id);
      expect(events.filter((e) => e.type === "node.interrupted")).toHaveLength(1);
      expect(events.filter((e) => e.type === "node.started").map((e) => e.data.attempt)).toEqual([1, 2]);
    }
    expect(new Map([...reruns].sort())).toEqual(new Map(ids.map((id) => [id, 2] as const).sort()));
  });
});
