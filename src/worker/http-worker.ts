/**
 * An external worker: runs an agents module's handlers against a remote `skein serve` through
 * the tasks API (DESIGN §5): long-poll claims up to its free slots, heartbeats while a handler
 * runs, reports success (with the handler's route) or failure, and drops a task the server
 * answers 409 for (its lease was lost: another worker has it); a success the server refuses (400:
 * a route its node does not declare) is logged and reported as the task's failure, not retried. Every heartbeat and report
 * carries the claim's worker_id: the server binds an attempt to it (DESIGN §13). A claim
 * refused for being over a limit (429, 503) is tried again after its `Retry-After`. A handler's
 * `task.progress(data)` is posted to `/v1/tasks/{id}/progress`, one request at a time and at most
 * every 50 ms (the latest value wins), without waiting and without failing the task. A request
 * that meets a connection closed before any answer (the server closing a kept-alive connection
 * as it is reused) is sent again once when sending it twice changes nothing: heartbeats, reports
 * and progress, not claims (see `RESENDABLE`). `skein worker` runs it.
 *
 * @example
 * const worker = new HttpWorker({ server: "http://127.0.0.1:8080", token, agents, concurrency: 4 });
 * const done = worker.run();
 * process.on("SIGTERM", () => worker.stop());
 * await done;
 */
import http from "node:http";
import { declaredSecrets } from "../agents/define-agent.js";
import type { AgentHandler, Task } from "../agents/task.js";
import { isRouted, route } from "../agents/task.js";
import { addUsage, isEmptyUsage, NO_USAGE, usageProblem } from "../core/budget.js";
import type { Json, RunUsage, Usage } from "../core/types.js";
import type { SecretUse } from "../definition/expressions.js";
import { notConfigured, type SecretOption, Secrets } from "../engine/attempts/secrets.js";
import { StepJournal } from "../engine/attempts/steps.js";
import { withRemoteParent } from "../engine/telemetry/tracing.js";
import { ConflictError, RetryableError } from "../errors.js";
import { resendOnReset } from "./connection-reset.js";

export interface HttpWorkerOptions {
  /** The server's base URL, e.g. `http://127.0.0.1:8080`. */
  server: string;
  /** Bearer token (role `agent` or `admin`), if the server has tokens. */
  token?: string;
  agents: Record<string, AgentHandler>;
  /** Most tasks running at once. @defaultValue 4 */
  concurrency?: number;
  /** Names this worker in the visits' holder: `[A-Za-z0-9_.:-]{1,128}`. @defaultValue `<host>-<pid>` */
  workerId?: string;
  /** How long a claim's lease lasts without a heartbeat; heartbeats go every third of it. @defaultValue 30 */
  leaseSeconds?: number;
  /** Long-poll wait of one claim, at most 30. @defaultValue 20 */
  waitSeconds?: number;
  /** Where progress lines go. @defaultValue nothing */
  log?: (line: string) => void;
  /**
   * This worker's secrets (DESIGN §12; `skein worker` reads `SKEIN_SECRET_<NAME>`): put into a
   * task's payload where the server says, for agents that declare them; redacted from outputs
   * and errors. @defaultValue none
   */
  secrets?: Record<string, SecretOption>;
}

/** A claimed task as the API returns it. */
type WireTask = Omit<Task, "signal" | "heartbeat" | "progress" | "reportUsage" | "step" | "route"> & {
  lease_expires_at: number;
  workflow_id: string;
  secrets?: SecretUse[];
  steps?: { name: string; output: Json; attempt: number }[];
};

/**
 * The task routes a reset connection may send again (connection-reset.ts): those where a second
 * copy changes nothing. A heartbeat renews the same lease, fenced by attempt and worker; a report
 * (complete, fail) is fenced by execution_id and attempt, and the same report again is answered
 * `duplicate`; progress is not stored, and a repeat shows the same latest value; a step recorded
 * again is answered with the first record. Not a claim: one
 * the server read has leased tasks, and another would lease more while those wait out their lease
 * (the claim loop tries again after its backoff instead).
 */
