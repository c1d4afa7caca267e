/**
 * DBOS Transact 5.3 (PostgreSQL): one registered workflow runs a shape level by level, each
 * level's steps started together with `DBOS.runStep` and awaited with `Promise.allSettled`,
 * the parallel form the DBOS workflow tutorial allows (steps started in a deterministic order).
 * Runs are started by calling the workflow function, which resolves with its result. Defaults
 * otherwise: every step's output is checkpointed in its own transaction before the workflow
 * goes on; recovery at launch of the workflows this executor ("local") left PENDING, which DBOS
 * 5 puts on its internal queue, whose poller starts them.
 */
import { DBOS } from "@dbos-inc/dbos-sdk";
import pg from "pg";
import { levels, type Shape, shapeById, W6_CONCURRENCY } from "../shapes.js";
import { PAYLOAD, plan, work } from "../steps.js";
import type { System, SystemConfig } from "./system.js";

/** Called when a workflow's last step has returned (W5 follows recovered workflows by it). */
let workflowDone: ((workflowId: string) => void) | null = null;

async function runLevels(shapeId: string, _input: string): Promise<void> {
  const workflowId = DBOS.workflowID as string;
  for (const level of levels(shapeById(shapeId))) {
    const results = await Promise.allSettled(
      level.map((node) => DBOS.runStep(() => work(workflowId, node), { name: node })),
    );
    const failed = results.find((r) => r.status === "rejected");
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }
  workflowDone?.(workflowId);
}

// Registered once, before launch: DBOS recovers only workflows registered under their name.
const runShape = DBOS.registerWorkflow(runLevels, { name: "runShape" });

/**
 * W6 with DBOS's idiom for a fan-out of unknown size (its queue tutorial): the plan step, then a
 * child workflow per item enqueued on a WorkflowQueue whose concurrency is W6's, the parent
 * awaiting every handle's result, then the join step. The queue's settings are DBOS's defaults
 * but for the concurrency (its dispatch loop polls the queue, from once a second at most).
 */
const W6_QUEUE = "peers-w6";

async function fanOutItem(_item: string): Promise<string> {
  const workflowId = DBOS.workflowID as string;
  return DBOS.runStep(() => work(workflowId, "item"), { name: "item" });
}
const runItem = DBOS.registerWorkflow(fanOutItem, { name: "fanOutItem" });

async function fanOutLevels(n: number): Promise<void> {
  const workflowId = DBOS.workflowID as string;
  const items = await DBOS.runStep(() => plan(workflowId, n), { name: "plan" });
  const handles = [];
  for (const item of items) handles.push(await DBOS.startWorkflow(runItem, { queueName: W6_QUEUE })(item));
  const outputs = await Promise.all(handles.map((h) => h.getResult()));
  if (outputs.length !== n) throw new Error("dbos: join before every item");
  await DBOS.runStep(() => work(workflowId, "join"), { name: "join" });
}
const runFanOut = DBOS.registerWorkflow(fanOutLevels, { name: "fanOut" });

export function dbos(config: SystemConfig): System {
  const url = config.pgUrl;
  if (!url) throw new Error("dbos: needs a PostgreSQL database");
  DBOS.setConfig({
    name: "skein-peers",
    systemDatabaseUrl: url,
    // Fixed, so the restarted process of W5 recovers the killed one's workflows.
    applicationVersion: "peers-bench",
    logLevel: "warn",
  });
  return {
    async open() {
      await DBOS.launch();
      await DBOS.registerQueue(W6_QUEUE, { globalConcurrency: W6_CONCURRENCY, onConflict: "always_update" });
    },
    close: () => DBOS.shutdown(),
    async run(shape: Shape) {
      await runShape(shape.id, PAYLOAD);
    },
    async fanOut(n: number, concurrency: number) {
      if (concurrency !== W6_CONCURRENCY) throw new Error(`dbos: W6's queue has concurrency ${W6_CONCURRENCY}`);
      await runFanOut(n);
    },
    async startMany(shape: Shape, keys: string[]) {
      await Promise.all(keys.map((key) => DBOS.startWorkflow(runShape, { workflowID: key })(shape.id, PAYLOAD)));
      return keys;
    },
    async committedSteps(keys: string[]) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query<{ workflow_uuid: string; function_name: string }>(
          "SELECT workflow_uuid, function_name FROM dbos.operation_outputs WHERE error IS NULL AND workflow_uuid = ANY($1)",
          [keys],
        );
        return rows.map((r) => `${r.workflow_uuid} ${r.function_name}`);
      } finally {
        await client.end();
      }
    },
    async resume(_shape: Shape, keys: string[], onDone: (key: string) => void) {
      // launch() recovers them by itself; the bench only follows each to its last step.
      const waiting = new Set(keys);
      let resolve!: () => void;
      const all = new Promise<void>((r) => (resolve = r));
      const done = (id: string) => {
        if (!waiting.delete(id)) return;
        onDone(id);
        if (waiting.size === 0) resolve();
      };
      workflowDone = done;
      await DBOS.launch();
      // A workflow that had finished before the kill is not recovered: it is done already.
      for (const key of keys) {
        if ((await DBOS.getWorkflowStatus(key))?.status === "SUCCESS") done(key);
      }
      await all;
    },
    settings: () => ({
      store: "postgresql",
      durability: "each step's output committed before the next step (default); synchronous_commit=on (server default)",
      systemDatabasePoolSize: 10,
      recovery: "at launch, of the workflows its executor id left PENDING, through its internal queue",
      w6_queue: `globalConcurrency ${W6_CONCURRENCY}, other settings default`,
    }),
  };
}
