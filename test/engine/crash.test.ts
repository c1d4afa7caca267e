/**
 * Crash recovery (DESIGN §7) with a real crash: a child process runs an engine on a SQLite file
 * and is SIGKILLed mid-work; a new engine on the same file must finish every run without redoing
 * anything committed, re-running exactly the attempts that were in flight.
 *
 * Synchronisation is by what the child prints on stdout once the state is committed (no sleeps);
 * every wait is bounded.
 */
import { appendFileSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterEach, expect, it } from "vitest";
import { createEngine, DatabaseError, type Engine, type RunEvent } from "../../src/index.js";
import { Child, within } from "../fixtures/child.js";
import { crashAgents, DIAMOND, type LogLine, RUNS } from "../fixtures/crash-workflow.js";
import { describeSqlite, tempDir } from "../helpers.js";

const CHILD = fileURLToPath(new URL("../fixtures/crash-child.ts", import.meta.url));

const children: Child[] = [];
const engines: Engine[] = [];

function startChild(...args: string[]): Child {
  const child = new Child(CHILD, args);
  children.push(child);
  return child;
}

async function openEngine(db: string, agents: ReturnType<typeof crashAgents>): Promise<Engine> {
  const engine = await createEngine({ database: `sqlite:${db}`, agents });
  engines.push(engine);
  return engine;
}

afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
  await Promise.all(engines.splice(0).map((e) => e.close({ timeoutMs: 100 })));
});

interface VisitRow {
  run_id: string;
  node_id: string;
  visit: number;
  execution_id: string;
  state: string;
  attempt: number;
  interruptions: number;
  failures: number;
  output: string | null;
  holder: string | null;
}

/** The visits as committed in the file, read by a separate read-only connection. */
function committedVisits(db: string): VisitRow[] {
  const conn = new Database(db, { readonly: true, fileMustExist: true });
  try {
    return conn
      .prepare(
        "SELECT run_id, node_id, visit, execution_id, state, attempt, interruptions, failures, output, holder FROM visits",
      )
      .all() as VisitRow[];
  } finally {
    conn.close();
  }
}

/**
 * Ends the log with a newline (a SIGKILL could in theory tear the last line) and returns its
 * length: lines from this byte on were written after the kill.
 */
function markLog(file: string): number {
  let size = 0;
  try {
    size = statSync(file).size;
  } catch {
    return 0;
  }
  if (size > 0 && !readFileSync(file, "utf8").endsWith("\n")) {
    appendFileSync(file, "\n");
    size += 1;
  }
  return size;
}

/** The log lines in bytes [from, to). Only the part before a kill may hold a torn line, which is dropped. */
function logLinesFrom(file: string, from: number, to?: number): LogLine[] {
  const lines = readFileSync(file).subarray(from, to).toString("utf8").split("\n");
  const parsed: LogLine[] = [];
  for (const l of lines) {
    if (l.length === 0) continue;
    try {
      parsed.push(JSON.parse(l) as LogLine);
    } catch (e) {
      if (to === undefined) throw e;
    }
  }
  return parsed;
}

