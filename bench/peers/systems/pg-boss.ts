/**
 * pg-boss 10 (PostgreSQL job queue): a workflow is jobs that enqueue their successors
 * (queue-dag.ts), inserted with `boss.insert(jobs, { db })` in the transaction that records the
 * step. pg-boss 10 polls (no LISTEN/NOTIFY): each worker fetches, runs its batch, and waits out
 * the polling interval (default 2 s) unless `notifyWorker` wakes it, which the documentation
 * offers for this case: after each commit that enqueued jobs the local workers are woken, and a
 * worker whose batch was full fetches again at once (a fan-out's jobs would otherwise drain one
 * batch per worker every 2 s).
 * Concurrency: WORKERS `work()` loops with batches of BATCH_SIZE. Defaults otherwise: an active
 * job whose worker died is retried after its expiration (15 minutes), found by the maintenance
 * that runs every 2 minutes.
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import PgBoss from "pg-boss";
import type { Shape } from "../shapes.js";
import { QUEUE_DAG_SCHEMA, QueueDag, type StepJob } from "./queue-dag.js";
import type { System, SystemConfig } from "./system.js";

const QUEUE = "step";
const WORKERS = 8;
const BATCH_SIZE = 4;

export function pgBoss(config: SystemConfig): System {
  const url = config.pgUrl;
  if (!url) throw new Error("pg-boss: needs a PostgreSQL database");
  let boss: PgBoss | null = null;
  let pool: pg.Pool | null = null;
  let dag: QueueDag | null = null;
  let workers: string[] = [];

  const open = async () => {
    const b = new PgBoss({ connectionString: url });
    b.on("error", (e) => process.stderr.write(`[pg-boss] ${e.stack ?? String(e)}\n`));
    await b.start();
    await b.createQueue(QUEUE);
    boss = b;
    const p = new pg.Pool({ connectionString: url, max: WORKERS * BATCH_SIZE });
    pool = p;
    await p.query(QUEUE_DAG_SCHEMA);
    const d = new QueueDag(
      p,
      (client, jobs) =>
        b.insert(
          jobs.map((data) => ({ name: QUEUE, data })),
          { db: { executeSql: (text, values) => client.query(text, values) } },
        ),
      () => {
        for (const id of workers) b.notifyWorker(id);
      },
    );
    dag = d;
    workers = [];
    for (let i = 0; i < WORKERS; i++) {
      workers.push(
        await b.work<StepJob>(QUEUE, { batchSize: BATCH_SIZE }, async (jobs) => {
          await Promise.all(jobs.map((job) => d.handle(job.data)));
          // A full batch may have left jobs behind (a fan-out): fetch again at once rather
          // than after the polling interval.
          if (jobs.length === BATCH_SIZE) b.notifyWorker(workers[i] as string);
        }),
      );
    }
  };
  const opened = () => {
    if (!dag) throw new Error("pg-boss: not open");
    return dag;
  };

  return {
    open,
    async close() {
      await boss?.stop({ graceful: true, wait: true });
      await pool?.end();
      boss = null;
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
      workers: WORKERS,
      batchSize: BATCH_SIZE,
      pollingIntervalSeconds: "2 (default); workers woken by notifyWorker after each enqueue and after a full batch",
      dead_worker_jobs: "retried after expireIn (15 min default), found by maintenance (every 2 min)",
    }),
  };
}