const RESENDABLE = new Set(["heartbeat", "complete", "fail", "progress", "steps"]);

/** How often one task's progress is posted at most, ms (the server throttles it the same way). */
const PROGRESS_INTERVAL_MS = 50;

/** An answer of the API that is not 2xx. */
class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** The answer's Retry-After, seconds (429, 503). */
    readonly retryAfterSeconds: number | null = null,
  ) {
    super(message);
  }
}

export class HttpWorker {
  private readonly running = new Set<Promise<void>>();
  private readonly stopping = new AbortController();
  private readonly concurrency: number;
  private readonly leaseSeconds: number;
  private readonly workerId: string;
  private readonly log: (line: string) => void;
  private readonly secrets: Secrets;
  /** Tasks completed, failed and dropped (lost to 409), for the caller's summary. */
  readonly counts = { completed: 0, failed: 0, lost: 0 };

  constructor(private readonly o: HttpWorkerOptions) {
    this.concurrency = o.concurrency ?? 4;
    this.leaseSeconds = o.leaseSeconds ?? 30;
    this.workerId = o.workerId ?? defaultWorkerId();
    this.log = o.log ?? (() => {});
    this.secrets = new Secrets(o.secrets ?? {});
  }

  /** Claims and runs tasks until `stop()`; then waits for the tasks in flight to report. */
  async run(): Promise<void> {
    const types = Object.keys(this.o.agents);
    let backoff = 0;
    while (!this.stopping.signal.aborted) {
      if (this.running.size >= this.concurrency) {
        await Promise.race(this.running);
        continue;
      }
      let tasks: WireTask[];
      try {
        // A stop ends the long poll at once (the server stops waiting when the request goes away).
        const body = await this.call(
          "/v1/tasks/claim",
          {
            agent_types: types,
            worker_id: this.workerId,
            max_tasks: this.concurrency - this.running.size,
            lease_seconds: this.leaseSeconds,
            wait_seconds: this.o.waitSeconds ?? 20,
          },
          this.stopping.signal,
        );
        tasks = (body as { tasks: WireTask[] }).tasks;
        backoff = 0;
      } catch (e) {
        if (this.stopping.signal.aborted) break;
        const limited = e instanceof ApiError && (e.status === 429 || e.status === 503) ? e.retryAfterSeconds : null;
        if (e instanceof ApiError && e.status < 500 && limited === null) throw e; // a refused token or request: stop, say why
        backoff = limited !== null ? limited * 1000 : Math.min(5000, backoff === 0 ? 200 : backoff * 2);
        this.log(`claim failed (${(e as Error).message}); trying again in ${backoff} ms`);
        await delay(backoff, this.stopping.signal);
        continue;
      }
      for (const task of tasks) {
        const p = this.runTask(task).finally(() => this.running.delete(p));
        this.running.add(p);
      }
    }
    await Promise.all(this.running);
  }

  /** Stops claiming; `run()` resolves once the tasks in flight have reported. */
  stop(): void {
    this.stopping.abort();
  }

