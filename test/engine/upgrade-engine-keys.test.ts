/**
 * Upgrading a database whose runs hold the engine keys of older versions (DESIGN §13.1, migration
 * 014), on SQLite and on PostgreSQL. The state before the upgrade is made by the engine of this
 * version, then taken back to the older schema by SQL: the engine's keys lose the `skein:`
 * prefix (`<execution_id>:<attempt>`, `<execution_id>:<attempt>:<index>`,
 * `schedule:<id>:<slot>`), what 014 and later added is dropped and their versions forgotten.
 * The test first checks that this gives exactly the columns the migrations up to 013 (SQLite) /
 * 012 (PostgreSQL) make. Opening the engine again migrates: the engine's keys move under the
 * prefix, a client's key of the same shapes does not, and the runs in flight go on without a
 * child, an item or a slot's run started twice.
 */
import Database from "better-sqlite3";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { createEngine, type Engine, ManualClock, type Run } from "../../src/index.js";
import { migrate as migratePostgres, loadMigrations as postgresMigrations } from "../../src/store/postgres/migrate.js";
import { loadMigrations as sqliteMigrations } from "../../src/store/sqlite/migrate.js";
import { onPostgres, PG_URL, sqlOn, tempDb, testEngine } from "../helpers.js";
import { advanceTo, idle } from "./schedule-clock.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const QUIET = { sweepIntervalMs: 7 * HOUR, heartbeatIntervalMs: 7 * HOUR, engineTimeoutMs: 21 * HOUR };
/**
 * SQLite's events as a table of a row per event again (before migration 020), with the events
 * the batches held: the upgrade batches them again.
 */
const EVENTS_BEFORE_020 = `
  CREATE TABLE events_kept AS SELECT * FROM events;
  DROP VIEW events;
  DROP TABLE event_batches;
  CREATE TABLE events (
    seq       INTEGER PRIMARY KEY,  -- the rowid: grows with every insert (no AUTOINCREMENT: it costs a write per row)
    run_id    TEXT    NOT NULL,
    type      TEXT    NOT NULL,
    node_id   TEXT,
    visit     INTEGER,
    trace_id  TEXT    NOT NULL,
    at        INTEGER NOT NULL,
    data      TEXT    NOT NULL
  );
  CREATE INDEX events_by_run ON events (run_id, seq);
  INSERT INTO events SELECT * FROM events_kept;
  DROP TABLE events_kept;`;

/** What migration 021 added: map items' attempt fields. */
const ITEM_ATTEMPTS_BEFORE_021 = `
  DROP INDEX map_items_ready;
  DROP INDEX map_items_leased;
  ${["agent_type", "attempt", "failures", "interruptions", "ready_at", "deadline_at", "lease_expires_at", "holder"]
    .map((c) => `ALTER TABLE map_items DROP COLUMN ${c};`)
    .join("\n  ")}`;

/** What migration 022 added: durable steps. */
const STEPS_BEFORE_022 = "DROP TABLE steps;";
/** What migration 024 added: run tags. */
const TAGS_BEFORE_024 = onPostgres
  ? "DROP INDEX runs_by_tags; ALTER TABLE runs DROP COLUMN tags;"
  : "DROP TABLE run_tags; ALTER TABLE runs DROP COLUMN tags;";
/** What migration 025 added: paused runs. */
const PAUSE_BEFORE_025 = "DROP INDEX runs_paused; ALTER TABLE runs DROP COLUMN paused;";
/** What migration 026 added: a forked run's source. */
const FORKED_FROM_BEFORE_026 = "ALTER TABLE runs DROP COLUMN forked_from;";
/** What migration 028 added: run keys (DESIGN §17). */
const KEYS_BEFORE_028 =
  "DROP INDEX runs_by_key; ALTER TABLE runs DROP COLUMN key; ALTER TABLE runs DROP COLUMN queued;";
/** What migration 030 added: token windows and holds on the rate limits' rows. */
const TOKEN_RATES_BEFORE_030 =
  "ALTER TABLE rate_buckets DROP COLUMN usage_tokens; ALTER TABLE rate_buckets DROP COLUMN last_usage; ALTER TABLE rate_buckets DROP COLUMN held_until;";
/** What migration 029 added: event triggers, and the event that started a run. */
const TRIGGERS_BEFORE_029 = "DROP TABLE workflow_triggers; ALTER TABLE runs DROP COLUMN triggered_by;";
/** What migration 027 added: run priority, copied onto visits and map items, and the ready indexes in its order. */
const PRIORITY_BEFORE_027 = `
  DROP INDEX visits_ready;
  CREATE INDEX visits_ready ON visits (agent_type, ready_at) WHERE ready_at IS NOT NULL;
  DROP INDEX map_items_ready;
  CREATE INDEX map_items_ready ON map_items (ready_at) WHERE ready_at IS NOT NULL;
  ALTER TABLE runs DROP COLUMN priority;
  ALTER TABLE visits DROP COLUMN priority;
  ALTER TABLE map_items DROP COLUMN priority;`;

