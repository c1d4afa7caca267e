/** Shared test set-up: a real SQLite file per test, a manual clock, and engines closed after each test. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "vitest";
import { createEngine, type Engine, type EngineOptions, ManualClock } from "../src/index.js";

const open: Engine[] = [];
const dirs: string[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((e) => e.close({ timeoutMs: 100 })));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "skein-test-"));
  dirs.push(dir);
  return dir;
}

export function tempDb(): string {
  return `sqlite:${join(tempDir(), "skein.db")}`;
}

/** An engine on a fresh SQLite file with a manual clock; closed after the test. */
export async function testEngine(
  options: EngineOptions = {},
): Promise<{ engine: Engine; clock: ManualClock; database: string }> {
  const clock = (options.clock as ManualClock | undefined) ?? new ManualClock();
  const database = options.database ?? tempDb();
  const engine = await createEngine({ ...options, clock, database });
  open.push(engine);
  return { engine, clock, database };
}

/** Resolves when `predicate` holds for an event of the engine (no sleeping). */
export function nextEvent(
  engine: Engine,
  predicate: (e: import("../src/index.js").RunEvent) => boolean,
): Promise<import("../src/index.js").RunEvent> {
  return new Promise((resolve) => {
    const off = engine.subscribe((e) => {
      if (predicate(e)) {
        off();
        resolve(e);
      }
    });
  });
}
