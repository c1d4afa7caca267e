/**
 * A map's window across a crash between two of its chunks (DESIGN §7, §13.1): a flush starts at
 * most a chunk of a map's items and the next flush continues from the engine's memory; the
 * engine is SIGKILLed right after the first chunk commits (test/fixtures/crash-map-window.ts).
 * Its items never return, so no item's end would ever advance the map: the next engine fills the
 * window because it continues the held maps it finds when it starts (`continueHeldMaps`), and runs
 * the items the dead engine had claimed again.
 * On both stores (PostgreSQL: the dead engine is noticed after `engineTimeoutMs`, short here).
 */
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { createEngine, type Engine } from "../../../src/index.js";
import { Child, within } from "../../fixtures/child.js";
import { onPostgres, tempDb } from "../../helpers.js";

const SCRIPT = fileURLToPath(new URL("../../fixtures/crash-map-window.ts", import.meta.url));
const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0)) await f();
});

describe("a map's window across a SIGKILL between two chunks", () => {
  it("is filled by the next engine though no item ever ends", async () => {
    const db = tempDb();
    const proc = new Child(SCRIPT, [db]);
    cleanup.push(() => proc.kill());
    await within(30_000, "the engine's SIGKILL after its first chunk", proc.exited);

    // Every item of the window runs on this engine: those the dead one had started are taken over.
    let calls = 0;
    let allCalled!: () => void;
    const filled = new Promise<void>((resolve) => {
      allCalled = resolve;
    });
    const engine: Engine = await createEngine({
      database: db,
      ...(onPostgres ? { engineTimeoutMs: 500, sweepIntervalMs: 100 } : {}),
      maxConcurrency: 300, // the engine's own cap on attempts in flight must not be what limits the map
      agents: {
        item: () => {
          calls += 1;
          if (calls === 300) allCalled();
          return new Promise(() => {});
        },
      },
    });
    cleanup.push(() => engine.close({ timeoutMs: 100 }));
    const [run] = await engine.listRuns({ workflow_id: "window" });
    const runId = run?.run_id ?? "";
    const before = (await engine.getRun(runId)).nodes[0]?.items;
    expect(before?.running).toBeLessThan(300); // the crash left the window part started

    await within(30_000, "the map's whole window started", filled);
    expect(calls).toBe(300);
    expect((await engine.getRun(runId)).nodes[0]?.items).toMatchObject({ total: 300, running: 300 });
  });
});