/** The newest migration before 014 on this store (PostgreSQL has no 013). */
const BEFORE = onPostgres ? 12 : 13;

const held = { id: "held", nodes: [{ node_id: "wait", agent_type: "wait_event", payload: { event: "release" } }] };
const parentFlow = {
  id: "parent",
  nodes: [{ node_id: "child", agent_type: "workflow", payload: { workflow_id: "held" } }],
};
const fan = {
  id: "fan",
  nodes: [
    {
      node_id: "each",
      agent_type: "map",
      payload: { items: "{{ [1, 2] }}", each: { workflow_id: "held" }, max_concurrency: 1 },
    },
  ],
};

async function withSchema<T>(database: string, use: (client: pg.Client, schema: string) => Promise<T>): Promise<T> {
  const url = new URL(database);
  const schema = url.searchParams.get("schema") as string;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(`SET search_path TO ${pg.escapeIdentifier(schema)}`);
    return await use(client, schema);
  } finally {
    await client.end();
  }
}

/** Every table's columns, `table.column`, sorted. */
async function columns(database: string): Promise<string[]> {
  if (!onPostgres) {
    const db = new Database(database.slice("sqlite:".length), { readonly: true });
    try {
      return sqliteColumns(db);
    } finally {
      db.close();
    }
  }
  return withSchema(database, async (client, schema) => {
    const { rows } = await client.query<{ c: string }>(
      "SELECT table_name || '.' || column_name AS c FROM information_schema.columns WHERE table_schema = $1 ORDER BY 1",
      [schema],
    );
    return rows.map((r) => r.c);
  });
}

function sqliteColumns(db: Database.Database): string[] {
  const tables = db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    .all() as { name: string }[];
  return tables
    .flatMap((t) =>
      (db.prepare(`PRAGMA table_info(${JSON.stringify(t.name)})`).all() as { name: string }[]).map(
        (c) => `${t.name}.${c.name}`,
      ),
    )
    .sort();
}

/** The columns a database migrated only up to BEFORE has, by this version's own migration files. */
async function columnsBefore014(): Promise<string[]> {
  const database = tempDb();
  if (!onPostgres) {
    const db = new Database(database.slice("sqlite:".length));
    try {
      db.exec(
        "CREATE TABLE skein_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
      );
      for (const m of sqliteMigrations().filter((m) => m.version <= BEFORE)) db.exec(m.sql);
    } finally {
      db.close();
    }
  } else {
    const schema = new URL(database).searchParams.get("schema") as string;
    const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
    try {
      const where = { schema, schemaSql: pg.escapeIdentifier(schema), target: "test" };
      await migratePostgres(
        pool,
        where,
        postgresMigrations().filter((m) => m.version <= BEFORE),
      );
    } finally {
      await pool.end();
    }
  }
  return columns(database);
}

async function runsOf(engine: Engine, workflowId: string): Promise<Run[]> {
  return engine.listRuns({ workflow_id: workflowId, limit: 100 });
}