  private async runTask(wire: WireTask): Promise<void> {
    const handler = this.o.agents[wire.agent_type];
    const lost = new AbortController();
    const at = `${wire.execution_id} attempt ${wire.attempt}`;
    const heartbeat = async (): Promise<boolean> => {
      try {
        await this.call(`/v1/tasks/${encodeURIComponent(wire.execution_id)}/heartbeat`, {
          attempt: wire.attempt,
          worker_id: this.workerId,
          lease_seconds: this.leaseSeconds,
        });
        return true;
      } catch (e) {
        if (e instanceof ApiError && (e.status === 409 || e.status === 404 || e.status === 403)) {
          lost.abort(new Error(`lost ${at}: ${e.message}`));
          return false;
        }
        return true; // the server was unreachable: the next heartbeat may get through
      }
    };
    const timer = setInterval(() => void heartbeat(), (this.leaseSeconds * 1000) / 3);
    const progress = new ProgressPoster(
      (body) => this.call(`/v1/tasks/${encodeURIComponent(wire.execution_id)}/progress`, body),
      { attempt: wire.attempt, worker_id: this.workerId },
      (line) => this.log(`progress of ${at}: ${line}`),
    );
    // What the handler reports with task.reportUsage, sent with the report (DESIGN §12).
    let usage: RunUsage = { ...NO_USAGE };
    const reportUsage = (u: Usage): void => {
      const problem = usageProblem(u);
      if (problem) this.log(`usage of ${at} ignored: ${problem}`);
      else usage = addUsage(usage, u);
    };
    const journal = this.journal(wire, lost);
    let report: { path: string; body: object };
    try {
      if (!handler) throw new Error(`this worker has no handler for agent_type "${wire.agent_type}"`);
      const { secrets: uses, steps: _, ...data } = wire;
      const payload = uses && uses.length > 0 ? this.withSecrets(wire, handler, uses) : wire.payload;
      const task = {
        ...data,
        payload,
        signal: lost.signal,
        heartbeat,
        // Redacted like the output (DESIGN §13.1): stream subscribers never see a value.
        progress: (data: unknown) => progress.offer(this.secrets.redact(data)),
        reportUsage,
        step: (name: string, fn: Parameters<Task["step"]>[1]) => journal.step(name, fn),
        route,
      } as Task;
      // The agent's own spans (fetch, an LLM SDK) nest under the attempt's span on the server.
      const value = await withRemoteParent(wire.traceparent, () => handler(task));
      const routed = isRouted(value) ? value : null;
      const output = this.secrets.redact(toJson(routed ? routed.output : value));
      report = {
        path: "complete",
        body: { attempt: wire.attempt, worker_id: this.workerId, output, ...(routed ? { next: routed.next } : {}) },
      };
    } catch (e) {
      const error = e instanceof Error ? e : new Error(String(e));
      report = {
        path: "fail",
        body: {
          attempt: wire.attempt,
          worker_id: this.workerId,
          error: {
            message: this.secrets.redact(error.message),
            ...(error instanceof RetryableError && error.retryAfterMs !== undefined
              ? { retry_after_ms: error.retryAfterMs }
              : {}),
            // A service's 429 holds the agent type on every engine (DESIGN §17).
            ...(error instanceof RetryableError && error.rateLimited ? { rate_limited: true } : {}),
          },
          retryable: error.name !== "NonRetryableError",
        },
      };
    } finally {
      clearInterval(timer);
      progress.end(); // a value still waiting would reach the server after the report: dropped
    }
    if (!isEmptyUsage(usage)) report.body = { ...report.body, usage };
    if (lost.signal.aborted) {
      this.counts.lost += 1;
      this.log(`dropped ${at}: the lease was lost`);
      return;
    }
    await this.report(wire, at, report);
  }

  /**
   * The task's steps (DESIGN §14.1): those the claim answered are replayed, new ones recorded with
   * POST .../steps before their value returns; a refused one (409) loses the task.
   */
  private journal(wire: WireTask, lost: AbortController): StepJournal {
    const recorded = new Map((wire.steps ?? []).map((s) => [s.name, s.output]));
    const path = `/v1/tasks/${encodeURIComponent(wire.execution_id)}/steps`;
    const recorder = {
      recorded: async () => recorded,
      record: async (name: string, output: Json) => {
        try {
          const body = { attempt: wire.attempt, worker_id: this.workerId, name, output };
          return (await this.call(path, body)) as { output: Json; attempt: number };
        } catch (e) {
          if (e instanceof ApiError && e.status === 409) throw new ConflictError(e.message);
          throw e;
        }
      },
      held: () => !lost.signal.aborted,
      lost: (reason: string) => lost.abort(new Error(`lost ${wire.execution_id} attempt ${wire.attempt}: ${reason}`)),
    };
    // The server checks the size (its maxPayloadBytes) and answers 400 over it.
    const limits = {
      signal: () => lost.signal,
      maxBytes: Number.POSITIVE_INFINITY,
      redact: (v: Json) => this.secrets.redact(v),
    };
    return new StepJournal(wire, recorder, limits);
  }

