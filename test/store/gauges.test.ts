/**
 * Store.readGauges (the metrics gauges, DESIGN §9) on both stores: a real SQLite file and a
 * fresh PostgreSQL schema, rows written through the store's own transactions.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { MapItem, Visit } from "../../src/core/types.js";
import { ManualClock } from "../../src/index.js";
import type { Store } from "../../src/store/store.js";
import { makeRun, visit } from "../core/helpers.js";
import { STORES, writeRows } from "./stores.js";

const NOW = Date.UTC(2026, 0, 1);

function at(node_id: string, state: Visit["state"], extra: Partial<Visit>): Visit {
  return visit(node_id, state, { run_id: "r1", created_at: NOW, ...extra });
}

for (const { name: kind, open: openStore } of STORES) {
  describe(`readGauges (${kind})`, () => {
    const stores: Store[] = [];

    afterEach(async () => {
      await Promise.all(stores.splice(0).map((s) => s.close()));
    });

    async function open(visits: Visit[], options = { clock: true }): Promise<Store> {
      const store = await openStore(options.clock ? { clock: new ManualClock(NOW) } : {});
      stores.push(store);
      await store.putWorkflow("core-test", "hash-1", JSON.stringify({ id: "core-test", nodes: [] }), NOW);
      await store.transaction(async (tx) => {
        await writeRows(tx, {
          insertRuns: [makeRun({ run_id: "r1", created_at: NOW, updated_at: NOW, deadline_at: NOW + 3_600_000 })],
        });
        await writeRows(tx, { insertVisits: visits });
      });
      return store;
    }

    it("counts ready, resolved, unclaimed visits per agent type with the oldest, and what waits", async () => {
      const store = await open([
        at("a", "PENDING", { agent_type: "writer", ready_at: NOW - 5000, payload: {} }),
        at("b", "RETRYING", { agent_type: "writer", ready_at: NOW - 1000, payload: { n: 1 }, priority: 2 }),
        at("c", "PENDING", { agent_type: "editor", ready_at: NOW - 2000, payload: {} }),
        // Not ready yet (a retry due later), not resolved (no payload), claimed (no ready_at): not counted.
        at("d", "RETRYING", { agent_type: "editor", ready_at: NOW + 60_000, payload: {} }),
        at("e", "PENDING", { agent_type: "editor", ready_at: NOW - 9000, payload: null }),
        at("f", "RUNNING", { agent_type: "editor", ready_at: null, payload: {}, attempt: 1, holder: "x" }),
        at("g", "IN_REVIEW", { agent_type: "human_review", payload: {} }),
        at("h", "WAITING", { agent_type: "sleep", payload: {} }),
        at("i", "WAITING", { agent_type: "wait_event", payload: { event: "go" } }),
      ]);
      const gauges = await store.readGauges("nobody", NOW);
      expect(gauges).toEqual({
        ready: [
          { agent_type: "editor", priority: 5, visits: 1, oldest_age_ms: 2000 },
          { agent_type: "writer", priority: 2, visits: 1, oldest_age_ms: 1000 },
          { agent_type: "writer", priority: 5, visits: 1, oldest_age_ms: 5000 },
        ],
        queued: [],
        pending_reviews: 1,
        pending_waits: 2,
        paused_runs: 0,
        heartbeat_age_ms: null,
      });
      // What is claimed before work of a priority: that of a more urgent one, ready and resolved.
      expect(await store.readyAhead("writer", 5, NOW)).toBe(1);
      expect(await store.readyAhead("writer", 2, NOW)).toBe(0);
      expect(await store.readyAhead("editor", 9, NOW)).toBe(1);
    });

    it("counts ready map items of an agent with the visits of their agent type", async () => {
      const store = await open([at("a", "PENDING", { agent_type: "writer", ready_at: NOW - 1000, payload: {} })]);
      const key = { run_id: "r1", node_id: "fan", visit: 1 };
      await store.transaction(async (tx) => {
        await tx.insertMapItems(key, ["x", "y", "z", "w"], NOW, 5);
        const [x, y, z, w] = await tx.loadMapItems([0, 1, 2, 3].map((index) => ({ ...key, index })));
        const ready = { agent_type: "writer", state: "PENDING" as const };
        // Ready (two), ready later, and never started (no ready_at): the first two count.
        await tx.writeMapItems([
          { ...(x as MapItem), ...ready, ready_at: NOW - 3000 },
          { ...(y as MapItem), ...ready, ready_at: NOW },
          { ...(z as MapItem), ...ready, ready_at: NOW + 60_000 },
          w as MapItem,
        ]);
      });
      const gauges = await store.readGauges("nobody", NOW);
      expect(gauges.ready).toEqual([{ agent_type: "writer", priority: 5, visits: 3, oldest_age_ms: 3000 }]);
      expect(await store.readyAhead("writer", 6, NOW)).toBe(3);
    });

    it("reads the engine's last heartbeat from its row", async () => {
      const store = await open([]);
      await store.registerEngine(
        { engine_id: "e1", host: "h", pid: process.pid, started_at: NOW, heartbeat_at: NOW },
        NOW - 30_000,
      );
      await store.heartbeat("e1", NOW + 1500);
      const gauges = await store.readGauges("e1", NOW + 2000);
      expect(gauges).toEqual({
        ready: [],
        queued: [],
        pending_reviews: 0,
        pending_waits: 0,
        paused_runs: 0,
        heartbeat_age_ms: 500,
      });
    });

    // SQLite has no clock of its own: the engine's `now` is its time.
    if (kind === "postgres") {
      it("reads at the database's time when the store has no clock", async () => {
        // Rows written at NOW, before the database's time: ready, and at least as old as their ready_at says.
        const store = await open([at("a", "PENDING", { agent_type: "writer", ready_at: NOW - 5000, payload: {} })], {
          clock: false,
        });
        const gauges = await store.readGauges("nobody", Number.MAX_SAFE_INTEGER);
        expect(gauges.ready).toHaveLength(1);
        expect(gauges.ready[0]?.visits).toBe(1);
        expect(gauges.ready[0]?.oldest_age_ms).toBeGreaterThanOrEqual(5000);
        expect(gauges.ready[0]?.oldest_age_ms).toBeLessThan(Number.MAX_SAFE_INTEGER - NOW);
      });
    }
  });
}