describe("upgrading to engine keys under skein: (migration 014)", () => {
  it("moves the engine's old keys under the prefix, keeps a client's, and starts nothing twice", async () => {
    const start = Date.UTC(2026, 0, 1);
    const database = tempDb();
    const clock = new ManualClock(start);
    const before: Engine = await createEngine({ ...QUIET, database, clock });
    await before.registerWorkflow(held);
    await before.registerWorkflow(parentFlow);
    await before.registerWorkflow(fan);
    await before.putSchedule({ schedule_id: "nightly", workflow_id: "held", cron: "0 3 * * *" });
    const slot = start + 3 * HOUR;
    await advanceTo(before, clock, slot + 60_000);
    // Started after the slot, so that the clock stands still while they are in flight (well within their timeouts).
    const parent = await before.startRun("parent");
    const mapped = await before.startRun("fan");
    // Clients' runs under keys of the old engine shapes, with no parent and no schedule.
    const clientChildShape = `${parent.run_id}:other:1:1`;
    const clientSlotShape = `schedule:nightly:${new Date(slot + DAY).toISOString()}`;
    const clients = [
      await before.startRun("held", { idempotency_key: clientChildShape }),
      await before.startRun("held", { idempotency_key: `${clientChildShape}:0` }),
      await before.startRun("held", { idempotency_key: clientSlotShape }),
    ];
    await idle(before);
    // In flight: the parent's child waits, the map's first item runs (its second waits for room), the slot's run waits.
    const child = (await before.getRun(parent.run_id)).children[0]?.run_id as string;
    const itemRuns = async (engine: Engine) =>
      Promise.all(
        (await engine.listMapItems(mapped.run_id, "each")).items
          .filter((i) => i.child_run_id !== null)
          .map((i) => engine.getRun(i.child_run_id as string)),
      );
    const [item] = await itemRuns(before);
    const [slotRun] = (await runsOf(before, "held")).filter((r) => r.schedule_id === "nightly");
    expect([child, item?.run_id, slotRun?.run_id].every(Boolean)).toBe(true);
    const keysNow = new Map<string, string | null>();
    for (const id of [child, item?.run_id as string, slotRun?.run_id as string]) {
      keysNow.set(id, (await before.getRun(id)).idempotency_key);
    }
    expect([...keysNow.values()].every((k) => k?.startsWith("skein:"))).toBe(true);
    const eventsBefore = await before.listEvents(parent.run_id);
    await before.close();

    // Back to the older schema: its keys, its columns, its versions; and the schedule's advance
    // past the slot lost (as when the slot's run was started by an engine whose advance did not
    // reach the database), so the upgraded engine fires that slot again and must find its run by key.
    await sqlOn(
      database,
      `UPDATE runs SET idempotency_key = substr(idempotency_key, 7) WHERE idempotency_key LIKE 'skein:%';
       ALTER TABLE runs DROP COLUMN scope;
       ALTER TABLE schedules DROP COLUMN scope;
       ALTER TABLE runs DROP COLUMN reserved;
       DROP TABLE run_trees;
       DROP INDEX inbox_waiting;
       ALTER TABLE inbox DROP COLUMN size;
       DROP INDEX visits_held_by_map;
       ALTER TABLE inbox DROP COLUMN scope;
       ALTER TABLE engines DROP COLUMN served_types;
       ${onPostgres ? "" : EVENTS_BEFORE_020}
       ${PRIORITY_BEFORE_027}
       ${ITEM_ATTEMPTS_BEFORE_021}
       ${STEPS_BEFORE_022}
       ${TAGS_BEFORE_024}
       ${PAUSE_BEFORE_025}
       ${FORKED_FROM_BEFORE_026}
       ${KEYS_BEFORE_028}
       ${TOKEN_RATES_BEFORE_030}
       ${TRIGGERS_BEFORE_029}
       DELETE FROM skein_migrations WHERE version > ${BEFORE};
       UPDATE schedules SET next_fire_at = last_slot_at WHERE schedule_id = 'nightly';`,
    );
    expect(await columns(database)).toEqual(await columnsBefore014());

    // The upgrade: opening the engine migrates.
    const { engine } = await testEngine({ ...QUIET, database, clock });
    await idle(engine);
    // The events went over to a row per run and transaction (SQLite's migration 020) unchanged.
    expect((await engine.listEvents(parent.run_id)).slice(0, eventsBefore.length)).toEqual(eventsBefore);
    for (const [id, key] of keysNow) expect((await engine.getRun(id)).idempotency_key).toBe(key);
    expect((await engine.getRun(child)).idempotency_key).toBe(`skein:${parent.run_id}:child:1:1`);
    expect((await engine.getRun(item?.run_id as string)).idempotency_key).toBe(`skein:${mapped.run_id}:each:1:1:0`);
    expect((await engine.getRun(slotRun?.run_id as string)).idempotency_key).toBe(
      `skein:schedule:nightly:${new Date(slot).toISOString()}`,
    );
    expect(await Promise.all(clients.map(async (c) => (await engine.getRun(c.run_id)).idempotency_key))).toEqual([
      clientChildShape,
      `${clientChildShape}:0`,
      clientSlotShape,
    ]);
    // The slot fired again found its run: nothing new started, last_run_id unchanged.
    expect((await runsOf(engine, "held")).filter((r) => r.schedule_id === "nightly").map((r) => r.run_id)).toEqual([
      slotRun?.run_id,
    ]);
    expect(await engine.getSchedule("nightly")).toMatchObject({
      last_slot_at: slot,
      last_run_id: slotRun?.run_id,
      next_fire_at: slot + DAY,
    });

    // The runs in flight finish: each waiting run is released, once, until none waits.
    for (let round = 0; round < 5; round++) {
      const waiting = await engine.listRuns({ workflow_id: "held", status: "RUNNING", limit: 100 });
      for (const r of waiting) await engine.sendEvent(r.run_id, "release");
      await idle(engine);
    }
    expect((await engine.getRun(parent.run_id)).nodes[0]?.error).toBeNull();
    expect((await engine.getRun(parent.run_id)).status).toBe("SUCCEEDED");
    expect((await engine.getRun(parent.run_id)).children.map((c) => c.run_id)).toEqual([child]);
    expect((await engine.getRun(mapped.run_id)).status).toBe("SUCCEEDED");
    const items = await itemRuns(engine);
    expect(items.map((r) => r.idempotency_key).sort()).toEqual([
      `skein:${mapped.run_id}:each:1:1:0`,
      `skein:${mapped.run_id}:each:1:1:1`,
    ]);
    // One child, two items (each a run of "held", the map's child), one slot's run and the clients' three: nothing twice.
    expect(await runsOf(engine, "held")).toHaveLength(1 + 2 + 1 + 3);
  });
});
