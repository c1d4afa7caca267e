/**
 * BullMQ 5.81 (Redis job queue; ioredis 5): each shape is a flow of jobs added with a
 * FlowProducer (docs.bullmq.io/guide/flows), one job per node in the queue "steps", job id
 * `<run key>.<node_id>` and the run key in the job's data. A flow is a tree: a parent job waits
 * in "waiting-children" until all its children completed, then runs and reads their results
 * with `job.getChildrenValues()`. Every key is under the bench's prefix (`prefix` on every
 * Queue, Worker, FlowProducer and QueueEvents), so each bench process has keys of its own.
 *
 * How the shapes become trees. A node with ONE successor is that successor's child (the docs'
 * chains and joins): a sequence is a 1000-deep nested flow (BullMQ sets no depth limit; `add`
 * builds the whole tree in one MULTI), DAG8's fetches are children of review. A node with
 * SEVERAL successors cannot be a child of each (a job has one parent), and a static tree that
 * keeps the order would have to chain those successors one after the other. So such a node
 * (DAG8's review, a fan-out's root) adds its successors itself once its step is done, the
 * docs' idiom for children known only at run time (patterns/process-step-jobs, "Waiting
 * Children"): as children of its own parent when it has one (review is the child of summary, on
 * which it and the three publishes all converge: summary depends on review once, then on the
 * publishes review added while it was still active), else as its own children, after which it
 * `moveToWaitingChildren` and completes when they have (a fan-out's root is the run's top job).
 * Resulting flows: summary{review{fetch_a,b,c}} + publish_a,b,c added by review under
 * summary; step_999{step_998{…{step_000}}}; parent, which adds child_* under itself.
 * Successors are added with fixed job ids: a job run again after a crash adds nothing twice
 * (BullMQ ignores an add whose id exists). Children fail their parent (`failParentOnFailure`),
 * so a failed step fails the run's top job.
 *
 * A run is done when its top job completes: seen on a QueueEvents stream (the docs' way to
 * follow jobs, what `waitUntilFinished` listens to), reading from the stream's last entry at
 * open. W6: a "plan" job runs `plan`, then adds a flow, a "join" parent with one child per item
 * in the queue "items", whose Worker has the run's concurrency; the run is done when the join
 * completed.
 *
 * Workers: one per queue in this process, concurrency 50 (the docs' example). Completed jobs
 * are kept (removeOnComplete: default), which W5 reads. Durability is the server's, which the
 * bench chooses (redis.ts), this code the same for both: `bullmq` on Redis's memory only (no
 * snapshots, no AOF), `bullmq-aof` on an append-only file fsynced every second; `settings`
 * reads which from the server (CONFIG GET). Recovery: BullMQ's own, defaults: a dead
 * worker's jobs keep their lock for up to lockDuration (30 s) and are moved back to wait by a
 * worker's stalled-job check (every stalledInterval, 30 s), which first marks the active jobs
 * and moves those still unlocked at its next pass. The restarted process's first check finds
 * the check key the dead one set (it lasts stalledInterval) and skips; its next one marks, the
 * one after moves: W5's stalled runs end about 60 s after the restart (61.5 s measured here,
 * none doubled), past the bench's 40 s cap. The docs call these defaults the ones to keep; with
 * stalledInterval 5 s the lock's 30 s dominate (31.8 s measured), but defaults are what W5
 * compares, as for the other queues.
 */
import { randomUUID } from "node:crypto";
import {
  type FlowChildJob,
  type FlowJob,
  FlowProducer,
  type Job,
  Queue,
  QueueEvents,
  WaitingChildrenError,
  Worker,
} from "bullmq";
import { Redis } from "ioredis";
import { PEERS_DAG8, type Shape, shapeById, successors } from "../shapes.js";
import { PAYLOAD, plan, work } from "../steps.js";
import type { System, SystemConfig } from "./system.js";

const STEPS = "steps";
const ITEMS = "items";
/** Jobs of the steps queue this process runs at once (the BullMQ docs' concurrency example). */
const CONCURRENCY = 50;

/** A job of the steps queue: a shape's node, or W6's plan and join. */
type StepData =
  | { kind: "node"; run: string; shape: string; node: string; input: string; waiting?: boolean }
  | { kind: "plan"; run: string; n: number }
  | { kind: "join"; run: string };

