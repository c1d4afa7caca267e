/**
 * The item rows of `map` visits (DESIGN §11.1) on both stores: a real SQLite file and a fresh
 * PostgreSQL schema, each written through the store's own transactions.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Json, MapCounts, MapItem, Run, RunParent, Visit } from "../../src/core/types.js";
import { openStore as openDatabase } from "../../src/engine/open-store.js";
import { ManualClock } from "../../src/index.js";
import type { ItemKey } from "../../src/store/map-items.js";
import type { LoadedRun, MapItemUpdate, Store, VisitKey } from "../../src/store/store.js";
import { makeRun, visit } from "../core/helpers.js";
import { tempDb } from "../helpers.js";
import { STORES, writeRows } from "./stores.js";

const NOW = Date.UTC(2026, 0, 1);
const WORKFLOW = JSON.stringify({ id: "wf", nodes: [{ id: "m", agent: "map" }] });

function run(run_id: string, overrides: Partial<Run> = {}): Run {
  return makeRun({
    run_id,
    workflow_id: "wf",
    input: null,
    trace_id: "0af7651916cd43dd8448eb211c80319c",
    traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    created_at: NOW,
    updated_at: NOW,
    deadline_at: NOW + 3_600_000,
    ...overrides,
  });
}

/** Visit `visitNo` of the map node `m` in run `runId`. */
function mapVisit(runId: string, visitNo: number, overrides: Partial<Visit> = {}): Visit {
  return visit("m", "RUNNING", {
    run_id: runId,
    visit: visitNo,
    agent_type: "map",
    created_at: NOW,
    is_current: true,
    ...overrides,
  });
}

const key = (runId: string, visitNo = 1): VisitKey => ({ run_id: runId, node_id: "m", visit: visitNo });

/** A child run of item `item` of a map visit (or, without `item`, of a workflow node's attempt). */
function child(run_id: string, parent: Partial<RunParent> & { run_id: string }, overrides: Partial<Run> = {}): Run {
  return run(run_id, { parent: { node_id: "m", visit: 1, attempt: 1, depth: 1, ...parent }, ...overrides });
}

const ended = (status: Run["status"]): Partial<Run> => ({ status, ended_at: NOW + 1 });

/** The attempt fields of an item row that holds no attempts (a child run runs it, or it was not started). */
const NO_ATTEMPTS = {
  agent_type: null,
  attempt: 0,
  failures: 0,
  interruptions: 0,
  priority: 5,
  ready_at: null,
  deadline_at: null,
  lease_expires_at: null,
  holder: null,
} as const;

/** Item `index` of the visit `at` (default r1's m#1) as `insert` wrote it (its item `i<index>`), with `fields`. */
function row(index: number, fields: Partial<MapItem> = {}, at: VisitKey = key("r1")): MapItem {
  return {
    ...at,
    index,
    item: `i${index}`,
    state: "PENDING",
    child_run_id: null,
    output: null,
    error: null,
    started_at: null,
    ended_at: null,
    ...NO_ATTEMPTS,
    ...fields,
  };
}

/** Item `index` holding its own attempts, of agent type `llm` unless `fields` say otherwise. */
const agentItem = (index: number, state: MapItem["state"], fields: Partial<MapItem> = {}, at?: VisitKey) =>
  row(index, { agent_type: "llm", state, ...fields }, at);

const itemKey = (index: number, at: VisitKey = key("r1")): ItemKey => ({ ...at, index });

/** The items `i0` .. `i<n-1>`. */
const itemsOf = (n: number): Json[] => Array.from({ length: n }, (_, i) => `i${i}`);

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

