/**
 * The PostgreSQL store against a real server (SKEIN_TEST_PG_URL, default the local one). Each
 * test gets a fresh schema, dropped afterwards; its connections carry the schema's name as
 * application_name, so a test can find (and kill) exactly its own backends. Concurrency is
 * staged with promises and the server's lock table, never with sleeps.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { newCompensation as makeCompensation } from "../../src/core/compensation.js";
import type { Compensation, NewEvent, Run, Schedule, Visit } from "../../src/core/types.js";
import { DatabaseError } from "../../src/errors.js";
import { TOLERANCE_MS } from "../../src/store/postgres/db-time.js";
import { ENGINE_LOCK_NAMESPACE, FREE_LOCK_GRACE_MS } from "../../src/store/postgres/engine-lock.js";
import { type PostgresOptions, PostgresStore } from "../../src/store/postgres/postgres-store.js";
import {
  EMPTY_BATCH,
  type LoadedRun,
  type ReadyNotice,
  StaleRunsError,
  type StoreTx,
  type Written,
} from "../../src/store/store.js";
import { visit } from "../core/helpers.js";
import { PG_URL } from "../helpers.js";
import { describeStore, writeRows } from "./stores.js";

const NOW = Date.UTC(2026, 0, 1);
const clock = { now: () => NOW };

let admin: pg.Client;
const schemas: string[] = [];
const stores: PostgresStore[] = [];

function freshSchema(name = `skein_t_${randomBytes(6).toString("hex")}`): string {
  schemas.push(name);
  return name;
}

/** The server URL with `params` added (application_name, options). */
function urlWith(params: Record<string, string>): string {
  const u = new URL(PG_URL);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
}

async function open(schema: string, options: Partial<PostgresOptions> = {}): Promise<PostgresStore> {
  const store = await PostgresStore.open({
    url: urlWith({ application_name: schema }),
    schema,
    clock,
    ...options,
  });
  stores.push(store);
  return store;
}

function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Waits until a backend of `app` waits for a lock: the server's word, not a timer. */
/**
 * Holds `runIds` locked in a transaction of `store`, as another engine would; resolves once they
 * are locked. `release()` lets the transaction go on (`then` runs in it) and resolves once it ended.
 */
async function holdRuns(
  store: PostgresStore,
  runIds: string[],
  then?: (tx: StoreTx) => Promise<void>,
): Promise<{ release: () => Promise<void> }> {
  const locked = deferred();
  const released = deferred();
  const holding = store.transaction(
    async (tx) => {
      locked.resolve();
      await released.promise;
      await then?.(tx);
    },
    { lock: runIds },
  );
  await locked.promise;
  return {
    release: async () => {
      released.resolve();
      await holding;
    },
  };
}

