/**
 * Retention and pruning (DESIGN §8) on both stores: finished runs older than the cut go with
 * every row that belongs to them and with their child runs; runs in progress, young runs and
 * the children of runs that stay are kept. Ages come from a ManualClock; agents are held by
 * promises the test resolves, never by sleeping.
 */
import Database from "better-sqlite3";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { createClient, createEngine, type Engine, type Task, ValidationError } from "../../src/index.js";
import { nextEvent, tempDb, testEngine } from "../helpers.js";

const DAY = 86_400_000;
const TABLES = ["runs", "visits", "events", "compensations", "inbox", "map_items"] as const;
type Counts = Record<(typeof TABLES)[number], number>;

/** Rows of each table that belong to these runs, counted in the database itself. */
async function rowsOf(database: string, runIds: string[]): Promise<Counts> {
  const counts = {} as Counts;
  if (database.startsWith("sqlite:")) {
    const db = new Database(database.slice("sqlite:".length), { readonly: true });
    try {
      for (const t of TABLES) {
        counts[t] = db
          .prepare(`SELECT count(*) FROM ${t} WHERE run_id IN (SELECT value FROM json_each(?))`)
          .pluck()
          .get(JSON.stringify(runIds)) as number;
      }
    } finally {
      db.close();
    }
    return counts;
  }
  const url = new URL(database);
  const schema = url.searchParams.get("schema") as string;
  url.searchParams.delete("schema");
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    for (const t of TABLES) {
      const r = await client.query(`SELECT count(*)::int AS n FROM "${schema}".${t} WHERE run_id = ANY($1::text[])`, [
        runIds,
      ]);
      counts[t] = r.rows[0].n as number;
    }
  } finally {
    await client.end();
  }
  return counts;
}

/** Every run of the database (children and map items' runs included). */
async function allRunIds(engine: Engine, workflowIds: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const workflow_id of workflowIds) {
    for (const r of await engine.listRuns({ workflow_id, limit: 1000 })) ids.push(r.run_id);
  }
  return ids;
}

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((res) => {
    resolve = res;
  });
  return { promise, resolve };
}

/** An agent whose calls wait until the test releases them. */
function gate() {
  const held: (() => void)[] = [];
  const arrived: (() => void)[] = [];
  return {
    agent: () => {
      const d = deferred<unknown>();
      held.push(() => d.resolve({ released: true }));
      for (const a of arrived.splice(0)) a();
      return d.promise;
    },
    /** Resolves once `n` calls are held. */
    until: (n: number) =>
      new Promise<void>((done) => {
        const check = () => (held.length >= n ? done() : arrived.push(check));
        check();
      }),
    releaseAll: () => {
      for (const r of held.splice(0)) r();
    },
  };
}

const echo = (t: Task) => ({ got: t.payload ?? null });
const planner = () => ({ items: [1, 2, 3] });
const failing = () => {
  throw new Error("the card was declined");
};

/** Seconds the live runs may wait: longer than the days the clock moves. */
const LIVE_FOR = 30 * 86_400;

const WORKFLOWS = [
  { id: "plain", nodes: [{ node_id: "a", agent_type: "echo" }] },
  {
    id: "child",
    nodes: [{ node_id: "work", agent_type: "echo", payload: { n: "{{ input.n }}" } }],
  },
  {
    id: "parent",
    nodes: [
      { node_id: "sub", agent_type: "workflow", payload: { workflow_id: "child", input: { n: 1 } } },
      { node_id: "after", agent_type: "echo", depends_on: ["sub"] },
    ],
  },
  {
    id: "fanout",
    nodes: [
      { node_id: "plan", agent_type: "planner" },
      {
        node_id: "each",
        agent_type: "map",
        depends_on: ["plan"],
        payload: { items: "{{ nodes.plan.output.items }}", each: { agent_type: "echo", payload: { n: "{{ item }}" } } },
      },
    ],
  },
  {
    id: "saga",
    nodes: [
      { node_id: "reserve", agent_type: "echo", compensation: { agent_type: "echo", payload: { undo: true } } },
      { node_id: "charge", agent_type: "failing", depends_on: ["reserve"], retry_count: 0 },
    ],
  },
  {
    id: "waits",
    timeout: LIVE_FOR,
    nodes: [
      { node_id: "wait", agent_type: "wait_event", payload: { event: "approved" }, timeout: LIVE_FOR },
      { node_id: "after", agent_type: "echo", depends_on: ["wait"] },
    ],
  },
  { id: "held", timeout: LIVE_FOR, nodes: [{ node_id: "g", agent_type: "gate", timeout: LIVE_FOR }] },
];
const WORKFLOW_IDS = ["plain", "child", "parent", "fanout", "fanout/each", "saga", "waits", "held"];