for (const { name: kind, open: openStore } of STORES) {
  describe(`map items (${kind})`, () => {
    const stores: Store[] = [];

    afterEach(async () => {
      await Promise.all(stores.splice(0).map((s) => s.close()));
    });

    /** A fresh store holding run `r1` with its map visit m#1 RUNNING (and more rows when asked). */
    async function open(setup: { runs?: Run[]; visits?: Visit[] } = {}): Promise<Store> {
      const store = await openStore({ clock: new ManualClock(NOW) });
      stores.push(store);
      return seeded(store, setup);
    }

    async function seeded(store: Store, setup: { runs?: Run[]; visits?: Visit[] }): Promise<Store> {
      await store.putWorkflow("wf", "hash-1", WORKFLOW, NOW);
      await store.transaction(async (tx) => {
        await writeRows(tx, { insertRuns: [run("r1"), ...(setup.runs ?? [])] });
        await writeRows(tx, { insertVisits: setup.visits ?? [mapVisit("r1", 1)] });
      });
      return store;
    }

    async function insert(store: Store, at: VisitKey, items: Json[]) {
      return store.transaction((tx) => tx.insertMapItems(at, items, NOW, 5));
    }

    async function update(store: Store, updates: Omit<MapItemUpdate, "key">[], at = key("r1")) {
      await store.transaction((tx) => tx.updateMapItems(updates.map((u) => ({ key: at, ...u }))));
    }

    async function all(store: Store, at = key("r1")): Promise<MapItem[]> {
      return store.listMapItems(at, { after: -1, limit: 100_000 });
    }

    it("inserts 10,000 items as PENDING and reads them back by index, page by page", async () => {
      const store = await open();
      const items = Array.from({ length: 10_000 }, (_, i) => ({ n: i, name: `item ${i}`, tags: [i % 3 === 0] }));
      expect(await insert(store, key("r1"), items)).toEqual({ total: 10_000, carried: 0 });

      const read: MapItem[] = [];
      for (let after = -1; ; ) {
        const page = await store.listMapItems(key("r1"), { after, limit: 1_000 });
        if (page.length === 0) break;
        expect(page.length).toBe(1_000);
        read.push(...page);
        after = page[page.length - 1]!.index;
      }
      expect(read.map((r) => r.index)).toEqual(items.map((_, i) => i));
      expect(read.map((r) => r.item)).toEqual(items);
      expect(read[4_321]).toEqual({
        run_id: "r1",
        node_id: "m",
        visit: 1,
        index: 4_321,
        item: items[4_321],
        state: "PENDING",
        child_run_id: null,
        output: null,
        error: null,
        started_at: null,
        ended_at: null,
        ...NO_ATTEMPTS,
      });
      // Another visit's items are its own.
      expect(await store.listMapItems(key("r1", 2), { after: -1, limit: 10 })).toEqual([]);
    });

    it("keeps each item's JSON as written: key order, nesting, scalars, null", async () => {
      const store = await open();
      const items: Json[] = [{ z: 1, a: { y: [null, true] } }, "text", 3.5, null, [], false];
      await insert(store, key("r1"), items);
      const read = await all(store);
      expect(read.map((r) => JSON.stringify(r.item))).toEqual(items.map((i) => JSON.stringify(i)));
      expect(await insert(store, key("r1", 2), [])).toEqual({ total: 0, carried: 0 });
    });

    it("lists PENDING items from an index, in index order, at most the limit", async () => {
      const store = await open();
      await insert(
        store,
        key("r1"),
        Array.from({ length: 10 }, (_, i) => `i${i}`),
      );
      await update(store, [
        { index: 2, state: "RUNNING", child_run_id: "c2" },
        { index: 3, state: "SUCCEEDED", child_run_id: "c3" },
      ]);
      const pending = (from: number, limit: number) =>
        store.transaction((tx) => tx.pendingMapItems(key("r1"), from, limit));
      expect(await pending(0, 3)).toEqual([
        { index: 0, item: "i0" },
        { index: 1, item: "i1" },
        { index: 4, item: "i4" },
      ]);
      expect((await pending(5, 100)).map((p) => p.index)).toEqual([5, 6, 7, 8, 9]);
      expect(await pending(2, 1)).toEqual([{ index: 4, item: "i4" }]);
      expect(await pending(10, 5)).toEqual([]);
    });

    it("updates only the fields given, and sees each update later in the same transaction", async () => {
      const store = await open();
      await insert(store, key("r1"), ["a", "b", "c"]);
      await update(store, [
        { index: 0, state: "RUNNING", child_run_id: "c0", started_at: NOW + 1 },
        { index: 1, state: "RUNNING", child_run_id: "c1", started_at: NOW + 1 },
      ]);
      await update(store, [
        // Two changes of one item in one list: both apply, in order.
        { index: 0, state: "SUCCEEDED", output: { z: 2, a: [1] } },
        { index: 0, state: "SUCCEEDED", ended_at: NOW + 5 },
        { index: 1, state: "FAILED", error: { message: "boom", reason: "child_failed" }, ended_at: NOW + 6 },
      ]);
      const read = await all(store);
      expect(read[0]).toMatchObject({
        state: "SUCCEEDED",
        child_run_id: "c0",
        output: { z: 2, a: [1] },
        error: null,
        started_at: NOW + 1,
        ended_at: NOW + 5,
      });
      expect(JSON.stringify(read[0]!.output)).toBe('{"z":2,"a":[1]}');
      expect(read[1]).toMatchObject({
        state: "FAILED",
        child_run_id: "c1",
        output: null,
        error: { message: "boom", reason: "child_failed" },
        started_at: NOW + 1,
        ended_at: NOW + 6,
      });
      expect(read[2]).toMatchObject({ state: "PENDING", child_run_id: null, started_at: null });

      // null is a value (it clears), undefined keeps; reads in the same transaction see the change.
      const pendingAfter = await store.transaction(async (tx) => {
        await tx.updateMapItems([{ key: key("r1"), index: 1, state: "PENDING", child_run_id: null, error: null }]);
        return tx.pendingMapItems(key("r1"), 0, 10);
      });
      expect(pendingAfter.map((p) => p.index)).toEqual([1, 2]);
      expect((await all(store))[1]).toMatchObject({
        state: "PENDING",
        child_run_id: null,
        error: null,
        started_at: NOW + 1,
        ended_at: NOW + 6,
      });
    });

    it("refuses an update of an item that does not exist, and writes none of that transaction", async () => {
      const store = await open();
      await insert(store, key("r1"), ["a"]);
      await expect(
        update(store, [
          { index: 0, state: "RUNNING", child_run_id: "c0" },
          { index: 7, state: "RUNNING" },
        ]),
      ).rejects.toThrow(/map visit r1\/m#1 has no item 7 to update/);
      expect((await all(store))[0]?.state).toBe("PENDING");
    });

    it("lists the child runs of RUNNING items in index order, at most the limit", async () => {
      const store = await open();
      await insert(store, key("r1"), ["a", "b", "c", "d", "e"]);
      await update(store, [
        { index: 4, state: "RUNNING", child_run_id: "c4" },
        { index: 1, state: "RUNNING", child_run_id: "c1" },
        { index: 3, state: "SUCCEEDED", child_run_id: "c3" },
        { index: 0, state: "RUNNING", child_run_id: "c0" },
      ]);
      const running = (limit: number) => store.transaction((tx) => tx.runningMapItems(key("r1"), limit));
      expect(await running(10)).toEqual(["c0", "c1", "c4"]);
      expect(await running(2)).toEqual(["c0", "c1"]);
      expect(await store.transaction((tx) => tx.runningMapItems(key("r1", 2), 10))).toEqual([]);
    });

    it("assembles the output in index order, null for items that did not succeed, or says it is too large", async () => {
      const store = await open();
      await insert(store, key("r1"), [0, 1, 2, 3, 4, 5]);
      const out0 = { z: "zed", a: [1, { b: null }] };
      await update(store, [
        { index: 5, state: "SUCCEEDED", output: "five" },
        { index: 0, state: "SUCCEEDED", output: out0 },
        // An output an item has without having succeeded is not part of the map's.
        { index: 1, state: "FAILED", output: "stale", error: { message: "no", reason: "child_failed" } },
        { index: 2, state: "RUNNING", child_run_id: "c2" },
        { index: 3, state: "SUCCEEDED", output: "héllo ✓" },
        { index: 4, state: "SUCCEEDED", output: null },
      ]);
      const expected = JSON.stringify([out0, null, null, "héllo ✓", null, "five"]);
      const output = (maxBytes: number, at = key("r1")) => store.transaction((tx) => tx.mapOutput(at, maxBytes));
      expect(await output(1_000_000)).toEqual({ text: expected });
      const bytes = Buffer.byteLength(expected);
      expect(bytes).toBeGreaterThan(expected.length); // multi-byte characters are counted as bytes
      expect(await output(bytes)).toEqual({ text: expected });
      expect(await output(bytes - 1)).toEqual({ tooLarge: bytes });

      // A visit without items (an empty list) has the empty array.
      await insert(store, key("r1", 2), []);
      expect(await output(2, key("r1", 2))).toEqual({ text: "[]" });
      expect(await output(1, key("r1", 2))).toEqual({ tooLarge: 2 });
    });

    describe("a redrive's new visit carries over the items the one before it finished", () => {
      const before: Json[] = [{ id: "a", n: 1 }, { id: "b" }, { id: "c" }, { id: "d", x: [1, 2], y: "z" }, "e"];

      /** r1's visit m#1 ended as `state`, its items 0, 1, 3 SUCCEEDED, 2 FAILED, 4 PENDING; m#2 RUNNING. */
      async function redriven(state: Visit["state"]): Promise<Store> {
        const store = await open({
          visits: [mapVisit("r1", 1, { state, is_current: false }), mapVisit("r1", 2)],
        });
        await insert(store, key("r1"), before);
        const done = (index: number): Omit<MapItemUpdate, "key"> => ({
          index,
          state: "SUCCEEDED",
          child_run_id: `c${index}`,
          output: { out: index },
          started_at: NOW + index,
          ended_at: NOW + 10 + index,
        });
        await update(store, [
          done(0),
          done(1),
          { index: 2, state: "FAILED", child_run_id: "c2", error: { message: "no", reason: "child_failed" } },
          done(3),
        ]);
        return store;
      }

      it("after a visit that failed: SUCCEEDED items of the same index and value, key order aside", async () => {
        const store = await redriven("FAILED");
        const after: Json[] = [
          { id: "a", n: 1 }, // the same: carried
          { id: "b", changed: true }, // changed: run again
          { id: "c" }, // failed before: run again
          { y: "z", x: [1, 2], id: "d" }, // the same value, keys in another order: carried
          "e", // was PENDING: run
          "f", // new
        ];
        expect(await insert(store, key("r1", 2), after)).toEqual({ total: 6, carried: 2 });
        const read = await all(store, key("r1", 2));
        expect(read.map((r) => r.state)).toEqual([
          "SUCCEEDED",
          "PENDING",
          "PENDING",
          "SUCCEEDED",
          "PENDING",
          "PENDING",
        ]);
        expect(read[0]).toEqual({
          run_id: "r1",
          node_id: "m",
          visit: 2,
          index: 0,
          item: { id: "a", n: 1 },
          state: "SUCCEEDED",
          child_run_id: "c0",
          output: { out: 0 },
          error: null,
          started_at: NOW,
          ended_at: NOW + 10,
          ...NO_ATTEMPTS,
        });
        // The new visit's item is the one it was given.
        expect(JSON.stringify(read[3]!.item)).toBe(JSON.stringify(after[3]));
        expect(read[3]).toMatchObject({ child_run_id: "c3", output: { out: 3 }, ended_at: NOW + 13 });
        for (const i of [1, 2, 4, 5]) {
          expect(read[i]).toMatchObject({ child_run_id: null, output: null, error: null, started_at: null });
        }
        const pending = await store.transaction((tx) => tx.pendingMapItems(key("r1", 2), 0, 10));
        expect(pending.map((p) => p.index)).toEqual([1, 2, 4, 5]);
        // The earlier visit's rows are left as they were.
        expect((await all(store, key("r1"))).map((r) => r.state)).toEqual([
          "SUCCEEDED",
          "SUCCEEDED",
          "FAILED",
          "SUCCEEDED",
          "PENDING",
        ]);
      });

      it("compares items that hold a NUL character too", async () => {
        const store = await open({ visits: [mapVisit("r1", 1, { state: "FAILED" }), mapVisit("r1", 2)] });
        await insert(store, key("r1"), ["a\u0000", { k: "\u0000", j: 1 }, { k: "\u0000" }]);
        await update(
          store,
          [0, 1, 2].map((index) => ({ index, state: "SUCCEEDED" as const, output: index })),
        );
        const after: Json[] = ["a\u0000", { j: 1, k: "\u0000" }, { k: "\u0000", more: 1 }];
        const { carried } = await insert(store, key("r1", 2), after);
        // The same text is carried on both stores; the same value written in another key order
        // is carried on SQLite only (PostgreSQL's jsonb, which compares values, cannot hold a NUL).
        expect(carried).toBe(kind === "sqlite" ? 2 : 1);
        const read = await all(store, key("r1", 2));
        expect(read.map((r) => r.item)).toEqual(after);
        expect(read[2]?.state).toBe("PENDING");
      });

      it("after a visit that was cancelled, the same", async () => {
        const store = await redriven("CANCELLED");
        expect(await insert(store, key("r1", 2), before)).toEqual({ total: 5, carried: 3 });
      });

      it("after a visit that succeeded (a loop's next visit): nothing", async () => {
        const store = await redriven("SUCCEEDED");
        expect(await insert(store, key("r1", 2), before)).toEqual({ total: 5, carried: 0 });
        expect((await all(store, key("r1", 2))).every((r) => r.state === "PENDING")).toBe(true);
      });
    });

    it("finds RUNNING items whose child run ended: their end is owed to the map", async () => {
      const parent = { run_id: "r1" };
      const store = await open({
        runs: [
          child("c0", { ...parent, item: 0 }),
          child("c1", { ...parent, item: 1 }, ended("SUCCEEDED")),
          child("c2", { ...parent, item: 2 }, ended("FAILED")),
          child("c3", { ...parent, item: 3 }, ended("CANCELLED")),
          child("c4", { ...parent, item: 4 }, ended("SUCCEEDED")),
        ],
      });
      await insert(store, key("r1"), [0, 1, 2, 3, 4, 5]);
      await update(store, [
        { index: 0, state: "RUNNING", child_run_id: "c0" },
        { index: 1, state: "RUNNING", child_run_id: "c1" },
        { index: 2, state: "RUNNING", child_run_id: "c2" },
        { index: 3, state: "RUNNING", child_run_id: "c3" },
        // Its end already taken.
        { index: 4, state: "SUCCEEDED", child_run_id: "c4" },
      ]);
      const toSettle = (limit: number) => store.transaction((tx) => tx.mapItemsToSettle(limit));
      expect((await toSettle(10)).sort()).toEqual(["c1", "c2", "c3"]);
      expect(await toSettle(2)).toHaveLength(2);
      // A workflow node's children are childrenToSettle's, not these.
      expect(await store.transaction((tx) => tx.childrenToSettle(10))).toEqual([]);
    });

    describe("orphanedChildren and map items", () => {
      const item = (run_id: string, attempt: number, overrides: Partial<Run> = {}) =>
        child(run_id, { run_id: "r1", attempt, item: 0 }, overrides);

      it("leaves an item's run alone while its map visit runs, held by map, at its attempt", async () => {
        const store = await open({
          runs: [
            item("i-current", 2),
            item("i-earlier-attempt", 1),
            item("i-ended", 1, ended("SUCCEEDED")),
            // A workflow node's child keeps its rule: its parent visit must be held by run:<child>.
            child("w-held", { run_id: "r1", node_id: "w" }),
            child("w-not-held", { run_id: "r1", node_id: "w2" }),
          ],
          visits: [
            mapVisit("r1", 1, { holder: "map", attempt: 2 }),
            visit("w", "RUNNING", { run_id: "r1", agent_type: "workflow", holder: "run:w-held", attempt: 1 }),
            visit("w2", "RUNNING", { run_id: "r1", agent_type: "workflow", holder: "run:other", attempt: 1 }),
          ],
        });
        const orphaned = () => store.transaction(async (tx) => (await tx.orphanedChildren(100)).sort());
        expect(await orphaned()).toEqual(["i-earlier-attempt", "w-not-held"]);

        // Held by something else than the map: its items are orphaned.
        const v = (await store.transaction((tx) => tx.getVisit(key("r1")))) as Visit;
        await store.transaction((tx) => writeRows(tx, { updateVisits: [{ ...v, holder: "engine-1" }] }));
        expect(await orphaned()).toEqual(["i-current", "i-earlier-attempt", "w-not-held"]);

        // The map visit ended (its item runs are to cancel), held by map or not.
        await store.transaction((tx) =>
          writeRows(tx, { updateVisits: [{ ...v, state: "FAILED", ended_at: NOW + 2 }] }),
        );
        expect(await orphaned()).toEqual(["i-current", "i-earlier-attempt", "w-not-held"]);
      });
    });

    describe("items that hold their own attempts", () => {
      async function write(store: Store, rows: MapItem[]) {
        await store.transaction((tx) => tx.writeMapItems(rows));
      }

      const load = (store: Store, keys: ItemKey[]) =>
        store.transaction(async (tx) => (await tx.loadMapItems(keys)).sort((a, b) => a.index - b.index));

      it("writes rows whole and reads them back whole; keys without a row are left out", async () => {
        const store = await open();
        await insert(store, key("r1"), itemsOf(3));
        const running = agentItem(0, "RUNNING", {
          attempt: 2,
          failures: 1,
          interruptions: 1,
          started_at: NOW + 1,
          deadline_at: NOW + 60_000,
          lease_expires_at: NOW + 30_000,
          holder: "engine-1",
        });
        const failed = agentItem(1, "FAILED", {
          attempt: 3,
          failures: 3,
          output: { z: 1, a: [2] },
          error: { message: "boom", reason: "failed", details: { code: 7 } },
          started_at: NOW + 2,
          ended_at: NOW + 3,
        });
        await write(store, [running, failed]);

        expect(await load(store, [itemKey(1), itemKey(7), itemKey(0), itemKey(0, key("r1", 2))])).toEqual([
          running,
          failed,
        ]);
        expect(await load(store, [])).toEqual([]);
        // listMapItems reads the same rows, the untouched one as it was inserted.
        expect(await all(store)).toEqual([running, failed, row(2)]);
        const [, read] = await load(store, [itemKey(0), itemKey(1)]);
        expect(JSON.stringify(read?.output)).toBe('{"z":1,"a":[2]}');

        // Whole rows: null clears; the item is never written; a row given twice ends as the later one.
        const retrying = agentItem(0, "RETRYING", { attempt: 2, failures: 2, ready_at: NOW + 5_000 });
        await write(store, [
          { ...failed, state: "SUCCEEDED", error: null, item: "not written" },
          { ...failed, item: "not written" },
          retrying,
          row(2, { state: "RUNNING", child_run_id: "c2" }),
        ]);
        expect(await all(store)).toEqual([retrying, failed, row(2, { state: "RUNNING", child_run_id: "c2" })]);

        // Reads in the same transaction see the write.
        const seen = await store.transaction(async (tx) => {
          await tx.writeMapItems([agentItem(2, "PENDING", { ready_at: NOW })]);
          return tx.loadMapItems([itemKey(2)]);
        });
        expect(seen).toEqual([agentItem(2, "PENDING", { ready_at: NOW })]);
      });

      it("refuses to write a row that does not exist, and writes none of that transaction", async () => {
        const store = await open();
        await insert(store, key("r1"), itemsOf(2));
        await expect(
          write(store, [agentItem(0, "RUNNING", { holder: "engine-1" }), agentItem(7, "RUNNING"), row(8)]),
        ).rejects.toThrow(/map visit r1\/m#1 has no item 7 to update/);
        await expect(write(store, [agentItem(1, "RUNNING", {}, key("r1", 2))])).rejects.toThrow(
          /map visit r1\/m#2 has no item 1 to update/,
        );
        expect(await all(store)).toEqual([row(0), row(1)]);
        await write(store, []);
      });

      it("lists a visit's started and unended items (ready, RUNNING, RETRYING) by index, at most the limit", async () => {
        const store = await open();
        await insert(store, key("r1"), itemsOf(8));
        const active = [
          agentItem(0, "PENDING", { ready_at: NOW }),
          agentItem(2, "RUNNING", { attempt: 1, holder: "engine-1", lease_expires_at: NOW + 10 }),
          agentItem(3, "RETRYING", { attempt: 1, failures: 1, ready_at: NOW + 1_000 }),
        ];
        await write(store, [
          agentItem(7, "CANCELLED", { ended_at: NOW }),
          active[2]!,
          agentItem(1, "PENDING"), // not started by its map yet
          agentItem(4, "SUCCEEDED", { output: 4, ended_at: NOW }),
          active[0]!,
          agentItem(5, "FAILED", { ended_at: NOW }),
          row(6, { state: "RUNNING", child_run_id: "c6" }), // a child run's item
          active[1]!,
        ]);
        const list = (limit: number, at = key("r1")) => store.transaction((tx) => tx.activeMapItems(at, limit));
        expect(await list(10)).toEqual(active);
        expect(await list(2)).toEqual(active.slice(0, 2));
        expect(await list(10, key("r1", 2))).toEqual([]);
      });

      it("finds the items of an agent type ready by now, oldest first, at most the limit", async () => {
        const r2 = key("r2");
        const store = await open({ runs: [run("r2")], visits: [mapVisit("r1", 1), mapVisit("r2", 1)] });
        await insert(store, key("r1"), itemsOf(7));
        await insert(store, r2, itemsOf(1));
        await write(store, [
          agentItem(0, "PENDING", { ready_at: NOW - 10 }),
          agentItem(1, "RETRYING", { ready_at: NOW }),
          agentItem(2, "PENDING", { ready_at: NOW - 100 }),
          agentItem(3, "RETRYING", { ready_at: NOW + 1 }), // not yet
          agentItem(4, "PENDING", { agent_type: "http", ready_at: NOW - 1_000 }), // another type
          agentItem(5, "PENDING"), // not started
          agentItem(6, "RUNNING", { lease_expires_at: NOW - 1 }), // claimed
          agentItem(0, "PENDING", { ready_at: NOW - 50 }, r2),
        ]);
        const claimable = (type: string, now: number, limit: number) =>
          store.transaction((tx) => tx.claimableMapItems(type, now, limit));
        expect(await claimable("llm", NOW, 10)).toEqual([itemKey(2), itemKey(0, r2), itemKey(0), itemKey(1)]);
        expect(await claimable("llm", NOW, 2)).toEqual([itemKey(2), itemKey(0, r2)]);
        expect(await claimable("llm", NOW + 1, 10)).toHaveLength(5);
        expect(await claimable("llm", NOW - 101, 10)).toEqual([]);
        expect(await claimable("http", NOW, 10)).toEqual([itemKey(4)]);
        expect(await claimable("other", NOW, 10)).toEqual([]);
      });

      it.runIf(kind === "postgres")(
        "locks the claimable items' runs: another transaction skips them, and its limit counts only the rest",
        async () => {
          const r2 = key("r2");
          // Two stores on one schema, as two engines: a store runs its own transactions one at a time.
          const database = tempDb("postgres");
          const [store, other] = [
            await openDatabase(database, { clock: new ManualClock(NOW) }),
            await openDatabase(database, { clock: new ManualClock(NOW) }),
          ];
          stores.push(store, other);
          await seeded(store, { runs: [run("r2")], visits: [mapVisit("r1", 1), mapVisit("r2", 1)] });
          await insert(store, key("r1"), itemsOf(2));
          await insert(store, r2, itemsOf(1));
          await write(store, [
            agentItem(0, "PENDING", { ready_at: NOW - 30 }),
            agentItem(1, "PENDING", { ready_at: NOW - 10 }),
            agentItem(0, "PENDING", { ready_at: NOW - 20 }, r2),
          ]);
          const claimed = deferred();
          const release = deferred();
          const holding = store.transaction(async (tx) => {
            const keys = await tx.claimableMapItems("llm", NOW, 1);
            claimed.resolve();
            await release.promise;
            return keys;
          });
          await claimed.promise;
          try {
            // r1 is held by the claim above: its items are skipped, the limit is filled from r2.
            expect(await other.transaction((tx) => tx.claimableMapItems("llm", NOW, 1))).toEqual([itemKey(0, r2)]);
            expect(await other.transaction((tx) => tx.claimableMapItems("llm", NOW, 10))).toEqual([itemKey(0, r2)]);
          } finally {
            release.resolve();
          }
          expect(await holding).toEqual([itemKey(0)]);
          expect(await store.transaction((tx) => tx.claimableMapItems("llm", NOW, 10))).toHaveLength(3);
        },
      );

      it("finds RUNNING items whose lease passed by now, soonest first, at most the limit", async () => {
        const store = await open();
        await insert(store, key("r1"), itemsOf(6));
        await write(store, [
          agentItem(0, "RUNNING", { lease_expires_at: NOW }),
          agentItem(1, "RUNNING", { lease_expires_at: NOW - 5 }),
          agentItem(2, "RUNNING", { lease_expires_at: NOW + 1 }), // not yet
          agentItem(3, "RETRYING", { lease_expires_at: NOW - 100, ready_at: NOW + 100 }), // not running
          agentItem(4, "SUCCEEDED", { lease_expires_at: NOW - 100 }),
          row(5, { state: "RUNNING", child_run_id: "c5" }), // a child run's: its run's own lease
        ]);
        const expired = (now: number, limit: number) => store.transaction((tx) => tx.expiredMapItems(now, limit));
        expect(await expired(NOW, 10)).toEqual([itemKey(1), itemKey(0)]);
        expect(await expired(NOW, 1)).toEqual([itemKey(1)]);
        expect(await expired(NOW + 1, 10)).toEqual([itemKey(1), itemKey(0), itemKey(2)]);
        expect(await expired(NOW - 6, 10)).toEqual([]);
      });

      it("finds RUNNING items held by any of some holders, at most the limit", async () => {
        const store = await open();
        await insert(store, key("r1"), itemsOf(5));
        await write(store, [
          agentItem(0, "RUNNING", { holder: "engine-1" }),
          agentItem(1, "RUNNING", { holder: "worker:w1" }),
          agentItem(2, "RUNNING", { holder: "engine-2" }),
          agentItem(3, "SUCCEEDED", { holder: "engine-1" }), // ended
          row(4, { state: "RUNNING", child_run_id: "c4", holder: "engine-1" }), // a child run's
        ]);
        const heldBy = (holders: string[], limit: number) =>
          store.transaction(async (tx) => (await tx.mapItemsHeldBy(holders, limit)).sort((a, b) => a.index - b.index));
        expect(await heldBy(["engine-1", "worker:w1"], 10)).toEqual([itemKey(0), itemKey(1)]);
        expect(await heldBy(["engine-1", "worker:w1"], 1)).toHaveLength(1);
        expect(await heldBy(["engine-2"], 10)).toEqual([itemKey(2)]);
        expect(await heldBy(["nobody"], 10)).toEqual([]);
        expect(await heldBy([], 10)).toEqual([]);
      });

      it("makes an item's coming ready time and a running item's lease due (nextDue)", async () => {
        const store = await open();
        await insert(store, key("r1"), itemsOf(4));
        const nextDue = () => store.transaction((tx) => tx.nextDue(NOW));
        // Only the run's deadline so far.
        expect(await nextDue()).toBe(NOW + 3_600_000);
        await write(store, [agentItem(0, "PENDING", { ready_at: NOW })]); // ready now: not a time to come
        expect(await nextDue()).toBe(NOW + 3_600_000);
        await write(store, [agentItem(1, "RETRYING", { ready_at: NOW + 5_000 })]);
        expect(await nextDue()).toBe(NOW + 5_000);
        await write(store, [agentItem(2, "RUNNING", { lease_expires_at: NOW + 2_000 })]);
        expect(await nextDue()).toBe(NOW + 2_000);
        await write(store, [agentItem(2, "SUCCEEDED", { lease_expires_at: NOW + 2_000, ended_at: NOW })]);
        expect(await nextDue()).toBe(NOW + 5_000);
      });

      it("counts RUNNING items by agent type for the limits, but of the runs left out", async () => {
        const r2 = key("r2");
        const store = await open({
          runs: [run("r2")],
          visits: [
            mapVisit("r1", 1),
            mapVisit("r2", 1),
            visit("a", "RUNNING", { run_id: "r1", agent_type: "llm", attempt: 1, holder: "engine-1" }),
          ],
        });
        await insert(store, key("r1"), itemsOf(6));
        await insert(store, r2, itemsOf(1));
        await write(store, [
          agentItem(0, "RUNNING"),
          agentItem(1, "RUNNING"),
          agentItem(2, "RETRYING", { ready_at: NOW + 1 }),
          agentItem(3, "RUNNING", { agent_type: "http" }),
          agentItem(4, "PENDING", { ready_at: NOW }),
          row(5, { state: "RUNNING", child_run_id: "c5" }),
          agentItem(0, "RUNNING", {}, r2),
        ]);
        const count = async (types: string[], except: string[]) =>
          Object.fromEntries(await store.transaction((tx) => tx.countRunningForLimits(types, except)));
        // r1's RUNNING visit of llm counts with the items.
        expect(await count(["llm", "http", "other"], [])).toEqual({ llm: 4, http: 1 });
        expect(await count(["llm"], ["r2"])).toEqual({ llm: 3 });
        expect(await count(["llm", "http"], ["r1"])).toEqual({ llm: 1 });
        expect(await count(["http"], ["r1", "r2"])).toEqual({});
      });
    });

    it("round-trips a visit's item counts through writes and every read", async () => {
      const counts: MapCounts = { total: 10, running: 2, succeeded: 3, failed: 1, cancelled: 0, next: 6 };
      const store = await open({
        visits: [mapVisit("r1", 1, { items: counts }), visit("a", "PENDING", { run_id: "r1" })],
      });
      const loaded = (await store.transaction((tx) => tx.loadRun("r1"))) as LoadedRun | null;
      const byNode = (visits: Visit[] | undefined) => new Map((visits ?? []).map((v) => [v.node_id, v]));
      expect(byNode(loaded?.visits).get("m")?.items).toEqual(counts);
      expect(byNode(loaded?.visits).get("a")?.items).toBeNull();

      const later: MapCounts = { ...counts, running: 0, succeeded: 9, next: 10 };
      const m = byNode(loaded?.visits).get("m") as Visit;
      await store.transaction((tx) =>
        tx.write({
          insertRuns: [],
          updateRuns: [],
          updateVisits: [{ ...m, items: later, is_current: false }],
          insertVisits: [mapVisit("r1", 2, { items: { ...later, total: 0, succeeded: 0, next: 0 } })],
          compensations: [],
          events: [],
          notify: [],
        }),
      );
      const again = await store.transaction(async (tx) => ({
        loaded: (await tx.loadRuns(["r1"])) as LoadedRun[],
        one: await tx.getVisit(key("r1")),
        history: await tx.runHistory("r1"),
      }));
      expect(byNode(again.loaded[0]?.visits).get("m")).toMatchObject({ visit: 2, items: { total: 0, next: 0 } });
      expect(again.one?.items).toEqual(later);
      expect(again.history.find((h) => h.visit.node_id === "a")?.visit.items).toBeNull();
      expect((await store.listVisits("r1")).map((v) => [v.node_id, v.visit, v.items?.succeeded ?? null])).toEqual([
        ["a", 1, null],
        ["m", 1, 9],
        ["m", 2, 0],
      ]);
      expect((await store.readRun("r1"))?.visits.find((v) => v.node_id === "m")?.items).toMatchObject({ total: 0 });
    });
  });
}