/** How a shape maps onto flows (see the header). */
interface FlowPlan {
  /** The run's top job: the run is done when it completed. */
  top: string;
  /** The nodes added with the run's flow, each with its children in that flow. */
  children: Map<string, string[]>;
  /** Nodes that add their successors at run time, and the nodes they add. */
  spawns: Map<string, string[]>;
  /** The flow parent of a node added at run time: null for "the node that added it". */
  parentOf: Map<string, string | null>;
}

function flowPlan(shape: Shape): FlowPlan {
  const next = successors(shape);
  const single = (id: string) => {
    const s = next.get(id) ?? [];
    return s.length === 1 ? (s[0] as string) : null;
  };
  const parentOf = new Map<string, string | null>();
  const spawns = new Map<string, string[]>();
  for (const n of shape.nodes) {
    const succ = next.get(n.node_id) ?? [];
    if (succ.length === 1) parentOf.set(n.node_id, succ[0] as string);
    else if (succ.length > 1) {
      spawns.set(n.node_id, succ);
      // Its successors converge on one node: it is a child of that node too (DAG8's review).
      const common = single(succ[0] as string);
      parentOf.set(n.node_id, common !== null && succ.every((s) => single(s) === common) ? common : null);
    } else parentOf.set(n.node_id, null);
  }
  const spawned = new Set([...spawns.values()].flat());
  for (const id of spawned) {
    if ((shape.nodes.find((n) => n.node_id === id)?.depends_on ?? []).length !== 1) {
      throw new Error(`bullmq: ${shape.id}: ${id} follows a node with several successors and has other dependencies`);
    }
  }
  const tops = shape.nodes.filter((n) => !spawned.has(n.node_id) && parentOf.get(n.node_id) === null);
  if (tops.length !== 1) throw new Error(`bullmq: ${shape.id} is not one tree (${tops.length} top jobs)`);
  const children = new Map<string, string[]>(shape.nodes.map((n) => [n.node_id, []]));
  for (const n of shape.nodes) {
    const p = parentOf.get(n.node_id);
    if (!spawned.has(n.node_id) && p) children.get(p)?.push(n.node_id);
  }
  return { top: (tops[0] as { node_id: string }).node_id, children, spawns, parentOf };
}

const plans = new Map<string, FlowPlan>();
function planOf(shapeId: string): FlowPlan {
  let p = plans.get(shapeId);
  if (!p) {
    p = flowPlan(shapeById(shapeId));
    plans.set(shapeId, p);
  }
  return p;
}

const jobId = (run: string, node: string) => `${run}.${node}`;

/** The run's flow: its top job and, nested, the nodes that are known before it starts. */
function flowOf(shape: Shape, run: string): FlowJob {
  const p = planOf(shape.id);
  const node = (id: string): FlowChildJob => ({
    name: id,
    queueName: STEPS,
    data: { kind: "node", run, shape: shape.id, node: id, input: PAYLOAD } satisfies StepData,
    opts: { jobId: jobId(run, id), failParentOnFailure: true },
    children: (p.children.get(id) ?? []).map(node),
  });
  const top = node(p.top);
  return { ...top, opts: { jobId: jobId(run, p.top) } };
}

/** Waits for jobs of one queue to finish, as its QueueEvents stream reports them. */
class Finished {
  private readonly waiters = new Map<string, { resolve(): void; reject(e: Error): void }>();
  constructor(events: QueueEvents) {
    events.on("completed", ({ jobId }) => this.settle(jobId));
    events.on("failed", ({ jobId, failedReason }) =>
      this.settle(jobId, new Error(`job ${jobId} failed: ${failedReason}`)),
    );
  }
  /** Resolves when job `id` completed; rejects if it failed. Ask before the job can finish. */
  wait(id: string): Promise<void> {
    return new Promise((resolve, reject) => this.waiters.set(id, { resolve, reject }));
  }
  settle(id: string, error?: Error): void {
    const w = this.waiters.get(id);
    if (!w) return;
    this.waiters.delete(id);
    if (error) w.reject(error);
    else w.resolve();
  }
}

