/**
 * One engine per SQLite file, even while that engine is paused (DESIGN §8, issue 14 item 6): a
 * child process runs an engine and is stopped with SIGSTOP (a laptop lid, a VM pause, a
 * debugger). Its heartbeat then goes stale, but the file stays its own: the OS lock it holds on
 * `<db>-engine.lock` is kept by a stopped process and dropped by the kernel only when the
 * process dies. Synchronised on what the child prints once committed; every wait is bounded.
 */
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterEach, expect, it } from "vitest";
import { createClient, createEngine, DatabaseError, type Engine, ManualClock } from "../../src/index.js";
import { Child, within } from "../fixtures/child.js";
import { crashAgents, type LogLine, RUNS } from "../fixtures/crash-workflow.js";
import { describeSqlite, tempDir } from "../helpers.js";

const SMALL = { id: "small", nodes: [{ node_id: "a", agent_type: "slow" }] };

const CHILD = fileURLToPath(new URL("../fixtures/crash-child.ts", import.meta.url));

const children: Child[] = [];
const engines: Engine[] = [];

afterEach(async () => {
  for (const c of children) if (c.proc.exitCode === null) c.proc.kill("SIGCONT");
  await Promise.all(children.splice(0).map((c) => c.kill()));
  await Promise.all(engines.splice(0).map((e) => e.close({ timeoutMs: 100 })));
});

interface VisitRow {
  execution_id: string;
  state: string;
  attempt: number;
  holder: string | null;
}

/** The visits as committed in the file, read by a read-only connection of the test's own. */
function committedVisits(db: string): VisitRow[] {
  const conn = new Database(db, { readonly: true, fileMustExist: true });
  try {
    return conn.prepare("SELECT execution_id, state, attempt, holder FROM visits").all() as VisitRow[];
  } finally {
    conn.close();
  }
}

function engineRows(db: string): string[] {
  const conn = new Database(db, { readonly: true, fileMustExist: true });
  try {
    return (conn.prepare("SELECT engine_id FROM engines").all() as { engine_id: string }[]).map((r) => r.engine_id);
  } finally {
    conn.close();
  }
}

