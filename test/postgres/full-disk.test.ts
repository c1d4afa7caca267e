/**
 * A full disk on PostgreSQL (issue 14 item 8), for real: the test's schema lives in a tablespace
 * on a small tmpfs, which the test fills with a filler file. The server then answers disk_full
 * (SQLSTATE 53100) whenever a table needs a new page: new work is refused with UnavailableError,
 * a result that arrives meanwhile is kept, and applied once the filler is deleted, without
 * waiting for its attempt to time out (the manual clock never moves).
 *
 * PostgreSQL only needs new space when a table or index grows by a page; a small row fits in a
 * page it has. So the run's input and the agent's result are large and incompressible (stored
 * out of line, in new TOAST pages): writing them needs space the full disk does not have.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Task, UnavailableError } from "../../src/index.js";
import { mountSmallDisk, type SmallDisk } from "../fixtures/full-disk.js";
import { nextEvent, PG_URL, testEngine } from "../helpers.js";

const TWO = {
  id: "two",
  nodes: [
    { node_id: "a", agent_type: "work" },
    { node_id: "b", agent_type: "work", depends_on: ["a"] },
  ],
};
const suffix = randomBytes(4).toString("hex");
const SCHEMA = `skein_full_${suffix}`;
const TABLESPACE = `skein_full_${suffix}`;

/** About 128 KB that PostgreSQL cannot compress: it takes new pages each time it is written. */
const big = () => randomBytes(96 * 1024).toString("base64");

let disk: SmallDisk | null = null;
let tablespace = false;
let refused = "";

async function admin<T>(use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  const mounted = mountSmallDisk("16m");
  if ("refused" in mounted) {
    refused = mounted.refused;
    return;
  }
  disk = mounted;
  // The server writes the tablespace's files as its own OS user.
  execFileSync("chown", ["postgres:postgres", disk.dir], { stdio: "pipe" });
  try {
    await admin((c) => c.query(`CREATE TABLESPACE ${TABLESPACE} LOCATION '${disk?.dir}'`));
    tablespace = true;
  } catch (e) {
    const why = `CREATE TABLESPACE refused (${(e as Error).message})`;
    if (process.env.CI) throw new Error(`the PostgreSQL full-disk test needs a tablespace on a tmpfs: ${why}`);
    refused = why;
  }
});

afterAll(async () => {
  disk?.free();
  if (tablespace)
    await admin(async (c) => {
      await c.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
      await c.query(`DROP TABLESPACE IF EXISTS ${TABLESPACE}`);
    });
  disk?.unmount();
});

/** An in-process agent that holds its attempt until `release()`, then returns a large result. */
function heldAgent() {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const calls: Task[] = [];
  const work = async (t: Task) => {
    calls.push(t);
    if (t.node_id === "a") await released;
    return { node: t.node_id, text: big() };
  };
  return { work, release, calls };
}

describe("a full disk under a PostgreSQL engine", () => {
  it("refuses new work with UnavailableError, keeps results that arrive, and applies them once space returns", async (ctx) => {
    if (!disk || !tablespace) return ctx.skip(`no tablespace on a tmpfs for a full disk: ${refused}`);
    const { work, release, calls } = heldAgent();
    // Every table and index of the schema is created in the tablespace (the store passes the
    // URL's `options` on to the server, next to its own search_path).
    const options = encodeURIComponent(`-c default_tablespace=${TABLESPACE}`);
    const database = `${PG_URL}?schema=${SCHEMA}&options=${options}`;
    const { engine } = await testEngine({ database, agents: { work } });
    const where = await admin((c) =>
      c.query<{ tablespace: string | null }>(
        "SELECT DISTINCT tablespace FROM pg_tables WHERE schemaname = $1 UNION SELECT DISTINCT tablespace FROM pg_indexes WHERE schemaname = $1",
        [SCHEMA],
      ),
    );
    expect(where.rows).toEqual([{ tablespace: TABLESPACE }]);

    await engine.registerWorkflow(TWO);
    const started = nextEvent(engine, (e) => e.type === "node.started");
    const run = await engine.startRun("two", { input: { text: big() } });
    await started;
    expect(engine.unavailable).toBeNull();

    disk.fill();
    ctx.onTestFinished(() => disk?.free());
    release(); // a's result arrives while no table can grow
    const refusal = await engine.startRun("two", { input: { text: big() } }).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(UnavailableError);
    expect((refusal as UnavailableError).message).toMatch(/disk is full.*retry later/);
    expect(engine.unavailable).toBeInstanceOf(UnavailableError);
    // Answered at once while the disk stays full: nothing of it is written.
    await expect(engine.startRun("two", { input: { text: big() } })).rejects.toBeInstanceOf(UnavailableError);
    expect((await engine.listRuns({})).map((r) => r.run_id)).toEqual([run.run_id]);

    disk.free();
    const done = await engine.waitForRun(run.run_id);
    expect(done.status).toBe("SUCCEEDED");
    // a's first attempt's result was kept and applied: no timeout, no second attempt.
    expect(done.nodes.map((n) => [n.node_id, n.attempt, n.failures])).toEqual([
      ["a", 1, 0],
      ["b", 1, 0],
    ]);
    expect(calls.map((t) => t.node_id)).toEqual(["a", "b"]);
    expect(engine.unavailable).toBeNull();
    const after = await engine.startRun("two", { input: { text: big() } });
    expect((await engine.waitForRun(after.run_id)).status).toBe("SUCCEEDED");
  });
});