export function bullmq(config: SystemConfig): System {
  const url = config.redisUrl;
  const prefix = config.redisPrefix;
  if (!url || !prefix) throw new Error("bullmq: needs a Redis URL and a key prefix");
  let connection: Redis | null = null;
  let steps: Queue | null = null;
  let flows: FlowProducer | null = null;
  let events: QueueEvents | null = null;
  let finished: Finished | null = null;
  let workers: Worker[] = [];
  let itemsWorker: Worker | null = null;
  let server: Record<string, string> = {};

  const opened = () => {
    if (!steps || !flows || !finished) throw new Error("bullmq: not open");
    return { steps, flows, finished };
  };

  /** What a job of the steps queue does. */
  const processStep = async (job: Job<StepData>, token?: string): Promise<unknown> => {
    const { steps: queue, flows: producer } = opened();
    const data = job.data;
    if (data.kind === "plan") {
      const items = await plan(data.run, data.n);
      await producer.add({
        name: "join",
        queueName: STEPS,
        data: { kind: "join", run: data.run } satisfies StepData,
        opts: { jobId: jobId(data.run, "join") },
        children: items.map((item, i) => ({
          name: "item",
          queueName: ITEMS,
          data: { run: data.run, item },
          opts: { jobId: jobId(data.run, `item-${i}`), failParentOnFailure: true },
        })),
      });
      return items.length;
    }
    if (data.kind === "join") {
      const outputs = await job.getChildrenValues<string>();
      if (Object.keys(outputs).length === 0) throw new Error("join: no item outputs");
      return work(data.run, "join");
    }
    // A fan-out's root that waited for its children: its step ran before they were added.
    if (data.waiting) return PAYLOAD;
    const p = planOf(data.shape);
    // Its inputs: the results of its children (a chain's predecessor, a join's branches).
    if ((p.children.get(data.node) ?? []).length > 0) await job.getChildrenValues();
    const output = await work(data.run, data.node);
    const added = p.spawns.get(data.node);
    if (!added) return output;
    // job.parent: the parent's id and its queue's qualified name (`<prefix>:<queue>`).
    const parentKeys = job.parent;
    const under =
      p.parentOf.get(data.node) && parentKeys?.id ? { id: parentKeys.id, queue: parentKeys.queueKey } : null;
    await queue.addBulk(
      added.map((node) => ({
        name: node,
        data: { kind: "node", run: data.run, shape: data.shape, node, input: output } satisfies StepData,
        opts: {
          jobId: jobId(data.run, node),
          parent: under ?? { id: job.id as string, queue: job.queueQualifiedName },
          failParentOnFailure: true,
        },
      })),
    );
    if (under) return output;
    // Its own children: wait for them (the docs' moveToWaitingChildren + WaitingChildrenError).
    await job.updateData({ ...data, waiting: true });
    if (await job.moveToWaitingChildren(token as string)) throw new WaitingChildrenError();
    return output;
  };

  const open = async () => {
    const c = new Redis(url, { maxRetriesPerRequest: null }); // what BullMQ's workers require
    connection = c;
    const info = await c.info("server");
    const save = (await c.config("GET", "save")) as string[];
    const aof = (await c.config("GET", "appendonly")) as string[];
    const fsync = (await c.config("GET", "appendfsync")) as string[];
    server = {
      version: /redis_version:(\S+)/.exec(info)?.[1] ?? "?",
      save: save[1] ?? "?",
      appendonly: aof[1] ?? "?",
      appendfsync: fsync[1] ?? "?",
    };
    const base = { connection: c, prefix };
    steps = new Queue(STEPS, base);
    flows = new FlowProducer(base);
    // From the stream's last entry (or its start): no completion after this point is missed,
    // even one that comes before the XREAD loop has started.
    const last = (await c.xrevrange(`${prefix}:${STEPS}:events`, "+", "-", "COUNT", 1))[0]?.[0] ?? "0-0";
    events = new QueueEvents(STEPS, { connection: c, prefix, lastEventId: last });
    finished = new Finished(events);
    const log = (what: string) => (e: Error) => process.stderr.write(`[bullmq ${what}] ${e.stack ?? String(e)}\n`);
    events.on("error", log("queue events"));
    steps.on("error", log("queue"));
    flows.on("error", log("flow producer"));
    const stepsWorker = new Worker<StepData>(STEPS, processStep, { ...base, concurrency: CONCURRENCY });
    itemsWorker = new Worker(ITEMS, (job: Job<{ run: string }>) => work(job.data.run, "item"), {
      ...base,
      concurrency: CONCURRENCY,
    });
    workers = [stepsWorker, itemsWorker];
    for (const w of workers) {
      w.on("error", log(`worker ${w.name}`));
      w.on("failed", (job, e) => log(`job ${job?.id}`)(e));
    }
    await Promise.all([steps.waitUntilReady(), flows.waitUntilReady(), events.waitUntilReady()]);
    await Promise.all(workers.map((w) => w.waitUntilReady()));
  };

  const close = async () => {
    await Promise.all(workers.map((w) => w.close()));
    await Promise.all([events?.close(), flows?.close(), steps?.close()]);
    await connection?.quit();
    workers = [];
    itemsWorker = null;
    events = null;
    finished = null;
    flows = null;
    steps = null;
    connection = null;
  };

  return {
    open,
    close,
    async run(shape: Shape) {
      const { flows: producer, finished: done } = opened();
      const run = randomUUID();
      const top = done.wait(jobId(run, planOf(shape.id).top));
      await producer.add(flowOf(shape, run));
      await top;
    },
    async fanOut(n: number, concurrency: number) {
      const { steps: queue, finished: done } = opened();
      if (itemsWorker) itemsWorker.concurrency = concurrency;
      const run = randomUUID();
      // Waits for the plan too: a plan that failed added no join to wait for.
      const all = Promise.all([done.wait(jobId(run, "plan")), done.wait(jobId(run, "join"))]);
      await queue.add("plan", { kind: "plan", run, n } satisfies StepData, { jobId: jobId(run, "plan") });
      await all;
    },
    async startMany(shape: Shape, keys: string[]) {
      await opened().flows.addBulk(keys.map((key) => flowOf(shape, key)));
      return keys;
    },
    async committedSteps(keys: string[]) {
      // Before open: the job hashes as Redis holds them; a completed job has finishedOn and returnvalue.
      const c = new Redis(url, { maxRetriesPerRequest: null });
      try {
        const ids = keys.flatMap((key) => PEERS_DAG8.nodes.map((n) => [key, n.node_id] as const));
        const pipeline = c.pipeline();
        for (const [key, node] of ids)
          pipeline.hmget(`${prefix}:${STEPS}:${jobId(key, node)}`, "finishedOn", "returnvalue");
        const replies = (await pipeline.exec()) ?? [];
        return ids
          .filter((_, i) => {
            const [err, fields] = replies[i] ?? [];
            const [finishedOn, returnvalue] = (fields ?? []) as (string | null)[];
            return !err && finishedOn != null && returnvalue != null;
          })
          .map(([key, node]) => `${key} ${node}`);
      } finally {
        c.disconnect();
      }
    },
    async resume(shape: Shape, keys: string[], onDone: (key: string) => void) {
      // Nothing to tell BullMQ: the new worker's stalled-job check moves the dead one's active
      // jobs back to wait. The bench follows each run's top job to completion.
      await open();
      const { steps: queue, finished: done } = opened();
      const top = planOf(shape.id).top;
      const all = keys.map((key) => done.wait(jobId(key, top)).then(() => onDone(key)));
      // Runs whose top job completed before the kill (or before the stream was read).
      for (const key of keys) {
        if ((await queue.getJobState(jobId(key, top))) === "completed") done.settle(jobId(key, top));
      }
      await Promise.all(all);
    },
    settings: () => ({
      store: "redis",
      redis: server.version,
      // What the server says, not what the bench meant to start.
      durability:
        server.appendonly === "yes"
          ? `Redis append-only file: appendonly yes, appendfsync ${server.appendfsync}${server.appendfsync === "everysec" ? " (fsync every second)" : ""}, save "${server.save}"`
          : `Redis memory only: save "${server.save}"${server.save === "" ? " (no snapshots)" : ""}, appendonly ${server.appendonly}`,
      concurrency: `${CONCURRENCY} per Worker (steps queue; W6 items queue: the run's concurrency)`,
      stalledInterval_ms: "30000 (default)",
      lockDuration_ms: "30000 (default)",
      recovery: "a dead worker's jobs: moved back to wait by the stalled-job check once their lock expired",
      removeOnComplete: "false (default: completed jobs are kept)",
    }),
  };
}
