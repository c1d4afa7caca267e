/**
 * Mastra 0.24 (@mastra/core; 1.x needs Node 22.13, the bench runs on 20) with its LibSQL storage
 * (@mastra/libsql 0.16 on @libsql/client 0.15, a local file through libsql's SQLite). Each shape is
 * one workflow built as the docs show (mastra.ai/reference/v0/workflows, docs/workflows/control-flow):
 * `createStep` per node, `.then()` for a level of one node and `.parallel([...])` for a level of
 * several, `.commit()`; W6 is a plan step, `.foreach(item, { concurrency })` and a join. All are
 * registered on one `Mastra` instance with the LibSQLStore; a run is `createRunAsync({ runId })`
 * and `run.start({ inputData })`, whose result's status says whether it succeeded.
 * Defaults: the default execution engine, which rewrites the run's whole snapshot (one JSON row
 * per run in mastra_workflow_snapshot, holding every step's result so far) when a step starts and
 * when an entry ends (a `.then` step, or a whole `.parallel` block: a branch that finished is
 * stored with the block, or with a later step's start); LibSQLStore's WAL journal and
 * synchronous=NORMAL (it sets both), busy_timeout 10 s, no retries of a step. `.foreach` runs its
 * items in batches of `concurrency` (Promise.all per batch: a batch waits for its slowest item).
 * Recovery: Mastra does not resume by itself after a crash. It documents `Run.restart()`
 * (mastra.ai/reference/v0/workflows/run-methods/restart) for "an active workflow run that lost
 * connection to the server": it continues from the snapshot's active steps, so a step whose
 * start was stored but not its end runs again. W5 restarts each unfinished run with it, all at
 * once (0.24's `Mastra.restartAllActiveWorkflowRuns()`, in its .d.ts, awaits one run after the other).
 */
import { type Client, createClient } from "@libsql/client";
import { Mastra } from "@mastra/core/mastra";
import { createStep, createWorkflow } from "@mastra/core/workflows";
import { LibSQLStore } from "@mastra/libsql";
import { z } from "zod";
import { levels, SHAPE_IDS, type Shape, shapeById, W6_CONCURRENCY } from "../shapes.js";
import { PAYLOAD, plan, work } from "../steps.js";
import type { System, SystemConfig } from "./system.js";

/** The W6 workflow's id (the shapes' workflows are named by shape id). */
const FAN_OUT = "w6-fan-out";

/** The table the default engine keeps one snapshot per run in (mastra/core storage constants). */
const SNAPSHOTS = "mastra_workflow_snapshot";

/** What the bench needs of a committed workflow; the builder's types follow literal step ids. */
interface Result {
  status: string;
  error?: unknown;
}
interface MastraRun {
  start(args: { inputData: unknown }): Promise<Result>;
  restart(): Promise<Result>;
}
interface MastraWorkflow {
  createRunAsync(options?: { runId?: string }): Promise<MastraRun>;
}
interface Builder {
  then(step: unknown): Builder;
  parallel(steps: unknown[]): Builder;
  foreach(step: unknown, opts: { concurrency: number }): Builder;
  commit(): unknown;
}

/** A node: its step calls `work` under the run's id and hands the payload on. */
function nodeStep(nodeId: string) {
  return createStep({
    id: nodeId,
    inputSchema: z.any(),
    outputSchema: z.string(),
    execute: async ({ runId }) => work(runId, nodeId),
  });
}

function build(shape: Shape): unknown {
  let flow = createWorkflow({ id: shape.id, inputSchema: z.string(), outputSchema: z.any() }) as unknown as Builder;
  for (const level of levels(shape)) {
    flow = level.length === 1 ? flow.then(nodeStep(level[0] as string)) : flow.parallel(level.map(nodeStep));
  }
  return flow.commit();
}

/** W6: plan returns the items, foreach runs the item step over them, join gets their outputs. */
function buildFanOut(concurrency: number): unknown {
  const planStep = createStep({
    id: "plan",
    inputSchema: z.object({ n: z.number() }),
    outputSchema: z.array(z.string()),
    execute: async ({ runId, inputData }) => plan(runId, inputData.n),
  });
  const item = createStep({
    id: "item",
    inputSchema: z.string(),
    outputSchema: z.string(),
    execute: async ({ runId }) => work(runId, "item"),
  });
  const join = createStep({
    id: "join",
    inputSchema: z.array(z.string()),
    outputSchema: z.string(),
    execute: async ({ runId }) => work(runId, "join"),
  });
  const flow = createWorkflow({ id: FAN_OUT, inputSchema: z.object({ n: z.number() }), outputSchema: z.string() });
  return (flow as unknown as Builder).then(planStep).foreach(item, { concurrency }).then(join).commit();
}

function check(result: Result, what: string): void {
  if (result.status !== "success") {
    throw new Error(
      `mastra: ${what} ended ${result.status}: ${String((result.error as Error)?.message ?? result.error)}`,
    );
  }
}

interface Snapshot {
  status: string;
  context: Record<string, { status?: string } | unknown>;
}

