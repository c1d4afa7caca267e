/**
 * A map across a real crash (DESIGN §7, §11.1): the engine is SIGKILLed mid-map with every slot
 * held by a hung item (an agent's attempt, or a child run's); a new engine on the same database
 * finishes the map. Items that finished
 * before the crash are not run again; the hung ones run again once (their attempts were in
 * flight); the output is whole and in order. On both stores (PostgreSQL: the dead engine is
 * noticed after `engineTimeoutMs`, short here). Synchronised by what the killed process printed.
 */
import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { createEngine, type Engine, type Task } from "../../../src/index.js";
import { Child, within } from "../../fixtures/child.js";
import { onPostgres, tempDb, tempDir } from "../../helpers.js";

const SCRIPT = fileURLToPath(new URL("../../fixtures/crash-map.ts", import.meta.url));
const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0)) await f();
});

describe("a map across a SIGKILL", () => {
  it("does not re-run finished items, re-runs the in-flight ones once, and finishes in order", async () => {
    const { outputs } = await crashAndFinish("agents");
    expect(outputs).toEqual(Array.from({ length: 50 }, (_, index) => ({ index })));
  });

  it("of workflows: starts each item's child run once, and finishes in order", async () => {
    const { outputs, engine } = await crashAndFinish("flows");
    expect(outputs).toEqual(Array.from({ length: 50 }, (_, index) => ({ work: { index } })));
    // A child run is started exactly once per item, even across the crash (its idempotency key).
    const children = await engine.listRuns({ workflow_id: "item-flow" });
    expect(children).toHaveLength(50);
    expect(children.every((r) => r.status === "SUCCEEDED")).toBe(true);
  });
});

/**
 * Runs the map in a process that is SIGKILLed once every slot holds a hung item, then finishes it
 * on a new engine on the same database; checks every item's effect happened once, and that only
 * the hung items ran twice.
 */
async function crashAndFinish(mode: "agents" | "flows"): Promise<{ outputs: unknown; engine: Engine }> {
  const db = tempDb();
  const sink = join(tempDir(), "effects.log");
  const proc = new Child(SCRIPT, mode === "flows" ? [db, sink, "flows"] : [db, sink]);
  cleanup.push(() => proc.kill());
  const hung = new Set<number>(); // waitFor may show a message to the predicate more than once
  await proc.waitFor("five hung items", (m) => m.type === "hang" && hung.add(m.index as number).size === 5);
  await proc.kill();

  const engine: Engine = await createEngine({
    database: db,
    ...(onPostgres ? { engineTimeoutMs: 500, sweepIntervalMs: 100 } : {}),
    agents: {
      item: (t: Task) => {
        const index = (t.payload as { index: number }).index;
        appendFileSync(sink, `done ${index}\n`);
        return { index };
      },
    },
  });
  cleanup.push(() => engine.close({ timeoutMs: 100 }));
  const [run] = await engine.listRuns({ workflow_id: mode === "flows" ? "mapped-flows" : "mapped" });
  const done = await within(30_000, "the map's end", engine.waitForRun(run?.run_id ?? ""));
  expect(done.status).toBe("SUCCEEDED");

  const lines = readFileSync(sink, "utf8").trim().split("\n");
  const doneCount = new Map<number, number>();
  for (const line of lines) {
    const [what, index] = line.split(" ");
    if (what === "done") doneCount.set(Number(index), (doneCount.get(Number(index)) ?? 0) + 1);
  }
  // Every item's effect happened exactly once; the hung ones were the only ones run twice.
  for (let i = 0; i < 50; i++) expect(doneCount.get(i), `item ${i}`).toBe(1);
  expect(lines.filter((l) => l.startsWith("hang")).map((l) => Number(l.split(" ")[1]))).toEqual([...hung]);
  expect([...hung].every((i) => i >= 20)).toBe(true);
  return { outputs: done.nodes[0]?.output, engine };
}
