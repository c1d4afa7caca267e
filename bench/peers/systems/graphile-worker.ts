/**
 * graphile-worker 0.16 (PostgreSQL job queue): a workflow is jobs that enqueue their successors
 * (queue-dag.ts), added with the documented SQL function `graphile_worker.add_job` inside the
 * transaction that records the step, so new jobs are announced by its NOTIFY and picked up at
 * once. One task, `step`; defaults except concurrency (default 1) and the pool sized to it.
 * Jobs of a worker that died stay locked until graphile-worker's fixed 4-hour lock timeout.
 */
import { randomUUID } from "node:crypto";
import { Logger, type Runner, run } from "graphile-worker";
import pg from "pg";
import type { Shape } from "../shapes.js";
import { QUEUE_DAG_SCHEMA, QueueDag, type StepJob } from "./queue-dag.js";
import type { System, SystemConfig } from "./system.js";

/** Jobs run at once. graphile-worker warns when its pool has fewer connections than this. */
const CONCURRENCY = 32;

/** Its warnings and errors on stderr; its info lines ("Worker connected...") would flood the bench's output. */
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") process.stderr.write(`[graphile-worker] ${message}\n`);
});

export function graphileWorker(config: SystemConfig): System {
  const url = config.pgUrl;
  if (!url) throw new Error("graphile-worker: needs a PostgreSQL database");
  let pool: pg.Pool | null = null;
  let runner: Runner | null = null;
  let dag: QueueDag | null = null;

  const open = async () => {
    const p = new pg.Pool({ connectionString: url, max: CONCURRENCY });
    pool = p;
    await p.query(QUEUE_DAG_SCHEMA);
    const d = new QueueDag(p, async (client, jobs) => {
      await client.query("SELECT graphile_worker.add_job('step', j) FROM json_array_elements($1::json) AS j", [
        JSON.stringify(jobs),
      ]);
    });
    dag = d;
    runner = await run({
      pgPool: p,
      concurrency: CONCURRENCY,
      noHandleSignals: true,
      logger,
      taskList: { step: (payload) => d.handle(payload as StepJob) },
    });
  };
  const opened = () => {
    if (!dag) throw new Error("graphile-worker: not open");
    return dag;
  };

  return {
    open,
    async close() {
      await runner?.stop();
      await pool?.end();
      runner = null;
      pool = null;
      dag = null;
    },
    async run(shape: Shape) {
      const d = opened();
      const id = randomUUID();
      const finished = d.finished(id);
      await d.start(shape, id);
      await finished;
    },
    async startMany(shape: Shape, keys: string[]) {
      await Promise.all(keys.map((key) => opened().start(shape, key)));
      return keys;
    },
    async committedSteps(keys: string[]) {
      const p = new pg.Pool({ connectionString: url, max: 1 });
      try {
        return await new QueueDag(p, async () => {}).committedSteps(keys);
      } finally {
        await p.end();
      }
    },
    async resume(_shape: Shape, keys: string[], onDone: (key: string) => void) {
      await open();
      await opened().waitAll(keys, onDone);
    },
    settings: () => ({
      store: "postgresql",
      concurrency: CONCURRENCY,
      maxPoolSize: CONCURRENCY,
      pollInterval: "2000 ms (default; new jobs are announced by LISTEN/NOTIFY)",
      dead_worker_jobs: "locked until 4 hours after they were taken (fixed in 0.16)",
    }),
  };
}