  /**
   * The payload with this worker's secrets put in where the server said, or a NonRetryableError:
   * a secret this worker lacks, or one its agent did not declare.
   */
  private withSecrets(wire: WireTask, handler: AgentHandler, uses: SecretUse[]): Json {
    const names = [...new Set(uses.flatMap((u) => u.names))];
    const missing = names.find((n) => !this.secrets.has(n));
    if (missing !== undefined) throw nonRetryable(`${notConfigured(missing)} of this worker`);
    const undeclared = names.filter((n) => !declaredSecrets(handler).includes(n));
    if (undeclared.length > 0) {
      const list = undeclared.map((n) => JSON.stringify(n)).join(", ");
      throw nonRetryable(
        `node ${wire.node_id} reads ${undeclared.map((n) => `secrets.${n}`).join(", ")} in its payload, but agent "${wire.agent_type}" does not declare it: define it with defineAgent({ secrets: [${list}] }, handler)`,
      );
    }
    for (const name of names) {
      const refused = this.secrets.workflowRefusal(name, wire.workflow_id);
      if (refused !== null) throw nonRetryable(`node ${wire.node_id}: ${refused}`);
    }
    return this.secrets.fill(wire.payload, uses);
  }

  /** Sends a report; repeats it while the server is unreachable (an identical report is answered once). */
  private async report(wire: WireTask, at: string, report: { path: string; body: object }): Promise<void> {
    for (let wait = 200; ; wait = Math.min(wait * 2, 5000)) {
      try {
        await this.call(`/v1/tasks/${encodeURIComponent(wire.execution_id)}/${report.path}`, report.body);
        if (report.path === "complete") this.counts.completed += 1;
        else this.counts.failed += 1;
        return;
      } catch (e) {
        if (e instanceof ApiError && e.status === 409) {
          this.counts.lost += 1;
          this.log(`dropped ${at}: ${e.message}`);
          return;
        }
        if (e instanceof ApiError && e.status < 500) {
          this.log(`report of ${at} refused (${e.status}): ${e.message}`);
          // A refused success (a route the node does not declare) leaves the attempt ours: fail it
          // with the server's reason, as an in-process agent's bad route fails the visit, rather
          // than leave the run waiting for the lease to run out.
          if (report.path === "complete") return this.report(wire, at, refusedReport(report.body, e));
          this.counts.failed += 1;
          return;
        }
        // Past the lease nobody will take the report: the task is someone else's by then.
        if (Date.now() > wire.lease_expires_at + wait) {
          this.counts.lost += 1;
          this.log(`gave up reporting ${at}: ${(e as Error).message}`);
          return;
        }
        await delay(wait);
      }
    }
  }

  private async call(path: string, body: object, signal?: AbortSignal): Promise<unknown> {
    const url = new URL(path, this.o.server);
    const route = path.slice(path.lastIndexOf("/") + 1);
    const res = await resendOnReset(RESENDABLE.has(route), () => postJson(url, body, this.o.token, signal));
    const parsed = res.body as ErrorAnswer | null;
    if (res.status >= 300) throw new ApiError(res.status, errorText(parsed, res.status), res.retryAfterSeconds);
    return parsed;
  }
}

/**
 * One task's progress on its way to the server: at most one request in flight, at most one every
 * PROGRESS_INTERVAL_MS, the latest value replacing any waiting one. Never throws: a value that is
 * not JSON or a failed request is logged (once per task for bad values) and dropped.
 */
class ProgressPoster {
  private waiting: { progress: unknown } | null = null;
  private sending = false;
  private timer: NodeJS.Timeout | null = null;
  private nextAt = 0;
  private ended = false;
  private warned = false;

  constructor(
    private readonly post: (body: object) => Promise<unknown>,
    private readonly who: { attempt: number; worker_id: string },
    private readonly log: (line: string) => void,
  ) {}

  offer(data: unknown): void {
    if (this.ended) return;
    let text: string | undefined;
    try {
      text = JSON.stringify(data);
    } catch {
      text = undefined;
    }
    if (text === undefined) {
      if (!this.warned) this.log("dropped a value that is not JSON (send plain objects, arrays, strings, numbers)");
      this.warned = true;
      return;
    }
    this.waiting = { progress: JSON.parse(text) };
    this.next();
  }

