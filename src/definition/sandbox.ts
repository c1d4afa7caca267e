/**
 * @internal The expression sandbox: a worker thread that evaluates the expressions that may run
 * long or big (function calls, regular expressions, ranges, lambdas; see `needsSandbox` in
 * expressions.ts), so a poison one fails its visit instead of freezing or killing the engine.
 *
 * JSONata checks its time limit between evaluation steps, and one built-in call (a regular
 * expression backtracking, `$sort` or `$distinct` of a long list) is one step: only stopping the
 * thread bounds it. So each evaluation has a hard deadline; past it the worker is terminated
 * (which interrupts even a synchronous built-in) and a new one starts for the next expression.
 * The worker's heap is limited, and its size checks (sandbox-worker.ts) refuse oversized values
 * before a single allocation can grow past that limit. One evaluation runs at a time, in order:
 * a poison expression delays the others by at most the time limit.
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { SANDBOX_WORKER_SOURCE } from "./sandbox-worker.js";

/** The limits of one evaluation. */
export const EXPRESSION_LIMITS = {
  /** Wall-clock time of one evaluation, ms. */
  timeoutMs: 1000,
  /** Evaluation depth (JSONata's stack guardrail). */
  stack: 2000,
  /** Longest string an expression may make, in UTF-16 units. */
  maxChars: 10_000_000,
  /** Longest list an expression may make. */
  maxItems: 1_000_000,
  /** The worker's heap, MB. */
  heapMb: 256,
} as const;

/** A failure inside the sandbox, shaped like a JSONata error (message, code, position). */
export interface SandboxFailure {
  message: string;
  code?: string;
  position?: number;
}

interface Job {
  id: number;
  source: string;
  context: unknown;
  /** Bound in the worker as the context's non-enumerable `secrets` (a structured clone would drop it). */
  secrets: Record<string, string> | undefined;
  resolve: (value: unknown) => void;
  reject: (error: SandboxFailure) => void;
}

type Reply =
  | { ready: true }
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: SandboxFailure };

/**
 * How long a new worker may take to start (load JSONata) before its first expression's time
 * counts. Not the expression's time: on a loaded machine a start takes hundreds of ms.
 */
const START_LIMIT_MS = 30_000;

class Sandbox {
  private worker: Worker | null = null;
  /** The worker has loaded JSONata: an expression's deadline counts from when it is sent. */
  private ready = false;
  private readonly queue: Job[] = [];
  private current: Job | null = null;
  private timer: NodeJS.Timeout | null = null;
  private nextId = 1;

  evaluate(source: string, context: unknown, secrets?: Record<string, string>): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.queue.push({ id: this.nextId++, source, context, secrets, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    if (this.current) return;
    const job = this.queue.shift();
    if (!job) {
      // Idle: never the reason a process stays alive.
      this.worker?.unref();
      return;
    }
    const worker = this.spawn();
    worker.ref();
    this.current = job;
    try {
      worker.postMessage({ id: job.id, source: job.source, context: job.context, secrets: job.secrets });
    } catch (e) {
      // The context cannot be cloned (not JSON data): the caller's mistake, not the worker's.
      this.fail(job, { message: e instanceof Error ? e.message : String(e) }, false);
      return;
    }
    this.startDeadline(job);
  }

  /** Arms the job's deadline: the expression's time limit once the worker runs, else its start-up's. */
  private startDeadline(job: Job): void {
    if (this.timer) clearTimeout(this.timer);
    const failure: SandboxFailure = this.ready
      ? {
          message: `the expression ran longer than ${EXPRESSION_LIMITS.timeoutMs} ms (a built-in function or regular expression on large data?) and was stopped`,
          code: "timeout",
        }
      : { message: `the expression sandbox did not start within ${START_LIMIT_MS} ms`, code: "sandbox" };
    this.timer = setTimeout(
      () => this.fail(job, failure, true),
      this.ready ? EXPRESSION_LIMITS.timeoutMs : START_LIMIT_MS,
    );
  }

  private spawn(): Worker {
    if (this.worker) return this.worker;
    const module = createRequire(import.meta.url).resolve("jsonata");
    const worker = new Worker(SANDBOX_WORKER_SOURCE, {
      eval: true,
      workerData: {
        module,
        limits: {
          maxChars: EXPRESSION_LIMITS.maxChars,
          maxItems: EXPRESSION_LIMITS.maxItems,
          guardrails: { timeout: EXPRESSION_LIMITS.timeoutMs, stack: EXPRESSION_LIMITS.stack },
        },
      },
      resourceLimits: { maxOldGenerationSizeMb: EXPRESSION_LIMITS.heapMb, maxYoungGenerationSizeMb: 32 },
    });
    worker.on("message", (reply: Reply) => {
      if ("ready" in reply) {
        if (this.worker !== worker) return;
        this.ready = true;
        if (this.current) this.startDeadline(this.current); // sent while it started
        return;
      }
      const job = this.current;
      if (!job || reply.id !== job.id) return;
      this.settle();
      if (reply.ok) job.resolve(reply.value);
      else job.reject(reply.error);
      this.pump();
    });
    worker.on("error", (err: Error & { code?: string }) => {
      if (this.worker !== worker) return;
      this.worker = null;
      const job = this.current;
      if (!job) return;
      const outOfMemory = err.code === "ERR_WORKER_OUT_OF_MEMORY";
      this.fail(
        job,
        {
          message: outOfMemory
            ? `the expression used more than ${EXPRESSION_LIMITS.heapMb} MB of memory and was stopped`
            : `the expression sandbox stopped: ${err.message}`,
          code: outOfMemory ? "memory" : "sandbox",
        },
        false,
      );
    });
    worker.on("exit", () => {
      if (this.worker === worker) this.worker = null;
    });
    this.worker = worker;
    this.ready = false;
    return worker;
  }

  private settle(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.current = null;
  }

  /** Fails the current job; `stop` terminates the worker (a new one starts for the next job). */
  private fail(job: Job, error: SandboxFailure, stop: boolean): void {
    if (this.current !== job) return;
    this.settle();
    if (stop && this.worker) {
      const worker = this.worker;
      this.worker = null;
      void worker.terminate();
    }
    job.reject(error);
    this.pump();
  }
}

let sandbox: Sandbox | null = null;

/** Evaluates a JSONata expression in the sandbox; rejects with a SandboxFailure. */
export function evaluateInSandbox(
  source: string,
  context: unknown,
  secrets?: Record<string, string>,
): Promise<unknown> {
  sandbox ??= new Sandbox();
  return sandbox.evaluate(source, context, secrets);
}
