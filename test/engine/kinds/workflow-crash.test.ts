/**
 * A child run across a real crash (DESIGN §7, §11.1): the engine is SIGKILLed right after the
 * child run started (its agent was called); a new engine on the same database finishes the child
 * without starting it again, and the parent picks up its end. On both stores: on SQLite the new
 * engine recovers the dead one's attempts as it opens the file; on PostgreSQL, where engines
 * share the database, once the dead engine's heartbeat is older than `engineTimeoutMs` (short
 * here, so the test does not wait the default 30 s). Synchronised by what the killed process
 * printed once the state was committed.
 */
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { createEngine, type Engine } from "../../../src/index.js";
import { Child, within } from "../../fixtures/child.js";
import { onPostgres, tempDb } from "../../helpers.js";

const SCRIPT = fileURLToPath(new URL("../../fixtures/crash-children.ts", import.meta.url));
const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0)) await f();
});

describe("a child run across a SIGKILL", () => {
  it("is not started twice, and its end reaches the parent", async () => {
    const db = tempDb();
    const proc = new Child(SCRIPT, [db]);
    cleanup.push(() => proc.kill());
    const called = await proc.waitFor("the child's agent", (m) => m.type === "agent");
    await proc.kill();

    const calls: string[] = [];
    const engine: Engine = await createEngine({
      database: db,
      // PostgreSQL: the killed engine counts as dead 500 ms after its last heartbeat, and the
      // sweep that looks for dead engines runs every 100 ms.
      ...(onPostgres ? { engineTimeoutMs: 500, sweepIntervalMs: 100 } : {}),
      agents: {
        work: (t) => {
          calls.push(t.run_id);
          return { doubled: (t.payload as { n: number }).n * 2 };
        },
      },
    });
    cleanup.push(() => engine.close({ timeoutMs: 100 }));
    const [parent] = await engine.listRuns({ workflow_id: "parent" });
    const done = await within(20_000, "the parent's end", engine.waitForRun(parent?.run_id ?? ""));
    expect(done.status).toBe("SUCCEEDED");
    expect(done.nodes[0]).toMatchObject({ state: "SUCCEEDED", attempt: 1, output: { work: { doubled: 8 } } });
    expect(done.children).toEqual([
      expect.objectContaining({ attempt: 1, run_id: called.run_id, status: "SUCCEEDED" }),
    ]);
    expect(await engine.listRuns({ workflow_id: "child" })).toHaveLength(1);
    expect(calls).toEqual([called.run_id]); // the same child run, its interrupted attempt again
  });
});
