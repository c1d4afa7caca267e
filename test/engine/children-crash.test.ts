/**
 * A child run across a real crash (DESIGN §7, §11.1): the engine is SIGKILLed right after the
 * child run started (its agent was called); a new engine on the same file finishes the child
 * without starting it again, and the parent picks up its end. Synchronised by what the killed
 * process printed once the state was committed.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { createEngine, type Engine } from "../../src/index.js";
import { Child, within } from "../fixtures/child.js";
import { describeSqlite, tempDir } from "../helpers.js";

const SCRIPT = fileURLToPath(new URL("../fixtures/crash-children.ts", import.meta.url));
const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0)) await f();
});

describeSqlite("a child run across a SIGKILL", () => {
  it("is not started twice, and its end reaches the parent", async () => {
    const db = join(tempDir(), "children.db");
    const proc = new Child(SCRIPT, [db]);
    cleanup.push(() => proc.kill());
    const called = await proc.waitFor("the child's agent", (m) => m.type === "agent");
    await proc.kill();

    const calls: string[] = [];
    const engine: Engine = await createEngine({
      database: `sqlite:${db}`,
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
