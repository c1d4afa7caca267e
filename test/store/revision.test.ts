/**
 * Run revisions on both stores (a real SQLite file, a fresh PostgreSQL schema): every write of a
 * run's row, visits or compensation rows raises it (but an SQLite dispatcher's own writes of
 * visits, whose copies are the only ones), and a load of a run still at the revision
 * the caller knows reads nothing more. This is what lets an engine keep a run in memory between
 * transactions and still see every other writer's change.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Run, Visit } from "../../src/core/types.js";
import { openStore } from "../../src/engine/open-store.js";
import { ManualClock } from "../../src/index.js";
import { EMPTY_BATCH, type LoadedRun, StaleRunsError, type Store } from "../../src/store/store.js";
import { makeRun, visit } from "../core/helpers.js";
import { tempDb } from "../helpers.js";
import { describeStore, STORES, writeRows } from "./stores.js";

const NOW = Date.UTC(2026, 0, 1);
const WORKFLOW = JSON.stringify({ id: "wf", nodes: [{ node_id: "a", agent_type: "step" }] });
const ENGINE = { engine_id: "e1", host: "h", pid: process.pid, started_at: NOW, heartbeat_at: NOW };

const run = (run_id: string, overrides: Partial<Run> = {}): Run =>
  makeRun({
    run_id,
    workflow_id: "wf",
    input: null,
    created_at: NOW,
    updated_at: NOW,
    deadline_at: NOW + 1e6,
    ...overrides,
  });
const visitOf = (run_id: string, overrides: Partial<Visit> = {}): Visit =>
  visit("a", "PENDING", { run_id, created_at: NOW, is_current: true, ...overrides });

for (const { name: kind, open: openStore } of STORES) {
  describe(`run revisions (${kind})`, () => {
    const stores: Store[] = [];
    afterEach(async () => {
      await Promise.all(stores.splice(0).map((s) => s.close()));
    });

    async function open(): Promise<Store> {
      const store = await openStore({ clock: new ManualClock(NOW) });
      stores.push(store);
      // As an engine opens it (on SQLite, the one holding the file's engine lock).
      await store.registerEngine(ENGINE, NOW - 30_000);
      await store.putWorkflow("wf", "hash-1", WORKFLOW, NOW);
      return store;
    }

    const revisionOf = async (store: Store, runId: string) =>
      ((await store.transaction((tx) => tx.loadRun(runId))) as LoadedRun).revision;

    it("starts a run at 0 and raises it with each write of its row, its visits or its compensation rows", async () => {
      const store = await open();
      const inserted = await store.transaction((tx) =>
        tx.write({ ...EMPTY_BATCH, insertRuns: [run("r1"), run("r2")], insertVisits: [visitOf("r2")] }),
      );
      // A run the batch inserts keeps the revision it went in with (SQLite raises it for its visits).
      expect(inserted.revisions.get("r1")).toBeUndefined();
      const r2 = await revisionOf(store, "r2");
      expect(inserted.revisions.get("r2") ?? 0).toBe(r2);
      expect(await revisionOf(store, "r1")).toBe(0);

      const byRow = await store.transaction((tx) =>
        tx.write({ ...EMPTY_BATCH, updateRuns: [run("r1", { needs_attention: true })] }),
      );
      expect(byRow.revisions).toEqual(new Map([["r1", 1]]));
      const byVisit = await store.transaction((tx) =>
        tx.write({ ...EMPTY_BATCH, updateVisits: [visitOf("r2", { state: "RUNNING", attempt: 1 })] }),
      );
      expect(byVisit.revisions).toEqual(new Map([["r2", r2 + 1]]));
      const events = await store.transaction((tx) =>
        tx.write({
          ...EMPTY_BATCH,
          events: [{ run_id: "r1", type: "node.ready", node_id: "a", visit: 1, trace_id: "t", at: NOW, data: {} }],
        }),
      );
      // Events are not part of a loaded run: they leave its revision alone.
      expect(events.revisions.size).toBe(0);
      expect(await revisionOf(store, "r1")).toBe(1);
      expect(await revisionOf(store, "r2")).toBe(r2 + 1);
    });

    it("answers unchanged for a run still at the known revision, and reads it again once written", async () => {
      const store = await open();
      await store.transaction((tx) =>
        tx.write({ ...EMPTY_BATCH, insertRuns: [run("r1")], insertVisits: [visitOf("r1")] }),
      );
      const known = await revisionOf(store, "r1");
      const options = { lock: ["r1"], known: new Map([["r1", known]]) };
      expect(await store.transaction((tx) => tx.loadRuns(["r1"], options.known), options)).toEqual([
        { run_id: "r1", unchanged: true },
      ]);
      expect(await store.transaction((tx) => tx.loadRun("r1", { skipLocked: true, known }))).toEqual({
        run_id: "r1",
        unchanged: true,
      });

      // Another writer (an engine, a client) changes the visit: the revision moved, the rows are read.
      await store.transaction((tx) =>
        writeRows(tx, { updateVisits: [visitOf("r1", { state: "RUNNING", attempt: 1 })] }),
      );
      const reading = store.transaction((tx) => tx.loadRuns(["r1"], options.known), options);
      // PostgreSQL trusts a run at a known revision until the check it sends with the
      // transaction's first statement (here its COMMIT): the transaction fails, having written
      // nothing, and the caller (the dispatcher) forgets the run and reads it.
      if (!store.exclusive) await expect(reading).rejects.toBeInstanceOf(StaleRunsError);
      const [again] = (
        store.exclusive ? await reading : await store.transaction((tx) => tx.loadRuns(["r1"]), { lock: ["r1"] })
      ) as LoadedRun[];
      expect(again?.revision).toBeGreaterThan(known);
      expect(again?.visits.map((v) => v.state)).toEqual(["RUNNING"]);
      const one = (await store.transaction((tx) => tx.loadRun("r1", { known }))) as LoadedRun;
      expect(one.visits.map((v) => v.state)).toEqual(["RUNNING"]);
      // And a run's revision is never part of the run itself.
      expect(Object.keys(one.run)).not.toContain("revision");
      expect(Object.keys((await store.getRun("r1")) ?? {})).not.toContain("revision");
    });

    it("is left alone by an SQLite engine's dispatcher's own writes of visits, raised by any other's and by every write on PostgreSQL", async () => {
      const store = await open();
      await store.transaction((tx) =>
        tx.write({ ...EMPTY_BATCH, insertRuns: [run("r1")], insertVisits: [visitOf("r1")] }),
      );
      const known = await revisionOf(store, "r1");
      // The dispatcher's transaction (it passes what it knows). On SQLite one engine holds the
      // file and its copy is the one it wrote; on PostgreSQL other engines may hold copies.
      const claimed = await store.transaction(
        (tx) => tx.write({ ...EMPTY_BATCH, updateVisits: [visitOf("r1", { state: "RUNNING", attempt: 1 })] }),
        { lock: ["r1"], known: new Map([["r1", known]]) },
      );
      const afterClaim = store.exclusive ? known : known + 1;
      expect(claimed.revisions.get("r1") ?? known).toBe(afterClaim);
      expect(await revisionOf(store, "r1")).toBe(afterClaim);
      // A client's: the dispatcher's copy may be older, so it must read the run again.
      await store.transaction((tx) =>
        writeRows(tx, { updateVisits: [visitOf("r1", { state: "SUCCEEDED", attempt: 1 })] }),
      );
      const read = (await store.transaction((tx) => tx.loadRun("r1", { known: afterClaim }))) as LoadedRun;
      expect(read.revision).toBe(afterClaim + 1);
      expect(read.visits.map((v) => v.state)).toEqual(["SUCCEEDED"]);
    });
  });
}

describeStore("sqlite")("run revisions with a client beside the engine (SQLite)", () => {
  it("a client reads visits the engine wrote without raising the revision, and its own writes raise it", async () => {
    const url = tempDb("sqlite");
    const engine = await openStore(url, { clock: new ManualClock(NOW) });
    const client = await openStore(url, { clock: new ManualClock(NOW) });
    try {
      await engine.registerEngine(ENGINE, NOW - 30_000);
      await engine.putWorkflow("wf", "hash-1", WORKFLOW, NOW);
      await engine.transaction((tx) =>
        tx.write({ ...EMPTY_BATCH, insertRuns: [run("r1")], insertVisits: [visitOf("r1")] }),
      );
      // The client keeps r1 as its dispatcher does (it passes what it knows).
      const known = ((await client.transaction((tx) => tx.loadRun("r1"))) as LoadedRun).revision;
      const trusting = { lock: ["r1"], known: new Map([["r1", known]]) };
      // The engine's dispatcher claims the visit: the revision stays.
      await engine.transaction(
        (tx) => tx.write({ ...EMPTY_BATCH, updateVisits: [visitOf("r1", { state: "RUNNING", attempt: 1 })] }),
        { lock: ["r1"], known: new Map([["r1", known]]) },
      );
      const [seen] = (await client.transaction((tx) => tx.loadRuns(["r1"], trusting.known), trusting)) as LoadedRun[];
      expect(seen?.visits.map((v) => v.state)).toEqual(["RUNNING"]);

      // The client's dispatcher writes a visit: the engine must read the run again.
      const written = await client.transaction(
        (tx) => tx.write({ ...EMPTY_BATCH, updateVisits: [visitOf("r1", { state: "SUCCEEDED", attempt: 1 })] }),
        trusting,
      );
      expect(written.revisions.get("r1")).toBe(known + 1);
      const [again] = (await engine.transaction((tx) => tx.loadRuns(["r1"], trusting.known), trusting)) as LoadedRun[];
      expect(again?.visits.map((v) => v.state)).toEqual(["SUCCEEDED"]);
    } finally {
      await client.close();
      await engine.close();
    }
  });
});