async function waitingForLock(app: string): Promise<void> {
  for (;;) {
    const { rows } = await admin.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
      [app],
    );
    if (rows[0].n > 0) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

async function versions(schema: string): Promise<number[]> {
  const { rows } = await admin.query(`SELECT version FROM ${pg.escapeIdentifier(schema)}.skein_migrations ORDER BY 1`);
  return rows.map((r) => r.version as number);
}

const WORKFLOW = JSON.stringify({ id: "wf", nodes: [{ id: "a", agent: "writer" }] });

function newRun(run_id: string, overrides: Partial<Run> = {}): Run {
  return {
    run_id,
    workflow_id: "wf",
    workflow_version: 1,
    status: "RUNNING",
    input: { topic: "durable" },
    output: null,
    error: null,
    end_cause: null,
    trace_id: "0af7651916cd43dd8448eb211c80319c",
    traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    idempotency_key: null,
    input_hash: "h",
    needs_attention: false,
    created_at: NOW,
    updated_at: NOW,
    deadline_at: NOW + 3_600_000,
    ended_at: null,
    parent: null,
    schedule_id: null,
    usage: { tokens_in: 0, tokens_out: 0, cost: 0 },
    budget: null,
    scope: null,
    reserved: null,
    tags: {},
    paused: null,
    forked_from: null,
    key: null,
    queued: null,
    triggered_by: null,
    priority: 5,
    ...overrides,
  };
}

function newVisit(run_id: string, node_id: string, overrides: Partial<Visit> = {}): Visit {
  return visit(node_id, "PENDING", { run_id, agent_type: "writer", created_at: NOW, ...overrides });
}

function newCompensation(run_id: string, seq: number, node_id: string, overrides: Partial<Compensation> = {}) {
  const undone = { run_id, node_id, visit: 1, execution_id: `${run_id}:${node_id}:1` };
  return { ...makeCompensation(undone, seq, "undo", NOW), ...overrides };
}

function event(run_id: string, type: NewEvent["type"], node_id: string | null, data: NewEvent["data"] = {}): NewEvent {
  return { run_id, type, node_id, visit: node_id ? 1 : null, trace_id: "t", at: NOW, data };
}

/** Runs with one ready visit each, ready one ms apart (oldest first by id). */
async function readyRuns(store: PostgresStore, ids: string[]): Promise<void> {
  await store.putWorkflow("wf", "hash-1", WORKFLOW, NOW);
  await store.transaction(async (tx) => {
    for (const id of ids) await writeRows(tx, { insertRuns: [newRun(id)] });
    await writeRows(tx, {
      insertVisits: ids.map((id, i) => newVisit(id, "a", { ready_at: NOW - 100 + i, payload: { n: i } })),
    });
  });
}

// PostgreSQL is part of the project: run unless SKEIN_TEST_STORES leaves it out (a missing server fails the suite).
describeStore("postgres")("PostgresStore", () => {
  beforeAll(async () => {
    admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
  });

  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
    for (const schema of schemas.splice(0)) {
      await admin.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(schema)} CASCADE`);
    }
  });

  afterAll(async () => {
    await admin?.end();
  });

  describe("migrations", () => {
    it("migrates a new schema once, and again changes nothing", async () => {
      const schema = freshSchema();
      await (await open(schema)).close();
      await open(schema);
      expect(await versions(schema)).toEqual([
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17, 18, 19, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
      ]);
    });

    it("lets two stores migrate the same new schema at once", async () => {
      const schema = freshSchema();
      await Promise.all([open(schema), open(schema)]);
      expect(await versions(schema)).toEqual([
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17, 18, 19, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
      ]);
    });

    it("refuses a schema newer than it knows", async () => {
      const schema = freshSchema();
      await (await open(schema)).close();
      await admin.query(
        `INSERT INTO ${pg.escapeIdentifier(schema)}.skein_migrations (version, name, applied_at) VALUES (99, 'future', 0)`,
      );
      const opening = open(schema);
      await expect(opening).rejects.toThrow(DatabaseError);
      await expect(opening).rejects.toThrow(/schema version 99, newer than this Skein knows \(30\); upgrade Skein/);
    });

    it("refuses a schema that holds someone else's tables", async () => {
      const schema = freshSchema();
      await admin.query(`CREATE SCHEMA ${pg.escapeIdentifier(schema)}`);
      await admin.query(`CREATE TABLE ${pg.escapeIdentifier(schema)}.orders (id int)`);
      await expect(open(schema)).rejects.toThrow(/has tables \(orders\) but is not a Skein schema/);
    });

    it("quotes a schema name that needs it, and keeps the URL's own options", async () => {
      const schema = freshSchema(`skein t "${randomBytes(3).toString("hex")}"`);
      const store = await PostgresStore.open({
        url: urlWith({ options: "-c statement_timeout=60000" }),
        schema,
        clock,
      });
      stores.push(store);
      await store.putWorkflow("wf", "hash-1", WORKFLOW, NOW);
      expect((await store.getWorkflow("wf"))?.version).toBe(1);
      expect(await versions(schema)).toEqual([
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17, 18, 19, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
      ]);
    });
  });

  describe("round trips", () => {
    it("registers a definition once per content, under the next version", async () => {
      const store = await open(freshSchema());
      expect(await store.putWorkflow("wf", "hash-1", WORKFLOW, NOW)).toEqual({ version: 1, created: true });
      expect(await store.putWorkflow("wf", "hash-1", WORKFLOW, NOW)).toEqual({ version: 1, created: false });
      expect(await store.putWorkflow("wf", "hash-2", WORKFLOW, NOW + 1)).toEqual({ version: 2, created: true });
      const latest = await store.getWorkflow("wf");
      expect(latest).toMatchObject({ id: "wf", version: 2, hash: "hash-2", created_at: NOW + 1 });
      expect(JSON.parse(latest?.definition ?? "")).toMatchObject({ id: "wf", version: 2 });
      expect((await store.getWorkflow("wf", 1))?.hash).toBe("hash-1");
      expect(await store.getWorkflow("wf", 3)).toBeNull();
      expect(await store.listWorkflows()).toEqual([{ id: "wf", version: 2, created_at: NOW + 1 }]);
    });

    it("gives one version to the same content registered by two stores at once", async () => {
      const schema = freshSchema();
      const [a, b] = await Promise.all([open(schema), open(schema)]);
      const results = await Promise.all([
        a.putWorkflow("wf", "hash-1", WORKFLOW, NOW),
        b.putWorkflow("wf", "hash-1", WORKFLOW, NOW),
      ]);
      expect(results.map((r) => r.version)).toEqual([1, 1]);
      expect(results.filter((r) => r.created)).toHaveLength(1);
    });

    it("reads back runs, visits, events and compensations exactly as written", async () => {
      const store = await open(freshSchema());
      await store.putWorkflow("wf", "hash-1", WORKFLOW, NOW);
      // Key order, a NUL escape, a lone surrogate, big and small numbers: json keeps them all.
      const output = { z: 1, a: "\u0000 nul", s: "\ud800", n: [1e21, 5e-324, -0.5], nested: { y: null, x: true } };
      const r = newRun("r1", { input: null, idempotency_key: "key-1" });
      const a = newVisit("r1", "a", { payload: [1, "two"], trigger: { node_id: "start", visit: 2 } });
      const b = newVisit("r1", "b", { agent_type: "reviewer" });
      const events = await store.transaction(async (tx) => {
        await writeRows(tx, { insertRuns: [r] });
        await writeRows(tx, { insertVisits: [a, b] });
        const written = await writeRows(tx, {
          events: [event("r1", "run.started", null, { input: null }), event("r1", "node.ready", "a")],
        });
        return written.events;
      });
      expect(events.map((e) => e.type)).toEqual(["run.started", "node.ready"]);
      expect(events[1]!.seq).toBeGreaterThan(events[0]!.seq);

      const a2: Visit = {
        ...a,
        state: "SUCCEEDED",
        output,
        fired: ["b"],
        attempt: 1,
        started_at: NOW + 1,
        ended_at: NOW + 2,
        holder: "engine-1",
      };
      const b2: Visit = {
        ...b,
        state: "FAILED",
        error: { message: "boom", reason: "error", details: { code: 7 } },
        reason: "error",
        handled: true,
      };
      const r2: Run = { ...r, status: "COMPENSATING", needs_attention: true, updated_at: NOW + 3, end_cause: "failed" };
      const comps = [newCompensation("r1", 1, "a"), newCompensation("r1", 2, "b", { state: "SKIPPED" })];
      const more = await store.transaction(async (tx) => {
        await writeRows(tx, { updateRuns: [r2] });
        await writeRows(tx, { updateVisits: [a2, b2] });
        await writeRows(tx, { compensations: comps });
        await writeRows(tx, { compensations: [{ ...comps[0]!, state: "RUNNING", attempt: 1, holder: "engine-1" }] });
        return (await writeRows(tx, { events: [event("r1", "node.succeeded", "a", { output })] })).events;
      });

      const loaded = (await store.transaction((tx) => tx.loadRun("r1"))) as LoadedRun | null;
      expect(loaded?.run).toEqual(r2);
      expect(loaded?.visits.sort((x, y) => x.node_id.localeCompare(y.node_id))).toEqual([a2, b2]);
      expect(loaded?.compensations).toEqual([
        { ...comps[0]!, state: "RUNNING", attempt: 1, holder: "engine-1" },
        comps[1],
      ]);
      const read = await store.listVisits("r1", { currentOnly: true });
      expect(JSON.stringify(read.find((v) => v.node_id === "a")?.output)).toBe(JSON.stringify(output));

      expect(await store.getRun("r1")).toEqual(r2);
      expect(await store.getRun("nope")).toBeNull();
      expect((await store.readRun("r1"))?.compensations).toEqual(loaded?.compensations);
      expect(await store.latestTerminalVisits("r1")).toHaveLength(2);
      const all = await store.listEvents("r1");
      expect(all).toEqual([...events, ...more]);
      expect(await store.listEvents("r1", { afterSeq: events[1]!.seq })).toEqual(more);
      const history = await store.transaction((tx) => tx.runHistory("r1"));
      expect(history.find((h) => h.visit.node_id === "a")?.successSeq).toBe(more[0]!.seq);
      expect(history.find((h) => h.visit.node_id === "b")?.successSeq).toBeNull();
      expect(await store.transaction((tx) => tx.runByIdempotencyKey("key-1"))).toEqual(r2);
      expect(await store.transaction((tx) => tx.getVisit({ run_id: "r1", node_id: "b", visit: 1 }))).toEqual(b2);
    });

    it("writes a whole batch at once, and reads the runs it locks with its BEGIN", async () => {
      const store = await open(freshSchema());
      await store.putWorkflow("wf", "hash-1", WORKFLOW, NOW);
      await store.transaction(async (tx) => {
        await writeRows(tx, { insertRuns: [newRun("r1")] });
        await writeRows(tx, { insertVisits: [newVisit("r1", "a")] });
      });
      // A loop-back's shape: the old visit updated, a new one inserted; and a new run with its visit.
      const r1: Run = { ...newRun("r1"), needs_attention: true, updated_at: NOW + 5 };
      const old: Visit = { ...newVisit("r1", "a"), state: "SUCCEEDED", is_current: false };
      const again: Visit = { ...newVisit("r1", "a"), visit: 2, execution_id: "r1:a:2" };
      const r2: Run = { ...newRun("r2"), status: "RUNNING" };
      const events = await store.transaction(
        async (tx) => {
          const [locked] = (await tx.loadRuns(["r1"])) as LoadedRun[];
          expect(locked?.visits.map((v) => [v.node_id, v.visit])).toEqual([["a", 1]]);
          const written = await tx.write({
            insertRuns: [r2],
            // A run the batch inserts goes in as it is; its update is the same row.
            updateRuns: [r1, r2],
            updateVisits: [old],
            insertVisits: [again, newVisit("r2", "a")],
            compensations: [newCompensation("r1", 1, "a")],
            events: [event("r1", "node.ready", "a"), event("r2", "run.started", null)],
            notify: [{ agentType: "writer", runIds: ["r2"] }],
          });
          // r1's row and visits changed: its revision moved (to 2: its visit went in by a write of
          // its own, after the run's); r2 went in with this batch, at revision 0.
          expect(written.revisions).toEqual(new Map([["r1", 2]]));
          return written.events;
        },
        { lock: ["r1", "missing"] },
      );
      expect(events.map((e) => e.type)).toEqual(["node.ready", "run.started"]);
      expect(events[1]!.seq).toBeGreaterThan(events[0]!.seq);
      expect(await store.getRun("r1")).toEqual(r1);
      expect(await store.getRun("r2")).toEqual(r2);
      expect((await store.listVisits("r1")).map((v) => [v.visit, v.state, v.is_current])).toEqual([
        [1, "SUCCEEDED", false],
        [2, "PENDING", true],
      ]);
      expect((await store.readRun("r1"))?.compensations).toHaveLength(1);
      expect(await store.listEvents("r2")).toEqual([events[1]]);
    });

    it("writes text with quotes, backslashes, braces and commas exactly", async () => {
      const store = await open(freshSchema());
      await store.putWorkflow("wf", "hash-1", WORKFLOW, NOW);
      const hostile = `a"b\\c{d},e'f NULL \n\t ünï ${"x".repeat(3000)}`;
      const run: Run = { ...newRun("r1"), idempotency_key: "NULL", input: { hostile } };
      const v: Visit = { ...newVisit("r1", "a"), agent_type: hostile, payload: hostile };
      await store.transaction((tx) =>
        tx.write({
          ...EMPTY_BATCH,
          insertRuns: [run],
          insertVisits: [v],
          events: [event("r1", "node.ready", "a", { hostile })],
        }),
      );
      expect(await store.getRun("r1")).toEqual(run);
      expect(await store.listVisits("r1")).toEqual([v]);
      expect((await store.listEvents("r1"))[0]?.data).toEqual({ hostile });
    });

    it("rolls back a transaction whose lock fails in BEGIN's round trip, and the connection serves the next", async () => {
      const schema = freshSchema();
      const a = await open(schema);
      const b = await open(schema, {
        url: urlWith({ application_name: `${schema}_b`, options: "-c lock_timeout=100" }),
        poolSize: 2,
      });
      await readyRuns(a, ["r1", "r2"]);
      const held = await holdRuns(a, ["r1"]);
      await expect(b.transaction(async () => "never", { lock: ["r1"] })).rejects.toThrow(/lock timeout/);
      // Every pooled connection of b is usable: no transaction was left open and aborted on one.
      for (let i = 0; i < 4; i++) {
        expect(await b.transaction(async (tx) => (await tx.loadRuns(["r2"])).length, { lock: ["r2"] })).toBe(1);
      }
      await held.release();
    });

    it("locks due schedules SKIP LOCKED: another engine's sweep skips one being fired, a put waits for it", async () => {
      const schema = freshSchema();
      const a = await open(schema);
      const b = await open(schema, { url: urlWith({ application_name: `${schema}_b` }) });
      const schedule = (schedule_id: string, next_fire_at: number | null): Schedule => ({
        schedule_id,
        workflow_id: "wf",
        version: null,
        cron: "* * * * *",
        timezone: "UTC",
        input: { n: 1 },
        overlap: "skip",
        catchup: "latest",
        catchup_limit: 100,
        paused: next_fire_at === null,
        next_fire_at,
        last_slot_at: null,
        last_run_id: null,
        scope: null,
        created_at: NOW,
        updated_at: NOW,
      });
      await a.transaction(async (tx) => {
        expect(await tx.writeSchedule(schedule("s1", NOW - 1))).toBe(true);
        expect(await tx.writeSchedule(schedule("s1", NOW - 1))).toBe(false);
        await tx.writeSchedule(schedule("s2", NOW));
        await tx.writeSchedule(schedule("later", NOW + 60_000));
        await tx.writeSchedule(schedule("paused", null));
      });
      const held = deferred();
      const release = deferred();
      const firing = a.transaction(async (tx) => {
        const due = await tx.dueSchedules(NOW, 1);
        held.resolve();
        await release.promise;
        for (const s of due) {
          await tx.advanceSchedule(s.schedule_id, {
            next_fire_at: NOW + 60_000,
            last_slot_at: NOW - 1,
            last_run_id: "r1",
            updated_at: NOW,
          });
        }
        return due.map((s) => s.schedule_id);
      });
      await held.promise;
      // s1 is being fired: skipped, not waited for.
      expect((await b.transaction((tx) => tx.dueSchedules(NOW, 10))).map((s) => s.schedule_id)).toEqual(["s2"]);
      const put = b.transaction((tx) => tx.lockSchedule("s1"));
      await waitingForLock(`${schema}_b`);
      release.resolve();
      expect(await firing).toEqual(["s1"]);
      expect(await put).toMatchObject({ next_fire_at: NOW + 60_000, last_run_id: "r1", input: { n: 1 } });
      expect((await a.listSchedules({})).map((s) => s.schedule_id)).toEqual(["later", "paused", "s1", "s2"]);
      expect((await a.listSchedules({ workflow_ids: [] })).length).toBe(0);
      expect(await a.transaction((tx) => tx.nextDue(NOW + 1))).toBe(NOW);
      expect(await a.transaction((tx) => tx.deleteSchedule("s2"))).toBe(true);
      expect(await a.transaction((tx) => tx.deleteSchedule("s2"))).toBe(false);
      expect(await a.getSchedule("s2")).toBeNull();
    });

    it("numbers a batch of events in the batch's order", async () => {
      const store = await open(freshSchema());
      const batch = Array.from({ length: 300 }, (_, i) => event("r1", "node.ready", "a", { i }));
      const { events: stored } = await store.transaction((tx) => writeRows(tx, { events: batch }));
      const listed = await store.listEvents("r1");
      expect(listed).toEqual(stored);
      expect(listed.map((e) => e.data.i)).toEqual(batch.map((_, i) => i));
    });

    it("pages runs newest first with the before cursor, and filters them", async () => {
      const store = await open(freshSchema());
      await store.putWorkflow("wf", "hash-1", WORKFLOW, NOW);
      await store.transaction(async (tx) => {
        for (let i = 0; i < 5; i++) {
          await writeRows(tx, {
            insertRuns: [newRun(`r${i}`, { created_at: NOW + i, status: i % 2 ? "FAILED" : "RUNNING" })],
          });
        }
      });
      const first = await store.listRuns({ limit: 2 });
      expect(first.map((r) => r.run_id)).toEqual(["r4", "r3"]);
      const next = await store.listRuns({ limit: 2, before: "r3" });
      expect(next.map((r) => r.run_id)).toEqual(["r2", "r1"]);
      expect((await store.listRuns({ status: "FAILED" })).map((r) => r.run_id)).toEqual(["r3", "r1"]);
      expect(await store.listRuns({ workflow_id: "other" })).toEqual([]);
    });

    it("finds what fell due and when the next thing does", async () => {
      const store = await open(freshSchema());
      await store.putWorkflow("wf", "hash-1", WORKFLOW, NOW);
      await store.transaction(async (tx) => {
        await writeRows(tx, { insertRuns: [newRun("r1")] });
        await writeRows(tx, { insertRuns: [newRun("r2", { deadline_at: NOW - 1 })] });
        await writeRows(tx, { insertRuns: [newRun("r3", { status: "COMPENSATING", deadline_at: NOW + 500 })] });
        await writeRows(tx, {
          insertVisits: [
            newVisit("r1", "unresolved", { ready_at: NOW - 5 }),
            newVisit("r1", "later", { ready_at: NOW + 100, payload: {} }),
            newVisit("r1", "running", { state: "RUNNING", lease_expires_at: NOW - 1, holder: "e1" }),
            newVisit("r1", "running2", { state: "RUNNING", lease_expires_at: NOW + 50, holder: "e2" }),
            newVisit("r1", "review", { state: "IN_REVIEW", lease_expires_at: NOW - 2, agent_type: "human_review" }),
            newVisit("r1", "nap", { state: "WAITING", lease_expires_at: NOW - 3, agent_type: "sleep" }),
            newVisit("r1", "nap2", { state: "WAITING", lease_expires_at: NOW + 10, agent_type: "sleep" }),
          ],
        });
        await writeRows(tx, { compensations: [newCompensation("r3", 1, "x", { ready_at: NOW + 20 })] });
      });
      const due = await store.transaction(async (tx) => ({
        unresolved: await tx.unresolved(NOW, 10),
        expiredAttempts: await tx.expiredAttempts(NOW, 10),
        heldBy: await tx.attemptsHeldBy(["e2", "e9"], 10),
        heldByNobody: await tx.attemptsHeldBy([], 10),
        expiredHolds: await tx.expiredHolds(NOW, 10),
        expiredRuns: await tx.expiredRuns(NOW, 10),
        compensating: await tx.compensatingRuns(10),
        nextDue: await tx.nextDue(NOW),
      }));
      expect(due).toEqual({
        unresolved: [{ run_id: "r1", node_id: "unresolved", visit: 1 }],
        expiredAttempts: [{ run_id: "r1", node_id: "running", visit: 1 }],
        heldBy: [{ run_id: "r1", node_id: "running2", visit: 1 }],
        heldByNobody: [],
        // Reviews and waits, oldest due first.
        expiredHolds: [
          { run_id: "r1", node_id: "nap", visit: 1 },
          { run_id: "r1", node_id: "review", visit: 1 },
        ],
        expiredRuns: ["r2"],
        compensating: ["r3"],
        // The earliest of everything, past or future (leases count even when past).
        nextDue: NOW - 3,
      });
    });

    it("keeps reading and locking runs after a newer Skein added a column", async () => {
      const schema = freshSchema();
      const store = await open(schema, { poolSize: 2 });
      await readyRuns(store, ["r1"]);
      const before = await store.getRun("r1");
      await store.transaction((tx) => tx.loadRun("r1"));
      for (const table of ["runs", "visits"]) {
        await admin.query(`ALTER TABLE ${pg.escapeIdentifier(schema)}.${table} ADD COLUMN later_feature int`);
      }
      expect(await store.getRun("r1")).toEqual(before);
      expect(((await store.transaction((tx) => tx.loadRun("r1"))) as LoadedRun | null)?.run).toEqual(before);
      expect(Object.keys((await store.listVisits("r1"))[0] ?? {})).not.toContain("later_feature");
    });

    it("refuses a store transaction used after it ended", async () => {
      const store = await open(freshSchema());
      let kept: StoreTx | undefined;
      await store.transaction(async (tx) => {
        kept = tx;
      });
      await expect(kept!.compensatingRuns(1)).rejects.toThrow(/after it ended/);
    });
  });

  describe("several engines", () => {
    it("claims at most `limit` ready visits, oldest first, skipping runs another transaction holds", async () => {
      const schema = freshSchema();
      const [a, b] = await Promise.all([open(schema), open(schema)]);
      await readyRuns(a, ["r1", "r2", "r3", "r4", "r5"]);
      expect(await a.transaction((tx) => tx.claimable("writer", NOW, 3))).toEqual(
        ["r1", "r2", "r3"].map((run_id) => ({ run_id, node_id: "a", visit: 1 })),
      );

      const held = await holdRuns(b, ["r2", "r1"]);
      const claimed = await a.transaction((tx) => tx.claimable("writer", NOW, 2));
      expect(claimed.map((k) => k.run_id)).toEqual(["r3", "r4"]);
      expect(await a.transaction((tx) => tx.claimable("writer", NOW, 10))).toHaveLength(3);
      expect(await a.transaction((tx) => tx.claimable("reviewer", NOW, 10))).toEqual([]);
      expect(await a.transaction((tx) => tx.claimable("writer", NOW - 99, 10))).toHaveLength(0);
      await held.release();
      expect(await a.transaction((tx) => tx.claimable("writer", NOW, 10))).toHaveLength(5);
    });

    it("makes loadRun wait for a run another store locked, and see what it committed", async () => {
      const schema = freshSchema();
      const [a, b] = await Promise.all([
        open(schema),
        open(schema, { url: urlWith({ application_name: `${schema}_b` }) }),
      ]);
      await readyRuns(a, ["r1"]);
      const held = await holdRuns(a, ["r1"], async (tx) => {
        // Written under the lock: the waiting reader must see both, the visit without any run update.
        await writeRows(tx, { updateRuns: [newRun("r1", { needs_attention: true })] });
        await writeRows(tx, { insertVisits: [newVisit("r1", "b")] });
      });
      expect(await b.transaction((tx) => tx.loadRun("r1", { skipLocked: true }))).toBeNull();

      const loading = b.transaction((tx) => tx.loadRun("r1"));
      await waitingForLock(`${schema}_b`);
      await held.release();
      const loaded = (await loading) as LoadedRun | null;
      expect(loaded?.run.needs_attention).toBe(true);
      expect(loaded?.visits.map((v) => v.node_id).sort()).toEqual(["a", "b"]);
      expect(await b.transaction((tx) => tx.loadRun("r1", { skipLocked: true }))).not.toBeNull();
      expect(await b.transaction((tx) => tx.loadRun("missing"))).toBeNull();
    });

    it("delivers a batch's notify to another store's listener at commit, not before, with its run ids", async () => {
      const schema = freshSchema();
      const [a, b, c] = await Promise.all([open(schema), open(schema), open(schema)]);
      const heard: ReadyNotice[] = [];
      const waiters: { type: string; resolve: () => void }[] = [];
      const hear = (type: string) =>
        new Promise<void>((resolve) => {
          if (heard.some((n) => n.agentType === type)) resolve();
          else waiters.push({ type, resolve });
        });
      b.onReady((notice) => {
        heard.push(notice);
        for (const w of waiters.filter((w) => w.type === notice.agentType)) w.resolve();
      });
      await hear("*"); // listening

      const many = Array.from({ length: 101 }, (_, i) => `run-${i}`);
      const committed = a.transaction(async (tx) => {
        const writer = { agentType: "writer", runIds: ["r1", "r2"] };
        await tx.write({ ...EMPTY_BATCH, notify: [writer, writer, { agentType: "reviewer", runIds: many }] });
        // A notification committed after ours was queued arrives; ours is not sent yet. (From a
        // third store: a store does not hear its own.)
        await c.transaction((other) => other.write({ ...EMPTY_BATCH, notify: [{ agentType: "marker", runIds: [] }] }));
        await hear("marker");
        expect(heard.map((n) => n.agentType)).not.toContain("writer");
      });
      await committed;
      await Promise.all([hear("writer"), hear("reviewer")]);
      // The same notice twice is delivered once; too many runs to name: look in the database.
      expect(heard.filter((n) => n.agentType !== "*")).toEqual([
        { agentType: "marker", runIds: [] },
        { agentType: "writer", runIds: ["r1", "r2"] },
        { agentType: "reviewer", runIds: [] },
      ]);
      // Its own notices a store leaves out (its engine knows what it made ready): one of b's,
      // then one of c's; when c's arrives, b's would have.
      await b.transaction((tx) => tx.write({ ...EMPTY_BATCH, notify: [{ agentType: "own", runIds: [] }] }));
      await c.transaction((tx) => tx.write({ ...EMPTY_BATCH, notify: [{ agentType: "after", runIds: [] }] }));
      await hear("after");
      expect(heard.map((n) => n.agentType)).not.toContain("own");
    });

    it("locks and reads the runs to try as it begins, leaving out those another transaction holds", async () => {
      const schema = freshSchema();
      const [a, b] = await Promise.all([open(schema), open(schema)]);
      await readyRuns(a, ["held", "free", "input"]);
      const holding = deferred();
      const release = deferred();
      const held = a.transaction(async (tx) => {
        await tx.loadRun("held");
        holding.resolve();
        await release.promise;
      });
      await holding.promise;
      const tried = await b.transaction(
        async (tx) => {
          const runs = (await tx.tryLocked()) as LoadedRun[];
          // The run tried and not locked is not handed out as locked either.
          return { tried: runs.map((r) => r.run.run_id), inputs: (await tx.loadRuns(["input"])).length };
        },
        { lock: ["input"], tryLock: ["held", "free", "input", "missing"] },
      );
      release.resolve();
      await held;
      expect(tried).toEqual({ tried: ["free"], inputs: 1 });
    });

    it("listens again after its connection is killed, and says `*`", async () => {
      const schema = freshSchema();
      const [a, b] = await Promise.all([open(schema), open(schema)]);
      let stars = 0;
      let onStar = deferred();
      const ready = deferred();
      b.onReady(({ agentType }) => {
        if (agentType === "*") {
          stars += 1;
          onStar.resolve();
        } else if (agentType === "writer") ready.resolve();
      });
      await onStar.promise;
      onStar = deferred();
      const { rows } = await admin.query(
        `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
          WHERE application_name = $1 AND query LIKE 'LISTEN%'`,
        [schema],
      );
      expect(rows).toHaveLength(1);
      await onStar.promise;
      expect(stars).toBe(2);
      await a.transaction((tx) => tx.write({ ...EMPTY_BATCH, notify: [{ agentType: "writer", runIds: [] }] }));
      await ready.promise;
    });

    it("gives each dead engine to exactly one of two engines taking them at once", async () => {
      const schema = freshSchema();
      const [a, b] = await Promise.all([
        open(schema),
        open(schema, { url: urlWith({ application_name: `${schema}_b` }) }),
      ]);
      const engine = (engine_id: string, heartbeat_at: number) => ({
        engine_id,
        host: "h",
        pid: 1,
        started_at: heartbeat_at,
        heartbeat_at,
      });
      expect(await a.registerEngine(engine("dead-busy", NOW - 60_000), NOW - 120_000)).toEqual([]);
      expect(await a.registerEngine(engine("dead-idle", NOW - 60_000), NOW - 120_000)).toEqual([]);
      await readyRuns(a, ["r1"]);
      await a.transaction((tx) =>
        writeRows(tx, {
          updateVisits: [newVisit("r1", "a", { state: "RUNNING", holder: "dead-busy", lease_expires_at: NOW })],
        }),
      );

      const taken = deferred();
      const release = deferred();
      const first = a.transaction(async (tx) => {
        const dead = await tx.takeDeadEngines("a", NOW - 30_000);
        taken.resolve();
        await release.promise;
        return dead;
      });
      await taken.promise;
      const second = b.transaction((tx) => tx.takeDeadEngines("b", NOW - 30_000));
      await waitingForLock(`${schema}_b`);
      release.resolve();
      expect(await first).toEqual(["dead-busy"]);
      expect(await second).toEqual([]);
      const { rows } = await admin.query(
        `SELECT engine_id, stopped_at FROM ${pg.escapeIdentifier(schema)}.engines ORDER BY engine_id`,
      );
      expect(rows).toEqual([
        { engine_id: "dead-busy", stopped_at: String(NOW) },
        { engine_id: "dead-idle", stopped_at: String(NOW) },
      ]);
    });

    it("returns from registerEngine the stale engines that still hold attempts", async () => {
      const schema = freshSchema();
      const store = await open(schema);
      const engine = (engine_id: string, heartbeat_at: number) => ({
        engine_id,
        host: "h",
        pid: 1,
        started_at: heartbeat_at,
        heartbeat_at,
      });
      await store.registerEngine(engine("old", NOW - 60_000), NOW - 90_000);
      await readyRuns(store, ["r1"]);
      await store.transaction((tx) =>
        writeRows(tx, {
          updateVisits: [newVisit("r1", "a", { state: "RUNNING", holder: "old", lease_expires_at: NOW })],
        }),
      );
      expect(await store.registerEngine(engine("new", NOW), NOW - 30_000)).toEqual(["old"]);
      expect(await store.registerEngine(engine("newer", NOW), NOW - 30_000)).toEqual([]);
    });

    it("leaves an engine that stopped with attempts still running to the next engine", async () => {
      const schema = freshSchema();
      const store = await open(schema);
      const engine = (engine_id: string) => ({ engine_id, host: "h", pid: 1, started_at: NOW, heartbeat_at: NOW });
      await store.registerEngine(engine("busy"), NOW - 30_000);
      await store.registerEngine(engine("idle"), NOW - 30_000);
      await readyRuns(store, ["r1"]);
      await store.transaction((tx) =>
        writeRows(tx, {
          updateVisits: [newVisit("r1", "a", { state: "RUNNING", holder: "busy", lease_expires_at: NOW + 60_000 })],
        }),
      );
      await store.stopEngine("busy", NOW);
      await store.stopEngine("idle", NOW);
      // Both heartbeats are fresh, but the busy one is gone and left an attempt behind.
      expect(await store.registerEngine(engine("next"), NOW - 30_000)).toEqual(["busy"]);
      const { rows } = await admin.query(
        `SELECT engine_id, stopped_at FROM ${pg.escapeIdentifier(schema)}.engines ORDER BY engine_id`,
      );
      expect(rows.map((r) => [r.engine_id, r.stopped_at])).toEqual([
        ["busy", String(NOW)],
        ["idle", String(NOW)],
        ["next", null],
      ]);
    });

    it("holds each engine's liveness lock on its listener's connection, and takes it again after a reconnect", async () => {
      const schema = freshSchema();
      const store = await open(schema);
      await store.registerEngine({ engine_id: "e1", host: "h", pid: 1, started_at: NOW, heartbeat_at: NOW }, 0);
      const holder = async () => {
        const { rows } = await admin.query<{ pid: number }>(
          `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = $1::oid
              AND objid = hashtext($2)::oid AND objsubid = 2`,
          [ENGINE_LOCK_NAMESPACE, `${schema}.e1`],
        );
        return rows.map((r) => r.pid);
      };
      const [first] = await holder();
      expect(first).toBeTypeOf("number");
      // The listener's connection is cut: it reconnects, takes the lock again, then tells its listeners `*`.
      const back = deferred();
      store.onReady((n) => {
        if (n.agentType === "*") back.resolve();
      });
      await admin.query("SELECT pg_terminate_backend($1)", [first]);
      await back.promise;
      const again = await holder();
      expect(again).toHaveLength(1);
      expect(again[0]).not.toBe(first);
    });

    it("takes an engine whose lock stayed free for the grace as dead, never one that takes its lock back", async () => {
      const schema = freshSchema();
      // A clock of today's time: heartbeats newer than the server's start, as with the database's clock.
      let t = Date.now();
      const today = { now: () => t };
      const [a, live, gone] = await Promise.all([
        open(schema, { clock: today }),
        open(schema, { clock: today, url: urlWith({ application_name: `${schema}_live` }) }),
        open(schema, { clock: today, url: urlWith({ application_name: `${schema}_gone` }) }),
      ]);
      const engine = (engine_id: string) => ({ engine_id, host: "h", pid: 1, started_at: t, heartbeat_at: t });
      for (const [store, id] of [
        [a, "a"],
        [live, "live"],
        [gone, "gone"],
      ] as const) {
        expect(await store.registerEngine(engine(id), t - 30_000)).toEqual([]);
      }
      await readyRuns(a, ["r1", "r2"]);
      await a.transaction((tx) =>
        writeRows(tx, {
          updateVisits: [
            newVisit("r1", "a", { state: "RUNNING", holder: "live", lease_expires_at: t + 600_000 }),
            newVisit("r2", "a", { state: "RUNNING", holder: "gone", lease_expires_at: t + 600_000 }),
          ],
        }),
      );
      const take = () => a.transaction((tx) => tx.takeDeadEngines("a", t - 30_000));
      expect(await take()).toEqual([]);

      // "gone" ends without marking itself stopped (as a killed process): its lock goes with its
      // connection. "live" has its listener's connection cut: it reconnects and locks again.
      const back = deferred();
      live.onReady((n) => {
        if (n.agentType === "*") back.resolve();
      });
      await gone.close();
      await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = hashtext($1)::oid",
        [`${schema}.live`],
      );
      expect(await take()).toEqual([]); // seen free: not yet dead
      await back.promise;
      t += FREE_LOCK_GRACE_MS;
      expect(await take()).toEqual(["gone"]);
      expect(await take()).toEqual([]);
      const { rows } = await admin.query(
        `SELECT engine_id, stopped_at IS NOT NULL AS stopped FROM ${pg.escapeIdentifier(schema)}.engines ORDER BY engine_id`,
      );
      expect(rows).toEqual([
        { engine_id: "a", stopped: false },
        { engine_id: "gone", stopped: true },
        { engine_id: "live", stopped: false },
      ]);
    });

    it("judges time by the database's clock when given none", async () => {
      const schema = freshSchema();
      const store = await open(schema, { clock: undefined });
      const times = await store.transaction(async (tx) => [await tx.now(), await tx.now()]);
      expect(times[0]).toBe(times[1]);
      expect(Math.abs((times[0] ?? 0) - Date.now())).toBeLessThan(60_000);
      await store.registerEngine({ engine_id: "e", host: "h", pid: 1, started_at: 0, heartbeat_at: 0 }, -1);
      await store.heartbeat("e", 0);
      const { rows } = await admin.query(`SELECT heartbeat_at FROM ${pg.escapeIdentifier(schema)}.engines`);
      expect(Number(rows[0].heartbeat_at)).toBeGreaterThan(0);
      expect(await (await open(schema)).transaction((tx) => tx.now())).toBe(NOW);
    });
  });

  describe("transactions that trust the runs they hold (one round trip a step)", () => {
    const revisionOf = async (store: PostgresStore, runId: string) =>
      ((await store.transaction((tx) => tx.loadRun(runId))) as LoadedRun).revision;
    const trusting = (store: PostgresStore, runId: string, revision: number, fn: (tx: StoreTx) => Promise<unknown>) =>
      store.transaction(
        async (tx) => {
          // Answered from what the caller holds: nothing is read.
          expect(await tx.loadRuns([runId], new Map([[runId, revision]]))).toEqual([
            { run_id: runId, unchanged: true },
          ]);
          return fn(tx);
        },
        { lock: [runId], known: new Map([[runId, revision]]) },
      );

    it("commits when every run is still at its known revision, and writes nothing when one changed", async () => {
      const schema = freshSchema();
      const [a, b] = await Promise.all([
        open(schema),
        open(schema, { url: urlWith({ application_name: `${schema}_b` }) }),
      ]);
      await readyRuns(a, ["r1"]);
      const known = await revisionOf(a, "r1");
      const running = newVisit("r1", "a", { state: "RUNNING", attempt: 1, holder: "e1", payload: { n: 0 } });
      const written = (await trusting(a, "r1", known, (tx) =>
        tx.write({ ...EMPTY_BATCH, updateVisits: [running] }, { last: true }),
      )) as Written;
      expect(written.revisions).toEqual(new Map([["r1", known + 1]]));

      // Another engine holds the run and writes it: the trusting transaction's check waits for
      // its lock, then sees the revision it committed.
      const held = await holdRuns(b, ["r1"], async (tx) => {
        await writeRows(tx, { updateRuns: [newRun("r1", { needs_attention: true })] });
      });
      const stale = trusting(a, "r1", known + 1, (tx) =>
        tx.write({ ...EMPTY_BATCH, events: [event("r1", "node.succeeded", "a")] }, { last: true }),
      );
      await waitingForLock(schema);
      await held.release();
      await expect(stale).rejects.toBeInstanceOf(StaleRunsError);
      await expect(stale).rejects.toThrow(/run r1 changed since this engine read it; nothing was written/);
      expect(await a.listEvents("r1")).toEqual([]);
      expect((await a.getRun("r1"))?.needs_attention).toBe(true);
      // A run gone since is stale too; and the connection serves the next transaction.
      await expect(trusting(a, "gone", 1, async () => undefined)).rejects.toBeInstanceOf(StaleRunsError);
      expect(await revisionOf(a, "r1")).toBe(known + 2);
    });

    it("knows that a transaction the server ended before its COMMIT did not commit", async () => {
      const schema = freshSchema();
      const [a, b] = await Promise.all([
        open(schema),
        open(schema, { url: urlWith({ application_name: `${schema}_b` }) }),
      ]);
      await readyRuns(a, ["r1"]);
      const known = await revisionOf(a, "r1");
      const held = await holdRuns(b, ["r1"]);
      // BEGIN, the check, the write and COMMIT go in one round trip; the check waits for the
      // lock, and the server ends the connection there (a failover, an administrator).
      const cut = trusting(a, "r1", known, (tx) =>
        tx.write({ ...EMPTY_BATCH, events: [event("r1", "node.succeeded", "a")] }, { last: true }),
      );
      await waitingForLock(schema);
      await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [schema]);
      const error = await cut.then(
        () => null,
        (e: unknown) => e,
      );
      await held.release();
      // Its COMMIT was never run: not "may have committed", which would make the engine give
      // back attempts and keep callers waiting for nothing.
      expect(error).toBeInstanceOf(DatabaseError);
      expect(error).toMatchObject({ transient: true, ambiguous: false });
      expect(await a.listEvents("r1")).toEqual([]);
      expect(await revisionOf(a, "r1")).toBe(known);
    });

    it("judges due times by its estimate of the database's clock, which the check refuses when off", async () => {
      const schema = freshSchema();
      const store = await open(schema, { clock: undefined });
      await readyRuns(store, ["r1"]);
      const dbNow = async () =>
        Number(
          (await admin.query("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS t")).rows[0].t,
        );
      const before = await dbNow();
      const times: number[] = [];
      for (let i = 0; i < 3; i++) {
        const known = await revisionOf(store, "r1");
        await trusting(store, "r1", known, async (tx) => {
          times.push((await tx.now()) ?? 0);
          return tx.write(
            { ...EMPTY_BATCH, updateRuns: [newRun("r1", { updated_at: times[i] ?? 0 })] },
            { last: true },
          );
        });
      }
      const after = await dbNow();
      expect([...times].sort((x, y) => x - y)).toEqual(times);
      expect(times[0]).toBeGreaterThanOrEqual(before - TOLERANCE_MS);
      expect(times[2]).toBeLessThanOrEqual(after);
      // The check itself: an estimate further off than the tolerance aborts the transaction.
      const check = async (estimate: number) => {
        await admin.query(`BEGIN; SET LOCAL search_path TO ${pg.escapeIdentifier(schema)}`);
        try {
          return await admin.query("SELECT skein_lock_trusted('{}'::text[], '{}'::bigint[], $1, $2) AS now", [
            estimate,
            TOLERANCE_MS,
          ]);
        } finally {
          await admin.query("ROLLBACK");
        }
      };
      await expect(check(before - 60_000)).rejects.toMatchObject({ code: "SK409" });
      await expect(check(before - 60_000)).rejects.toThrow(/estimate of the database's clock is \d+ ms off/);
      expect(Number((await check(await dbNow())).rows[0].now)).toBeGreaterThanOrEqual(before);
    });
  });

  describe("failures", () => {
    it("says what to do when the server is unreachable", async () => {
      const opening = PostgresStore.open({ url: "postgres://postgres@127.0.0.1:1/test", schema: freshSchema() });
      await expect(opening).rejects.toThrow(DatabaseError);
      await expect(opening).rejects.toThrow(
        /cannot connect to PostgreSQL at postgres:\/\/postgres@127\.0\.0\.1:1\/test .*check that the server is running/,
      );
    });

    it("says what to do when the database does not exist", async () => {
      const u = new URL(PG_URL);
      u.pathname = "/skein_no_such_database";
      const opening = PostgresStore.open({ url: u.toString(), schema: freshSchema() });
      await expect(opening).rejects.toThrow(DatabaseError);
      await expect(opening).rejects.toThrow(/does not exist .*create it \(createdb\) or fix the database name/);
    });

    it("says what to do when the login is refused", async () => {
      const u = new URL(PG_URL);
      u.username = "skein_no_such_role";
      u.password = "secret";
      const opening = PostgresStore.open({ url: u.toString(), schema: freshSchema() });
      await expect(opening).rejects.toThrow(/refused the login .*check the user and password/);
      await expect(opening).rejects.not.toThrow(/secret/);
    });

    it("reports a connection lost mid-transaction as transient, and works on", async () => {
      const schema = freshSchema();
      const store = await open(schema);
      const failed = store.transaction(async (tx) => {
        await tx.compensatingRuns(1); // the transaction is open on the server once a statement went
        await admin.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE application_name = $1 AND state = 'idle in transaction'`,
          [schema],
        );
        await tx.compensatingRuns(1);
      });
      await expect(failed).rejects.toThrow(/lost the connection to PostgreSQL .*during a transaction/);
      await expect(failed).rejects.toMatchObject({ transient: true });
      expect(await store.transaction((tx) => tx.compensatingRuns(1))).toEqual([]);
    });

    it("refuses work after close, once the transactions asked for before it are done", async () => {
      const store = await open(freshSchema());
      const before = store.transaction((tx) => tx.compensatingRuns(1));
      const closing = store.close();
      expect(await before).toEqual([]);
      await closing;
      await expect(store.getRun("r1")).rejects.toThrow(/is closed/);
      await expect(store.transaction((tx) => tx.compensatingRuns(1))).rejects.toThrow(DatabaseError);
    });

    it("reports a deadlock as transient", async () => {
      const schema = freshSchema();
      const fast = urlWith({ application_name: schema, options: "-c deadlock_timeout=10ms" });
      const [a, b] = await Promise.all([open(schema, { url: fast }), open(schema, { url: fast })]);
      await readyRuns(a, ["r1", "r2"]);
      const both = deferred();
      let arrived = 0;
      const cross = (store: PostgresStore, first: string, second: string) =>
        store.transaction(async (tx) => {
          await tx.loadRun(first);
          if (++arrived === 2) both.resolve();
          await both.promise;
          await tx.loadRun(second);
        });
      const results = await Promise.allSettled([cross(a, "r1", "r2"), cross(b, "r2", "r1")]);
      const failures = results.filter((r) => r.status === "rejected").map((r) => r.reason);
      expect(failures).toHaveLength(1);
      expect(failures[0]).toBeInstanceOf(DatabaseError);
      expect(failures[0]).toMatchObject({ transient: true, message: expect.stringMatching(/deadlock detected/) });
    });

    it("reports two runs started under one idempotency key as transient", async () => {
      const schema = freshSchema();
      const [a, b] = await Promise.all([open(schema), open(schema)]);
      await a.putWorkflow("wf", "hash-1", WORKFLOW, NOW);
      await a.transaction((tx) => writeRows(tx, { insertRuns: [newRun("r1", { idempotency_key: "k" })] }));
      const second = b.transaction((tx) => writeRows(tx, { insertRuns: [newRun("r2", { idempotency_key: "k" })] }));
      await expect(second).rejects.toMatchObject({ name: "DatabaseError", transient: true });
    });
  });
});