/** How many times each execution_id's agent was started, by attempt: `exec#attempt` → count. */
function starts(logFile: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of readFileSync(logFile, "utf8").split("\n")) {
    if (!line) continue;
    let l: LogLine;
    try {
      l = JSON.parse(line) as LogLine;
    } catch {
      continue; // a line torn by a SIGKILL
    }
    if (l.phase !== "start") continue;
    const key = `${l.execution_id}#${l.attempt}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** A child engine serving 50 diamonds, stopped (SIGSTOP) once 20 nodes have succeeded. */
async function stoppedChild(db: string, logFile: string) {
  const child = new Child(CHILD, ["diamond", db, logFile, "--threshold", "20"]);
  children.push(child);
  const ready = await child.waitFor("ready", (m) => m.type === "ready");
  const { run_ids } = (await child.waitFor("runs", (m) => m.type === "runs")) as unknown as { run_ids: string[] };
  await child.waitFor("progress", (m) => m.type === "progress");
  child.proc.kill("SIGSTOP");
  return { child, engineId: ready.engine_id as string, runIds: run_ids };
}

describeSqlite("a paused SQLite engine (SIGSTOP)", () => {
  it("keeps its file: a second engine is refused, clients still read, and it resumes and finishes alone", async () => {
    const dir = tempDir();
    const db = join(dir, "skein.db");
    const logFile = join(dir, "agents.log");
    const { child, engineId, runIds } = await stoppedChild(db, logFile);

    // Judged a minute later than the stopped engine's last heartbeat (a clock of its own):
    // under a heartbeat rule the stopped engine would count as dead and be taken over.
    const refused = await createEngine({
      database: `sqlite:${db}`,
      agents: crashAgents(logFile),
      clock: new ManualClock(Date.now() + 60_000),
      engineTimeoutMs: 1000,
    }).then(
      (engine) => {
        engines.push(engine);
        return null;
      },
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(DatabaseError);
    const message = (refused as Error).message;
    expect(message).toContain(`database ${db} is in use by engine ${engineId} (pid ${child.pid} on `);
    expect(message).toContain(`${db}-engine.lock`);
    expect(message).toMatch(/stopped or paused/);

    // A client opens the file beside the stopped engine and reads what it committed.
    const client = await createClient({ database: `sqlite:${db}` });
    try {
      const run = await client.getRun(runIds[0] as string);
      expect(run.run_id).toBe(runIds[0]);
      expect((await client.listRuns({ limit: 100 })).length).toBe(RUNS);
    } finally {
      await client.close();
    }

    // Woken, the engine goes on as the file's only engine and finishes every run.
    child.proc.kill("SIGCONT");
    await within(
      60_000,
      "the end of all runs",
      child.waitFor("done", (m) => m.type === "done"),
    );
    const visits = committedVisits(db);
    expect(visits).toHaveLength(RUNS * 4);
    for (const v of visits) {
      expect(v.state, v.execution_id).toBe("SUCCEEDED");
      // Nothing was taken over: every visit ran once, at attempt 1.
      expect(v.attempt, v.execution_id).toBe(1);
    }
    // The refused engine wrote nothing, not even its own row.
    expect(engineRows(db)).toEqual([engineId]);
    const counts = starts(logFile);
    expect(counts.size).toBe(RUNS * 4);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
  }, 90_000);

  it("is taken over at once when killed while stopped, and only its attempts in flight run again", async () => {
    const dir = tempDir();
    const db = join(dir, "skein.db");
    const logFile = join(dir, "agents.log");
    const { child, engineId, runIds } = await stoppedChild(db, logFile);
    await child.kill();
    const atKill = committedVisits(db);
    const running = atKill.filter((v) => v.state === "RUNNING");
    const succeeded = atKill.filter((v) => v.state === "SUCCEEDED");
    // The scenario needs both, or the test proves nothing.
    expect(running.length).toBeGreaterThan(0);
    expect(succeeded.length).toBeGreaterThanOrEqual(20);
    for (const v of running) expect(v.holder).toBe(engineId);

    // The default engine timeout (30 s) is far off: the lock, gone with the process, lets it open.
    const engine = await createEngine({ database: `sqlite:${db}`, agents: crashAgents(logFile) });
    engines.push(engine);
    const done = await within(
      60_000,
      "the end of all runs after the takeover",
      Promise.all(runIds.map((id) => engine.waitForRun(id))),
    );
    for (const run of done) expect(run.status).toBe("SUCCEEDED");
    const counts = starts(logFile);
    // Committed successes never ran again; each attempt in flight ran once more, at attempt + 1.
    for (const v of succeeded) expect(counts.get(`${v.execution_id}#${v.attempt + 1}`)).toBeUndefined();
    for (const v of running) expect(counts.get(`${v.execution_id}#${v.attempt + 1}`), v.execution_id).toBe(1);
    const final = new Map(done.flatMap((r) => r.nodes.map((n) => [n.execution_id, n] as const)));
    for (const v of running)
      expect(final.get(v.execution_id)).toMatchObject({ attempt: v.attempt + 1, interruptions: 1 });
    for (const v of succeeded)
      expect(final.get(v.execution_id)).toMatchObject({ attempt: v.attempt, interruptions: 0 });
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
  }, 90_000);

  it("stops an engine whose file another engine took over: it writes nothing more", async () => {
    const dir = tempDir();
    const db = join(dir, "skein.db");
    const first = await createEngine({ database: `sqlite:${db}`, agents: crashAgents(join(dir, "a.log")) });
    engines.push(first);
    await first.registerWorkflow(SMALL);
    // The lock circumvented (its file deleted): a second engine opens the file and takes it over.
    rmSync(`${db}-engine.lock`);
    const second = await createEngine({ database: `sqlite:${db}`, agents: crashAgents(join(dir, "b.log")) });
    engines.push(second);

    const refused = await first.startRun(SMALL.id).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DatabaseError);
    expect((refused as Error).message).toContain(`engine ${first.engineId} no longer owns ${db}`);
    expect((refused as Error).message).toContain(`engine ${second.engineId} (pid ${process.pid} on `);
    // Again, and nothing of it reached the file.
    await expect(first.startRun(SMALL.id)).rejects.toThrow(/no longer owns/);
    expect(await second.listRuns({})).toEqual([]);
    const run = await second.startRun(SMALL.id);
    expect((await second.waitForRun(run.run_id)).status).toBe("SUCCEEDED");
  });
});