describeSqlite("crash recovery (SIGKILL)", () => {
  it("finishes every run after a crash, re-running only the attempts in flight", async () => {
    const dir = tempDir();
    const db = join(dir, "skein.db");
    const logFile = join(dir, "agents.log");

    // 1. A child engine runs 50 diamonds; kill it once some nodes have succeeded.
    const child = startChild("diamond", db, logFile, "--threshold", "60");
    const ready = await child.waitFor("ready", (m) => m.type === "ready");
    const { run_ids } = (await child.waitFor("runs", (m) => m.type === "runs")) as unknown as { run_ids: string[] };
    await child.waitFor("progress", (m) => m.type === "progress");
    await child.kill();
    const killOffset = markLog(logFile);

    // 2. What was committed at the moment of the crash.
    const atKill = committedVisits(db);
    expect(run_ids).toHaveLength(RUNS);
    expect(new Set(atKill.map((v) => v.run_id))).toEqual(new Set(run_ids));
    const succeededAtKill = atKill.filter((v) => v.state === "SUCCEEDED");
    const runningAtKill = atKill.filter((v) => v.state === "RUNNING");
    // The scenario needs both, or the test proves nothing.
    expect(succeededAtKill.length).toBeGreaterThanOrEqual(60);
    expect(runningAtKill.length).toBeGreaterThan(0);
    for (const v of runningAtKill) expect(v.holder).toBe(ready.engine_id);
    // A committed success was logged by its agent first (the log is the agents' own record).
    const before = logLinesFrom(logFile, 0, killOffset);
    for (const v of succeededAtKill) {
      expect(
        before.some((l) => l.execution_id === v.execution_id && l.attempt === v.attempt && l.phase === "done"),
      ).toBe(true);
    }

    // 3. A new engine on the same file, same agents, same log, finishes everything.
    const engine = await openEngine(db, crashAgents(logFile));
    const finished = await within(
      45_000,
      "the end of all 50 runs after recovery",
      Promise.all(run_ids.map((id) => engine.waitForRun(id))),
    );
    for (const run of finished) {
      expect(run.status, `run ${run.run_id}: ${JSON.stringify(run.error)}`).toBe("SUCCEEDED");
      expect(run.output).toEqual({ d: { node: "d", after: ["b", "c"] } });
      expect(run.nodes.map((n) => [n.node_id, n.state]).sort()).toEqual([
        ["a", "SUCCEEDED"],
        ["b", "SUCCEEDED"],
        ["c", "SUCCEEDED"],
        ["d", "SUCCEEDED"],
      ]);
    }
    const after = logLinesFrom(logFile, killOffset);
    const startsAfter = new Map<string, LogLine[]>();
    for (const l of after) {
      if (l.phase !== "start") continue;
      const list = startsAfter.get(l.execution_id) ?? [];
      list.push(l);
      startsAfter.set(l.execution_id, list);
    }

    const finalVisits = new Map<string, (typeof finished)[number]["nodes"][number]>();
    const events = new Map<string, RunEvent[]>();
    for (const run of finished) {
      for (const v of run.nodes) finalVisits.set(v.execution_id, v);
      events.set(run.run_id, await engine.listEvents(run.run_id));
    }

    // Nothing committed is redone: a visit SUCCEEDED at the kill never starts again, and keeps
    // its attempt and output.
    for (const v of succeededAtKill) {
      expect(startsAfter.get(v.execution_id), `${v.execution_id} re-ran after the crash`).toBeUndefined();
      const final = finalVisits.get(v.execution_id);
      expect(final?.state).toBe("SUCCEEDED");
      expect(final?.attempt).toBe(v.attempt);
      expect(final?.output).toEqual(JSON.parse(v.output as string));
      expect(final?.interruptions).toBe(0);
    }

    // The attempts in flight re-ran with the same execution_id and a higher attempt number, and
    // the history says they were interrupted.
    for (const v of runningAtKill) {
      const starts = startsAfter.get(v.execution_id) ?? [];
      expect(starts.length, `${v.execution_id} (attempt ${v.attempt} at the kill) did not re-run`).toBeGreaterThan(0);
      for (const s of starts) expect(s.attempt).toBeGreaterThan(v.attempt);
      expect(starts.map((s) => s.attempt)).toEqual([v.attempt + 1]);
      expect(after.some((l) => l.execution_id === v.execution_id && l.phase === "done")).toBe(true);
      const final = finalVisits.get(v.execution_id);
      expect(final?.state).toBe("SUCCEEDED");
      expect(final?.attempt).toBe(v.attempt + 1);
      expect(final?.interruptions).toBe(1);
      expect(final?.failures).toBe(0);
      const history = (events.get(v.run_id) ?? []).filter((e) => e.node_id === v.node_id && e.visit === v.visit);
      const interrupted = history.filter((e) => e.type === "node.interrupted");
      expect(interrupted).toHaveLength(1);
      expect(interrupted[0]?.data).toMatchObject({ attempt: v.attempt, interruptions: 1 });
      const restarted = history.filter((e) => e.type === "node.started").at(-1);
      expect(restarted?.data).toMatchObject({ attempt: v.attempt + 1, holder: engine.engineId });
    }

    // Only those were interrupted, and every visit succeeded exactly once.
    const runningIds = new Set(runningAtKill.map((v) => v.execution_id));
    for (const [runId, list] of events) {
      for (const e of list.filter((x) => x.type === "node.interrupted")) {
        expect(runningIds.has(`${runId}:${e.node_id}:${e.visit}`)).toBe(true);
      }
      const succeeded = list.filter((e) => e.type === "node.succeeded").map((e) => e.node_id);
      expect(succeeded.sort()).toEqual(["a", "b", "c", "d"]);
    }
    // Every visit that had not started by the kill ran once, as attempt 1, after it.
    for (const v of atKill.filter((x) => x.state !== "SUCCEEDED" && x.state !== "RUNNING")) {
      expect(startsAfter.get(v.execution_id)?.map((s) => s.attempt)).toEqual([1]);
    }
  }, 90_000);

  it("resumes compensation after a crash, in order, without running a finished compensation again", async () => {
    const dir = tempDir();
    const db = join(dir, "skein.db");
    const logFile = join(dir, "agents.log");

    // 1. The child's run fails at ship and compensates ship, then charge, whose undo hangs: kill it there.
    const child = startChild("saga", db, logFile, "--hang-undo-of", "charge");
    const { run_ids } = (await child.waitFor("runs", (m) => m.type === "runs")) as unknown as { run_ids: string[] };
    const runId = run_ids[0] as string;
    await child.waitFor(
      "charge's compensation",
      (m) => m.type === "agent" && m.execution_id === `${runId}:charge:1:compensate`,
    );
    await child.kill();
    const killOffset = markLog(logFile);
    const before = logLinesFrom(logFile, 0, killOffset).filter((l) => l.execution_id.endsWith(":compensate"));
    expect(before.map((l) => [l.node_id, l.phase, l.attempt])).toEqual([
      ["ship", "start", 1],
      ["ship", "done", 1],
      ["charge", "start", 1],
    ]);

    // 2. A new engine finishes the compensation: charge again (same execution_id, next attempt), then reserve.
    const engine = await openEngine(db, crashAgents(logFile));
    const done = await within(30_000, "the end of the compensation", engine.waitForRun(runId));
    expect(done).toMatchObject({ status: "FAILED", needs_attention: false });
    expect(done.compensations.map((c) => [c.node_id, c.state, c.attempt, c.interruptions])).toEqual([
      ["ship", "SUCCEEDED", 1, 0],
      ["charge", "SUCCEEDED", 2, 1],
      ["reserve", "SUCCEEDED", 1, 0],
    ]);
    const all = logLinesFrom(logFile, 0).filter((l) => l.execution_id.endsWith(":compensate"));
    const completed = all.filter((l) => l.phase === "done").map((l) => l.execution_id);
    // Every compensation completed exactly once, in order; the one that had finished never started again.
    expect(completed).toEqual([
      `${runId}:ship:1:compensate`,
      `${runId}:charge:1:compensate`,
      `${runId}:reserve:1:compensate`,
    ]);
    expect(all.filter((l) => l.node_id === "ship" && l.phase === "start")).toHaveLength(1);
    expect(all.filter((l) => l.node_id === "charge" && l.phase === "start").map((l) => l.attempt)).toEqual([1, 2]);
    const events = await engine.listEvents(runId);
    expect(events.filter((e) => e.type === "compensation.succeeded").map((e) => e.node_id)).toEqual([
      "ship",
      "charge",
      "reserve",
    ]);
  }, 60_000);

  it("refuses a second engine on a file a live engine holds, and opens it once that engine was killed", async () => {
    const dir = tempDir();
    const db = join(dir, "skein.db");
    const logFile = join(dir, "agents.log");
    const child = startChild("idle", db, logFile);
    const ready = await child.waitFor("ready", (m) => m.type === "ready");
    expect(ready.pid).toBe(child.pid);

    let refused: unknown;
    try {
      engines.push(await createEngine({ database: `sqlite:${db}`, agents: crashAgents(logFile) }));
    } catch (e) {
      refused = e;
    }
    expect(refused).toBeInstanceOf(DatabaseError);
    expect((refused as Error).message).toMatch(/is in use by engine/);
    expect((refused as Error).message).toContain(`${ready.engine_id}`);
    expect((refused as Error).message).toContain(`pid ${child.pid}`);
    expect(child.proc.exitCode).toBeNull();

    await child.kill();
    const engine = await openEngine(db, crashAgents(logFile));
    await engine.registerWorkflow(DIAMOND);
    const run = await engine.startRun(DIAMOND.id, { input: { i: 0 } });
    expect((await engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
  }, 60_000);

  it("fails a node interrupted 3 times with reason `interrupted` (poison task)", async () => {
    const dir = tempDir();
    const db = join(dir, "skein.db");
    const logFile = join(dir, "agents.log");
    let runId = "";
    let executionId = "";

    // Three engines in turn die while the node's agent hangs.
    for (let attempt = 1; attempt <= 3; attempt++) {
      const child = attempt === 1 ? startChild("poison", db, logFile, "--start") : startChild("poison", db, logFile);
      if (attempt === 1) {
        const runs = (await child.waitFor("runs", (m) => m.type === "runs")) as unknown as { run_ids: string[] };
        runId = runs.run_ids[0] as string;
      }
      const started = await child.waitFor(`attempt ${attempt}`, (m) => m.type === "agent" && m.node_id === "p");
      expect(started.attempt).toBe(attempt);
      executionId ||= started.execution_id as string;
      expect(started.execution_id).toBe(executionId);
      await child.kill();
      const p = committedVisits(db).find((v) => v.execution_id === executionId);
      expect(p).toMatchObject({ state: "RUNNING", attempt, interruptions: attempt - 1, failures: 0 });
    }

    // The fourth engine finds the third interruption and fails the visit instead of running it.
    const calls: string[] = [];
    const engine = await openEngine(
      db,
      crashAgents(logFile, (t) => calls.push(t.execution_id)),
    );
    const run = await within(20_000, "the end of the poisoned run", engine.waitForRun(runId));
    expect(run.status).toBe("FAILED");
    expect(run.error).toMatchObject({ reason: "interrupted" });
    const p = run.nodes.find((n) => n.node_id === "p");
    expect(p).toMatchObject({ state: "FAILED", reason: "interrupted", attempt: 3, interruptions: 3, failures: 0 });
    expect(p?.error).toMatchObject({ reason: "interrupted" });
    expect(run.nodes.find((n) => n.node_id === "after")?.state).toBe("SKIPPED");
    expect(calls).toEqual([]);

    const events = (await engine.listEvents(runId)).filter((e) => e.node_id === "p");
    expect(events.filter((e) => e.type === "node.interrupted").map((e) => e.data)).toEqual([
      { attempt: 1, interruptions: 1 },
      { attempt: 2, interruptions: 2 },
    ]);
    expect(events.filter((e) => e.type === "node.started").map((e) => (e.data as { attempt: number }).attempt)).toEqual(
      [1, 2, 3],
    );
    const failed = events.filter((e) => e.type === "node.failed");
    expect(failed).toHaveLength(1);
    expect(failed[0]?.data).toMatchObject({ attempt: 3, reason: "interrupted" });
    const starts = logLinesFrom(logFile, 0).filter((l) => l.phase === "start");
    expect(starts.map((l) => [l.execution_id, l.attempt])).toEqual([
      [executionId, 1],
      [executionId, 2],
      [executionId, 3],
    ]);
  }, 60_000);
});
