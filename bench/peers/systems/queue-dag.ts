/**
 * A workflow on a job queue, the way a queue's users build one (graphile-worker and pg-boss have
 * no notion of a workflow): one job per step; after its step, a job records the step done and
 * enqueues the successors whose dependencies are all done, in one transaction with the queue's
 * own insert. The run's row is locked first, so two parallel branches that finish together see
 * each other and a join is enqueued once. A job delivered again after its step was recorded
 * (its worker died before the queue saw it complete) skips the step: a completed step never
 * runs twice. The run's end is seen in the process that records its last step.
 */
import type pg from "pg";
import { type Shape, shapeById, successors } from "../shapes.js";
import { PAYLOAD, work } from "../steps.js";

/** A job's payload. */
export interface StepJob {
  run_id: string;
  node_id: string;
  shape: string;
  input: string;
}

/** Enqueues jobs inside the caller's transaction (`client` is in BEGIN). */
export type Enqueue = (client: pg.PoolClient, jobs: StepJob[]) => Promise<void>;

export const QUEUE_DAG_SCHEMA = `
  CREATE TABLE IF NOT EXISTS bench_runs (run_id text PRIMARY KEY, shape text NOT NULL, remaining int NOT NULL);
  CREATE TABLE IF NOT EXISTS bench_done (run_id text NOT NULL, node_id text NOT NULL, output text NOT NULL,
                                         PRIMARY KEY (run_id, node_id));`;

interface Graph {
  next: Map<string, string[]>;
  deps: Map<string, string[]>;
  roots: string[];
}

export class QueueDag {
  private readonly graphs = new Map<string, Graph>();
  private readonly waiters = new Map<string, () => void>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly enqueue: Enqueue,
    /** Called after a transaction that enqueued jobs committed (pg-boss wakes its local workers). */
    private readonly enqueued: () => void = () => {},
  ) {}

  /** Resolves when the run's last step is recorded by this process; ask before starting it. */
  finished(runId: string): Promise<void> {
    return new Promise((resolve) => this.waiters.set(runId, resolve));
  }

  /** The run's row and its root jobs, in one transaction. */
  async start(shape: Shape, runId: string): Promise<void> {
    const g = this.graph(shape.id);
    await this.transaction(async (client) => {
      await client.query("INSERT INTO bench_runs (run_id, shape, remaining) VALUES ($1, $2, $3)", [
        runId,
        shape.id,
        shape.nodes.length,
      ]);
      await this.enqueue(
        client,
        g.roots.map((node_id) => ({ run_id: runId, node_id, shape: shape.id, input: PAYLOAD })),
      );
    });
    this.enqueued();
  }

  /** What a job does. */
  async handle(job: StepJob): Promise<void> {
    const done = await this.pool.query("SELECT 1 FROM bench_done WHERE run_id = $1 AND node_id = $2", [
      job.run_id,
      job.node_id,
    ]);
    if (done.rowCount) return; // delivered again after its step was recorded
    const output = await work(job.run_id, job.node_id);
    const g = this.graph(job.shape);
    let ready: StepJob[] = [];
    let finished = false;
    await this.transaction(async (client) => {
      await client.query("SELECT 1 FROM bench_runs WHERE run_id = $1 FOR UPDATE", [job.run_id]);
      const inserted = await client.query(
        "INSERT INTO bench_done (run_id, node_id, output) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        [job.run_id, job.node_id, output],
      );
      if (!inserted.rowCount) return; // another delivery of this job recorded it first
      const { rows } = await client.query<{ remaining: number }>(
        "UPDATE bench_runs SET remaining = remaining - 1 WHERE run_id = $1 RETURNING remaining",
        [job.run_id],
      );
      finished = rows[0]?.remaining === 0;
      ready = [];
      for (const next of g.next.get(job.node_id) ?? []) {
        const deps = g.deps.get(next) ?? [];
        if (deps.length > 1) {
          const { rows } = await client.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM bench_done WHERE run_id = $1 AND node_id = ANY($2)",
            [job.run_id, deps],
          );
          if ((rows[0]?.n ?? 0) < deps.length) continue;
        }
        ready.push({ run_id: job.run_id, node_id: next, shape: job.shape, input: job.input });
      }
      if (ready.length > 0) await this.enqueue(client, ready);
    });
    if (ready.length > 0) this.enqueued();
    if (finished) this.end(job.run_id);
  }

  /** W5: the steps of these runs recorded done. */
  async committedSteps(runIds: string[]): Promise<string[]> {
    const { rows } = await this.pool.query<{ run_id: string; node_id: string }>(
      "SELECT run_id, node_id FROM bench_done WHERE run_id = ANY($1)",
      [runIds],
    );
    return rows.map((r) => `${r.run_id} ${r.node_id}`);
  }

  /** W5: waits for these runs (recording ends seen elsewhere: runs finished before the kill). */
  async waitAll(runIds: string[], onDone: (runId: string) => void): Promise<void> {
    const all = runIds.map((id) => this.finished(id).then(() => onDone(id)));
    const { rows } = await this.pool.query<{ run_id: string }>(
      "SELECT run_id FROM bench_runs WHERE run_id = ANY($1) AND remaining = 0",
      [runIds],
    );
    for (const r of rows) this.end(r.run_id);
    await Promise.all(all);
  }

  private end(runId: string): void {
    this.waiters.get(runId)?.();
    this.waiters.delete(runId);
  }

  private graph(shapeId: string): Graph {
    let g = this.graphs.get(shapeId);
    if (!g) {
      const shape = shapeById(shapeId);
      g = {
        next: successors(shape),
        deps: new Map(shape.nodes.map((n) => [n.node_id, n.depends_on ?? []])),
        roots: shape.nodes.filter((n) => !n.depends_on?.length).map((n) => n.node_id),
      };
      this.graphs.set(shapeId, g);
    }
    return g;
  }

  private async transaction(fn: (client: pg.PoolClient) => Promise<void>): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      await fn(client);
      await client.query("COMMIT");
    } catch (e) {
      await client.query("ROLLBACK").catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  }
}