  end(): void {
    this.ended = true;
    this.waiting = null;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private next(): void {
    if (this.sending || this.timer || this.waiting === null || this.ended) return;
    const wait = this.nextAt - Date.now();
    if (wait > 0) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.next();
      }, wait);
      return;
    }
    const body = { ...this.who, ...this.waiting };
    this.waiting = null;
    this.sending = true;
    this.post(body)
      .then(
        (answer) => {
          // The attempt no longer runs: nothing more of it is worth sending.
          if ((answer as { delivered?: boolean } | null)?.delivered === false) this.end();
        },
        (e: unknown) => {
          this.log(`not delivered: ${(e as Error).message}`);
          if (e instanceof ApiError && (e.status === 403 || e.status === 404 || e.status === 409)) this.end();
        },
      )
      .finally(() => {
        this.sending = false;
        this.nextAt = Date.now() + PROGRESS_INTERVAL_MS;
        this.next();
      });
  }
}

/** Connections kept open between requests: a worker talks to one server all day. */
const agent = new http.Agent({ keepAlive: true });

/**
 * POSTs JSON and reads the JSON answer (node:http with keep-alive: a fraction of fetch's CPU per
 * request, which matters when workers and server share a machine).
 */
export function postJson(
  url: URL,
  body: object,
  token?: string,
  signal?: AbortSignal,
): Promise<{ status: number; body: unknown; retryAfterSeconds: number | null }> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: "POST",
        agent,
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(payload),
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        ...(signal ? { signal } : {}),
      },
      (res) => {
        // A reset from here on cut an answer the server may have acted on: not the error of a
        // request that never arrived, which is the only one sent again (connection-reset.ts).
        res.on("error", (e) => reject(new Error(`${url.pathname}: the answer was cut off (${e.message})`)));
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          const retryAfter = Number(res.headers["retry-after"]);
          try {
            resolve({
              status: res.statusCode ?? 0,
              body: text === "" ? null : JSON.parse(text),
              retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : null,
            });
          } catch {
            reject(new Error(`${url.pathname}: the server answered ${res.statusCode} with something not JSON`));
          }
        });
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

/** The API's error shape. */
type ErrorAnswer = { error?: { message?: string; details?: { problems?: { path: string; message: string }[] } } };

/** An error answer's message with its problems (a 400 says what is wrong only in them). */
function errorText(answer: ErrorAnswer | null, status: number): string {
  const message = answer?.error?.message ?? `HTTP ${status}`;
  const problems = answer?.error?.details?.problems ?? [];
  return problems.length === 0 ? message : `${message}: ${problems.map((p) => `${p.path}: ${p.message}`).join("; ")}`;
}

/** The failure a refused success report becomes: not retried (the handler would route the same way), usage kept. */
function refusedReport(complete: object, refusal: ApiError): { path: string; body: object } {
  const { attempt, worker_id, usage } = complete as { attempt: number; worker_id: string; usage?: RunUsage };
  const error = { message: `the server refused the handler's result: ${refusal.message}`.slice(0, 10_000) };
  return { path: "fail", body: { attempt, worker_id, error, retryable: false, ...(usage ? { usage } : {}) } };
}

/** The handler's value as JSON (what the server would accept), or a failure that says why not. */
function toJson(value: unknown): Json {
  const text = JSON.stringify(value === undefined ? null : value);
  if (text === undefined) throw nonRetryable("the output is not JSON: return plain objects, arrays and values");
  return JSON.parse(text) as Json;
}

function nonRetryable(message: string): Error {
  const e = new Error(message);
  e.name = "NonRetryableError";
  return e;
}

/** `<host>-<pid>`, with anything a worker_id may not hold replaced. */
function defaultWorkerId(): string {
  return `${process.env.HOSTNAME ?? "worker"}-${process.pid}`.replace(/[^A-Za-z0-9_.:-]/g, "_").slice(0, 128);
}

function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