/** Timers at a pace that days of ManualClock time do not fire a million times. */
const SLOW_TIMERS = { sweepIntervalMs: DAY / 4, heartbeatIntervalMs: DAY, engineTimeoutMs: 30 * DAY };

async function engineWith(g: ReturnType<typeof gate>, options: Parameters<typeof testEngine>[0] = {}) {
  const t = await testEngine({ agents: { echo, planner, failing, gate: g.agent }, ...SLOW_TIMERS, ...options });
  for (const w of WORKFLOWS) await t.engine.registerWorkflow(w);
  return t;
}

/** Runs that waited for an event until it came: their inbox row belongs to them. */
async function eventRun(engine: Engine): Promise<string> {
  const parked = nextEvent(engine, (e) => e.type === "node.waiting" && e.node_id === "wait");
  const run = await engine.startRun("waits");
  await parked;
  await engine.sendEvent(run.run_id, "approved", { by: "ana" });
  return (await engine.waitForRun(run.run_id)).run_id;
}

describe("pruning finished runs", () => {
  it("deletes exactly the finished runs older than the cut, with their rows and their children; keeps live and young runs", async () => {
    const g = gate();
    const { engine, clock, database } = await engineWith(g);

    // Old: one of each kind, finished ten days ago.
    const old: string[] = [];
    for (const id of ["plain", "parent", "fanout"]) {
      const run = await engine.startRun(id, { idempotency_key: `old-${id}` });
      expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
      old.push(run.run_id);
    }
    const saga = await engine.startRun("saga");
    const failed = await engine.waitForRun(saga.run_id);
    expect(failed.status).toBe("FAILED");
    expect(failed.compensations).toHaveLength(1);
    old.push(saga.run_id, await eventRun(engine));
    const cancelled = await engine.startRun("held");
    await g.until(1);
    await engine.cancelRun(cancelled.run_id);
    expect((await engine.waitForRun(cancelled.run_id)).status).toBe("CANCELLED");
    old.push(cancelled.run_id);
    // Old but live: a run held by its agent, a run waiting for an event that never comes.
    const running = await engine.startRun("held");
    await g.until(2);
    const parked = nextEvent(engine, (e) => e.type === "node.waiting");
    const waiting = await engine.startRun("waits");
    await parked;

    await clock.advance(10 * DAY);
    const young = await engine.startRun("plain");
    await engine.waitForRun(young.run_id);

    const everything = await allRunIds(engine, WORKFLOW_IDS);
    const parentRun = await engine.getRun(old[1] as string);
    const kids = parentRun.children.map((c) => c.run_id);
    expect(kids).toHaveLength(1);
    // The map's items are rows of its run (an agent's items hold their attempts), pruned with it.
    const items = (await engine.listMapItems(old[2] as string, "each")).items;
    expect(items.map((i) => i.child_run_id)).toEqual([null, null, null]);
    const doomed = [...old, ...kids];
    const kept = everything.filter((id) => !doomed.includes(id));
    expect(kept.sort()).toEqual([running.run_id, waiting.run_id, young.run_id].sort());

    const doomedBefore = await rowsOf(database, doomed);
    const keptBefore = await rowsOf(database, kept);
    for (const t of TABLES) expect(doomedBefore[t], `${t} rows of the old runs`).toBeGreaterThan(0);

    expect(await engine.pruneRuns({ olderThan: "1d", dryRun: true })).toBe(doomed.length);
    expect(await rowsOf(database, doomed)).toEqual(doomedBefore);
    expect(await engine.pruneRuns({ olderThan: "1d" })).toBe(doomed.length);

    expect(await rowsOf(database, doomed)).toEqual({
      runs: 0,
      visits: 0,
      events: 0,
      compensations: 0,
      inbox: 0,
      map_items: 0,
    });
    expect(await rowsOf(database, kept)).toEqual(keptBefore);
    expect((await allRunIds(engine, WORKFLOW_IDS)).sort()).toEqual(kept.sort());
    expect(await engine.pruneRuns({ olderThan: "1d" })).toBe(0);

    // The live runs still finish.
    g.releaseAll();
    expect((await engine.waitForRun(running.run_id)).status).toBe("SUCCEEDED");
    await engine.sendEvent(waiting.run_id, "approved", {});
    expect((await engine.waitForRun(waiting.run_id)).status).toBe("SUCCEEDED");

    // A pruned run's idempotency key is forgotten: the same key starts a new run.
    const again = await engine.startRun("plain", { idempotency_key: "old-plain" });
    expect(again.run_id).not.toBe(old[0]);
    expect((await engine.waitForRun(again.run_id)).status).toBe("SUCCEEDED");
  });

  it("prunes only the statuses asked for, each by its own age", async () => {
    const g = gate();
    const { engine, clock } = await engineWith(g);
    const ok = await engine.startRun("plain");
    await engine.waitForRun(ok.run_id);
    const saga = await engine.startRun("saga");
    await engine.waitForRun(saga.run_id);
    await clock.advance(2 * DAY);
    expect(await engine.pruneRuns({ olderThan: "3d" })).toBe(0);
    expect(await engine.pruneRuns({ olderThan: 86_400, statuses: ["FAILED"] })).toBe(1);
    await expect(engine.getRun(saga.run_id)).rejects.toThrow(/does not exist|not found/i);
    expect((await engine.getRun(ok.run_id)).status).toBe("SUCCEEDED");
    await expect(engine.pruneRuns({ olderThan: "3 days" })).rejects.toThrow(ValidationError);
  });

  it("the retention option prunes from the engine's own timer, by status, on the engine's clock", async () => {
    const g = gate();
    const { engine, clock } = await engineWith(g, {
      retention: { succeeded: "1d", failed: "30d" },
    });
    const ok = await engine.startRun("plain");
    await engine.waitForRun(ok.run_id);
    const saga = await engine.startRun("saga");
    await engine.waitForRun(saga.run_id);
    // Each quarter day the timer starts a batch; wait for each before the clock moves on.
    for (let i = 0; i < 8; i++) {
      await clock.advance(DAY / 4);
      await engine.retention?.running;
    }
    await expect(engine.getRun(ok.run_id)).rejects.toThrow(/does not exist|not found/i);
    expect((await engine.getRun(saga.run_id)).status).toBe("FAILED");
  });

  it("createEngine refuses a retention it cannot read, saying which field and why", async () => {
    for (const [retention, message] of [
      [{ succeeded: "30 days" }, /retention\.succeeded must be a duration/],
      [{ finished: "30d" }, /retention\.finished is not a status/],
      [{ failed: -1 }, /retention\.failed must be a duration/],
      ["30d", /retention must be an object/],
    ] as const) {
      await expect(createEngine({ database: tempDb(), retention: retention as never })).rejects.toThrow(message);
    }
  });

  for (const beside of [false, true]) {
    it(`pruning in batches while runs are busy loses nothing live${beside ? " (from a client beside the engine: another connection)" : ""}`, async () => {
      const g = gate();
      const { engine, clock, database } = await engineWith(g);
      // A client is what `skein prune` is: its own connection, its own transactions.
      const client = beside ? await createClient({ database, clock }) : engine;
      // A backlog of old finished runs, pruned 7 runs a transaction.
      const finished = await Promise.all(Array.from({ length: 60 }, () => engine.startRun("fanout")));
      for (const r of finished) expect((await engine.waitForRun(r.run_id)).status).toBe("SUCCEEDED");
      await clock.advance(2 * DAY);
      // Busy runs: held ones, and map runs that start and finish while the prune loops.
      const held = await Promise.all(Array.from({ length: 5 }, () => engine.startRun("held")));
      await g.until(5);
      const busy: Promise<string>[] = [];
      let pruned = 0;
      for (let round = 0; round < 20; round++) {
        busy.push(engine.startRun(round % 2 === 0 ? "fanout" : "parent").then((r) => r.run_id));
        pruned += await client.pruneRuns({ olderThan: "1d", batchSize: 7 });
      }
      // Every old run went (its items with it: rows of its own); nothing younger.
      expect(pruned).toBe(60);
      g.releaseAll();
      for (const r of held) expect((await engine.waitForRun(r.run_id)).status).toBe("SUCCEEDED");
      for (const id of await Promise.all(busy)) {
        const done = await engine.waitForRun(id);
        expect(done.status).toBe("SUCCEEDED");
      }
      // Finished now, but young: kept until they are old too.
      expect(await client.pruneRuns({ olderThan: "1d" })).toBe(0);
      await clock.advance(2 * DAY);
      // The held runs, the ten maps (their items are their rows) and the ten parents with their children.
      expect(await client.pruneRuns({ olderThan: "1d" })).toBe(5 + 10 + 10 * 2);
      if (client !== engine) await client.close();
    });
  }
});