/** The snapshots of these runs, by run id (read with a client of our own). */
async function snapshots(client: Client, keys: string[]): Promise<Map<string, Snapshot>> {
  const out = new Map<string, Snapshot>();
  if (keys.length === 0) return out;
  const rows = await client.execute({
    sql: `SELECT run_id, snapshot FROM ${SNAPSHOTS} WHERE run_id IN (${keys.map(() => "?").join(",")})`,
    args: keys,
  });
  for (const row of rows.rows) {
    const raw = row.snapshot;
    out.set(String(row.run_id), (typeof raw === "string" ? JSON.parse(raw) : raw) as Snapshot);
  }
  return out;
}

export function mastra(config: SystemConfig): System {
  const path = config.sqlitePath;
  if (!path) throw new Error("mastra: needs a SQLite file");
  const url = `file:${path}`;
  let client: Client | null = null;
  let instance: Mastra | null = null;
  let changes = 0;
  let pragmas: Record<string, unknown> = {};

  const sql = async (query: string) => {
    if (!client) throw new Error("mastra: not open");
    return (await client.execute(query)).rows[0]?.[0];
  };
  /** total_changes() of the store's one connection, read after each run: sqliteChanges() is synchronous. */
  const countChanges = async () => {
    changes = Number(await sql("SELECT total_changes()"));
  };

  const open = async () => {
    // Our own client, handed to the store (LibSQLConfig's `client` form): the same connection
    // every write goes through (the default engine writes outside transactions, so @libsql/client
    // keeps that one connection), whose total_changes() we can read.
    client = createClient({ url });
    const storage = new LibSQLStore({ client });
    await storage.init(); // creates the tables now, not in the first run
    const workflows = Object.fromEntries([
      ...SHAPE_IDS.map((id) => [id, build(shapeById(id))]),
      [FAN_OUT, buildFanOut(W6_CONCURRENCY)],
    ]);
    // biome-ignore lint/suspicious/noExplicitAny: the workflows' literal types are built at run time
    instance = new Mastra({ workflows: workflows as any, storage, logger: false });
    // The store sets its PRAGMAs without waiting for them: ask once they have run.
    await sql("PRAGMA busy_timeout");
    pragmas = {
      journal_mode: await sql("PRAGMA journal_mode"),
      synchronous: ["off", "normal", "full", "extra"][Number(await sql("PRAGMA synchronous"))],
      busy_timeout_ms: await sql("PRAGMA busy_timeout"),
      sqlite_version: await sql("SELECT sqlite_version()"),
    };
    await countChanges();
  };
  const workflow = (id: string): MastraWorkflow => {
    if (!instance) throw new Error("mastra: not open");
    return instance.getWorkflow(id) as unknown as MastraWorkflow;
  };
  const startRun = async (shape: Shape, runId?: string) => {
    const run = await workflow(shape.id).createRunAsync(runId ? { runId } : undefined);
    return run.start({ inputData: PAYLOAD });
  };

  return {
    open,
    async close() {
      client?.close();
      client = null;
      instance = null;
    },
    async run(shape: Shape) {
      const result = await startRun(shape);
      await countChanges();
      check(result, `a run of ${shape.id}`);
    },
    async startMany(shape: Shape, keys: string[]) {
      for (const key of keys) {
        startRun(shape, key).catch(() => {}); // killed mid-run: nothing to report
      }
      return keys;
    },
    async committedSteps(keys: string[]) {
      // A step is done when the run's snapshot holds its result with status success.
      const reader = createClient({ url });
      try {
        const out: string[] = [];
        for (const [key, snapshot] of await snapshots(reader, keys)) {
          for (const [stepId, result] of Object.entries(snapshot.context ?? {})) {
            if (stepId !== "input" && (result as { status?: string })?.status === "success")
              out.push(`${key} ${stepId}`);
          }
        }
        return out;
      } finally {
        reader.close();
      }
    },
    async resume(shape: Shape, keys: string[], onDone: (key: string) => void) {
      await open();
      const stored = await snapshots(client as Client, keys);
      await Promise.all(
        keys.map(async (key) => {
          const status = stored.get(key)?.status;
          if (status !== "success") {
            const run = await workflow(shape.id).createRunAsync({ runId: key });
            if (status === "running" || status === "waiting") check(await run.restart(), `restarting ${key}`);
            // Never started, or only created (restart() refuses those): an application starts it again.
            else check(await run.start({ inputData: PAYLOAD }), `starting ${key} again`);
          }
          onDone(key);
        }),
      );
    },
    async fanOut(n: number, concurrency: number) {
      if (concurrency !== W6_CONCURRENCY) {
        throw new Error(`mastra: the fan-out workflow is built with concurrency ${W6_CONCURRENCY}, not ${concurrency}`);
      }
      const run = await workflow(FAN_OUT).createRunAsync();
      const result = await run.start({ inputData: { n } });
      await countChanges();
      check(result, `the fan-out of ${n}`);
    },
    sqliteChanges: () => changes,
    settings: () => ({
      store: "sqlite (LibSQLStore, @libsql/client local file)",
      durability:
        "one snapshot row per run, rewritten when a step starts and when a .then step or a whole .parallel block ends (default engine)",
      ...pragmas,
      recovery:
        "none automatic; W5 calls Run.restart() on each run left running: it continues from the snapshot's active steps, re-running those whose end was not stored",
      w6: `.foreach(item, { concurrency: ${W6_CONCURRENCY} }): batches of ${W6_CONCURRENCY}, each waiting for its slowest item`,
    }),
  };
}
