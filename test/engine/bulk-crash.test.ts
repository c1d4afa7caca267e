/**
 * A bulk cancel killed while it applies (DESIGN §16): a child process runs bulkRuns over a few
 * thousand tagged runs and is SIGKILLed once some, not all, are cancelled. Every tagged run is
 * then either wholly cancelled (CANCELLED, its run.cancelled event, no active visit) or wholly
 * untouched (RUNNING, no cancel event, its visits as they were), never half; a second bulk call
 * cancels the rest. Both stores; synchronised on what the database shows, polled, never a sleep.
 */
import { fileURLToPath } from "node:url";
import { pino } from "pino";
import { afterEach, expect, it } from "vitest";
import { createEngine, type Engine } from "../../src/index.js";
import { withDatabase } from "../faults/read-db.js";
import { Child, within } from "../fixtures/child.js";
import { onPostgres, tempDb } from "../helpers.js";

const CHILD = fileURLToPath(new URL("../fixtures/bulk-child.ts", import.meta.url));
/** Tagged runs: enough that the cancel lasts many flushes, so the kill falls amid them. */
const TAGGED = 3000;
const UNTAGGED = 50;
/** A node no handler serves: its runs stay RUNNING, their visits ready, until cancelled. */
const WAITS = { id: "waits", nodes: [{ node_id: "w", agent_type: "outside" }] };
const ENDED = new Set(["SUCCEEDED", "FAILED", "SKIPPED", "CANCELLED"]);

const children: Child[] = [];
const engines: Engine[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
  await Promise.all(engines.splice(0).map((e) => e.close({ timeoutMs: 100 })));
});

async function open(database: string): Promise<Engine> {
  // Silent: its runs' visits wait for an agent nothing serves, which it would warn of.
  const engine = await createEngine({
    database,
    heartbeatIntervalMs: 200,
    engineTimeoutMs: 1000,
    logger: pino({ level: "silent" }),
  });
  engines.push(engine);
  return engine;
}

/** Each run's visits as committed (node, visit, state, attempt, execution), as one comparable string per run. */
async function visitsByRun(database: string): Promise<Map<string, string>> {
  const rows = await withDatabase(database, (q) =>
    q("SELECT run_id, node_id, visit, state, attempt, execution_id FROM visits ORDER BY run_id, node_id, visit"),
  );
  const byRun = new Map<string, unknown[]>();
  for (const { run_id, ...visit } of rows) {
    const list = byRun.get(String(run_id)) ?? [];
    list.push(visit);
    byRun.set(String(run_id), list);
  }
  return new Map([...byRun].map(([id, list]) => [id, JSON.stringify(list)]));
}

async function startMany(engine: Engine, n: number, tags?: Record<string, string>): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += 250) {
    const chunk = Array.from({ length: Math.min(250, n - i) }, () => engine.startRun("waits", tags ? { tags } : {}));
    ids.push(...(await Promise.all(chunk)).map((r) => r.run_id));
  }
  return ids;
}

it(`a bulk cancel SIGKILLed while it applies leaves every run wholly cancelled or untouched; a second call ends the rest (${onPostgres ? "PostgreSQL" : "SQLite"})`, {
  timeout: 180_000,
}, async () => {
  const database = tempDb();
  const setup = await open(database);
  await setup.registerWorkflow(WAITS);
  const tagged = await startMany(setup, TAGGED, { batch: "k" });
  const untagged = await startMany(setup, UNTAGGED);
  await setup.close();
  engines.splice(0);
  const before = await visitsByRun(database);

  const child = new Child(CHILD, [database, "k"]);
  children.push(child);
  await child.waitFor("the engine", (m) => m.type === "ready");
  // Poll the database until the cancel is under way: some runs cancelled, and the call not answered.
  const cancelledSoFar = async () =>
    Number((await withDatabase(database, (q) => q("SELECT count(*) AS n FROM runs WHERE status = 'CANCELLED'")))[0]?.n);
  await within(
    60_000,
    "a first cancelled run",
    (async () => {
      while ((await cancelledSoFar()) === 0) {
        if (child.messages.some((m) => m.type === "done")) throw new Error("the bulk call ended before it was seen");
        if (!child.alive) throw new Error(`the child exited before cancelling anything: ${child.errors}`);
        // A SQLite read is synchronous: let the child's output and the bound's timer be heard between polls.
        await new Promise((resolve) => setImmediate(resolve));
      }
    })(),
  );
  await child.kill();
  expect(
    child.messages.some((m) => m.type === "done"),
    "killed while applying, not after",
  ).toBe(false);

  const after = await visitsByRun(database);
  const { statuses, cancelEvents } = await withDatabase(database, async (q) => ({
    statuses: new Map((await q("SELECT run_id, status FROM runs")).map((r) => [String(r.run_id), String(r.status)])),
    cancelEvents: new Set(
      (await q("SELECT run_id FROM events WHERE type = 'run.cancelled'")).map((r) => String(r.run_id)),
    ),
  }));
  let cancelled = 0;
  const half: string[] = [];
  for (const id of tagged) {
    const status = statuses.get(id);
    const visits = JSON.parse(after.get(id) ?? "[]") as { state: string }[];
    if (status === "CANCELLED" && cancelEvents.has(id) && visits.every((v) => ENDED.has(v.state))) cancelled += 1;
    else if (status === "RUNNING" && !cancelEvents.has(id) && after.get(id) === before.get(id)) continue;
    else half.push(`${id}: ${status}, cancel event ${cancelEvents.has(id)}, visits ${after.get(id)}`);
  }
  expect(half, "runs half cancelled").toEqual([]);
  expect(cancelled).toBeGreaterThan(0);
  expect(cancelled).toBeLessThan(TAGGED);
  for (const id of untagged) {
    expect(statuses.get(id)).toBe("RUNNING");
    expect(after.get(id)).toBe(before.get(id));
  }

  // A second call, by another engine, cancels exactly what is left.
  const engine = await open(database);
  const rest = await engine.bulkRuns({ filter: { tags: { batch: "k" } }, action: { kind: "cancel" }, cap: 10_000 });
  expect(rest).toMatchObject({ matched: TAGGED - cancelled, applied: TAGGED - cancelled, refused: [], more: false });
  const left = await engine.listRuns({ tags: { batch: "k" }, status: "RUNNING", limit: 1 });
  expect(left).toEqual([]);
  expect((await engine.listRuns({ status: "RUNNING", limit: 1000 })).length).toBe(UNTAGGED);
});
