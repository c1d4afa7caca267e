/**
 * Pruning's tree rules (DESIGN §8) on both stores, with rows written through the store: a run
 * goes only with its whole tree, never while a descendant is in progress, never a child alone,
 * and a batch limit splits between trees, not inside one.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Run, RunParent } from "../../src/core/types.js";
import { ManualClock } from "../../src/index.js";
import type { PruneCut, Store } from "../../src/store/store.js";
import { makeRun } from "../core/helpers.js";
import { STORES, writeRows } from "./stores.js";

const NOW = Date.UTC(2026, 0, 1);
const OLD = NOW - 10 * 86_400_000;
const CUT: PruneCut = { SUCCEEDED: NOW - 86_400_000, FAILED: NOW - 86_400_000, CANCELLED: NOW - 86_400_000 };

function run(run_id: string, overrides: Partial<Run> = {}): Run {
  return makeRun({
    run_id,
    workflow_id: "wf",
    created_at: OLD,
    updated_at: OLD,
    status: "SUCCEEDED",
    ended_at: OLD,
    ...overrides,
  });
}
const childOf = (parent: string, overrides: Partial<Run> = {}, item?: number): Partial<Run> => ({
  parent: {
    run_id: parent,
    node_id: "n",
    visit: 1,
    attempt: 1,
    depth: 1,
    ...(item === undefined ? {} : { item }),
  } as RunParent,
  ...overrides,
});

for (const { name: kind, open: openStore } of STORES) {
  describe(`pruning trees (${kind})`, () => {
    const stores: Store[] = [];
    afterEach(async () => {
      await Promise.all(stores.splice(0).map((s) => s.close()));
    });

    async function open(runs: Run[]): Promise<Store> {
      const store = await openStore({ clock: new ManualClock(NOW) });
      stores.push(store);
      await store.putWorkflow("wf", "hash-1", JSON.stringify({ id: "wf", nodes: [] }), OLD);
      await store.transaction((tx) => writeRows(tx, { insertRuns: runs }));
      return store;
    }
    const prune = (store: Store, limit = 500) => store.transaction((tx) => tx.pruneRuns(CUT, limit));
    const exists = async (store: Store, ids: string[]) =>
      (await Promise.all(ids.map((id) => store.getRun(id)))).map((r) => r !== null);

    it("keeps a finished run whose grandchild is still running, and the whole tree with it", async () => {
      const store = await open([
        run("p", { status: "CANCELLED" }),
        run("c", childOf("p", { status: "CANCELLED" })),
        run("g", childOf("c", { status: "RUNNING", ended_at: null })),
      ]);
      expect(await store.transaction((tx) => tx.countPrunable(CUT))).toBe(0);
      expect(await prune(store)).toBe(0);
      expect(await exists(store, ["p", "c", "g"])).toEqual([true, true, true]);
      await store.transaction((tx) => writeRows(tx, { updateRuns: [run("g", childOf("c", { status: "CANCELLED" }))] }));
      expect(await prune(store)).toBe(3);
      expect(await exists(store, ["p", "c", "g"])).toEqual([false, false, false]);
    });

    it("never prunes an old finished child whose parent stays (running, or young)", async () => {
      const store = await open([
        run("live", { status: "RUNNING", ended_at: null }),
        run("live-kid", childOf("live")),
        run("young", { ended_at: NOW }),
        run("young-kid", childOf("young")),
      ]);
      expect(await prune(store)).toBe(0);
      expect(await exists(store, ["live", "live-kid", "young", "young-kid"])).toEqual([true, true, true, true]);
    });

    it("a batch takes whole trees, oldest ended first, and at least one however large", async () => {
      const store = await open([
        run("a", { ended_at: OLD }),
        run("a1", childOf("a")),
        run("a2", childOf("a")),
        run("b", { ended_at: OLD + 1 }),
        run("c", { ended_at: OLD + 2 }),
      ]);
      expect(await prune(store, 1)).toBe(3);
      expect(await exists(store, ["a", "a1", "a2", "b", "c"])).toEqual([false, false, false, true, true]);
      expect(await prune(store, 2)).toBe(2);
      expect(await prune(store, 2)).toBe(0);
    });
  });
}
