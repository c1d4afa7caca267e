/**
 * What external workers send (DESIGN §5, §13): the claim, heartbeat and report requests, who
 * sends them and the holder that names, the limits, and the checks a request passes before
 * ExternalWorkers acts on it. The HTTP layer validates its bodies against the same patterns.
 */

import type { Task } from "../../agents/task.js";
import type { Json, Usage } from "../../core/types.js";
import type { SecretUse } from "../../definition/expressions.js";
import type { Problem } from "../../errors.js";

/**
 * A claimed task as an external worker receives it: DESIGN §5's fields (an in-process Task's
 * data), the run's workflow, the attempt's deadline and the lease; `traceparent` is its attempt
 * span's (DESIGN §9).
 */
export interface ExternalTask
  extends Omit<Task, "signal" | "heartbeat" | "progress" | "reportUsage" | "step" | "route"> {
  workflow_id: string;
  workflow_version: number;
  /** When the attempt times out (epoch ms). */
  deadline_at: number;
  /** When the lease ends unless the worker heartbeats (epoch ms). */
  lease_expires_at: number;
  /**
   * Where the payload holds `"[secret NAME]"` placeholders the worker fills from its own
   * secrets (DESIGN §12): each path under the payload with the names read there. Absent: none.
   */
  secrets?: SecretUse[];
  /** The steps the visit recorded (DESIGN §14.1), in the order recorded: `step` replays them. Absent: none. */
  steps?: RecordedStep[];
}

/** A worker's id: no free text, so that the holder and the audit trail cannot be spoofed. */
export const WORKER_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;

/** `<run_id>:<node_id>:<visit>` (run ids are UUIDs), and `:compensate` after it for a compensation. */
export const EXECUTION_ID_PATTERN =
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[A-Za-z0-9_-]{1,64}:[1-9][0-9]{0,9}(?::compensate|~(?:0|[1-9][0-9]{0,9}))?$/;

/** Who claims or reports (DESIGN §13): the worker, and over HTTP the token it presented. */
export interface WorkerIdentity {
  /** Names the worker in the holder and the events: `[A-Za-z0-9_.:-]{1,128}`. */
  worker_id: string;
  /**
   * The bearer token the worker presented (none in tokenless mode and in process): its name is
   * part of the holder (tokens sharing a name are one principal, so a token being rotated keeps
   * its tasks), and it claims and reports only its agent types (null: any).
   */
  token?: { name: string; agent_types: readonly string[] | null };
}

/** The holder a claim records, which every later heartbeat and report must match. */
export function holderOf(who: WorkerIdentity): string {
  // A worker_id never contains '/': nothing after the token's name can be forged through it.
  return who.token === undefined ? `worker:${who.worker_id}` : `worker:${who.token.name}/${who.worker_id}`;
}

export interface ClaimRequest extends WorkerIdentity {
  agent_types: string[];
  /** @defaultValue 1 */
  max_tasks?: number;
  /**
   * How long the lease lasts without a heartbeat: never past the node's timeout, nor past its
   * `heartbeat_timeout` after the claim or the last heartbeat. @defaultValue 60
   */
  lease_seconds?: number;
  /** How long to wait for a task when none is ready, at most 30. @defaultValue 0 */
  wait_seconds?: number;
  /** Aborted when the caller went away (its HTTP request closed): stop waiting, claim nothing more. */
  signal?: AbortSignal;
}

/** A heartbeat: renews the lease (as at the claim, never past the node's heartbeat_timeout). */
export type HeartbeatRequest = WorkerIdentity & { attempt: number; lease_seconds?: number };
/** Partial output of a held attempt (DESIGN §11.6): delivered live, throttled per attempt, never stored. */
export type ProgressRequest = WorkerIdentity & { attempt: number; progress: unknown };
/** A durable step of a held attempt (DESIGN §14.1): `output` recorded under `name`, unique within the visit. */
export type StepRequest = WorkerIdentity & { attempt: number; name: string; output: unknown };
/** What recording a step answers: `recorded`, or `duplicate` when the name held a record already (its output is answered). */
export interface StepAnswer {
  status: "recorded" | "duplicate";
  /** The output recorded under the name, and the attempt that recorded it. */
  output: Json;
  attempt: number;
}
/** A step the visit recorded before, as a claim hands it to a worker. */
export interface RecordedStep {
  name: string;
  output: Json;
  attempt: number;
}

/**
 * A success: `next` is the agent's route. `usage`: what the attempt used (DESIGN §12), added to
 * the run (and every run above it) when the report is accepted.
 */
export type CompleteRequest = WorkerIdentity & {
  attempt: number;
  output?: unknown;
  next?: string | string[];
  usage?: Usage;
};
/**
 * A failure, retried unless `retryable` is false; `error.retry_after_ms` sets the retry's delay
 * (a Retry-After); `error.rate_limited`: the service answered 429, so with `retry_after_ms` the
 * agent type is held on every engine for that long (DESIGN §17); `usage` as for a success.
 */
export type FailRequest = WorkerIdentity & {
  attempt: number;
  error: { message: string; retry_after_ms?: number; rate_limited?: boolean; [key: string]: unknown };
  retryable?: boolean;
  usage?: Usage;
};

export const MAX_WAIT_SECONDS = 30;
export const MAX_TASKS = 100;

/** The problems of a report's execution id, worker_id and attempt. */
export function checkReport(executionId: string, request: WorkerIdentity & { attempt: number }): Problem[] {
  const problems: (Problem | null)[] = [
    typeof executionId === "string" && EXECUTION_ID_PATTERN.test(executionId)
      ? null
      : {
          path: "execution_id",
          message: `must be <run_id>:<node_id>:<visit> (with :compensate for a compensation, ~<index> for a map item), as the task gave it; got ${JSON.stringify(executionId)}`,
        },
    badWorkerId(request.worker_id),
    Number.isInteger(request.attempt) && request.attempt >= 1
      ? null
      : { path: "attempt", message: "must be the attempt's number (1 or more)" },
  ];
  return problems.filter((p) => p !== null);
}

export function badWorkerId(workerId: unknown): Problem | null {
  if (typeof workerId === "string" && WORKER_ID_PATTERN.test(workerId)) return null;
  return {
    path: "worker_id",
    message: `must be 1 to 128 letters, digits, '_', '.', ':' or '-' (it names the worker in the holder and the events); got ${JSON.stringify(workerId)}`,
  };
}

/** A problem when `value` is not a number (an integer if asked) from `min` to `max`. */
export function badNumber(value: unknown, min: number, max: number, path: string, integer: boolean): Problem | null {
  const ok = typeof value === "number" && Number.isFinite(value) && value >= min && value <= max;
  if (ok && (!integer || Number.isInteger(value))) return null;
  return {
    path,
    message: `must be ${integer ? "an integer" : "a number"} from ${min} to ${max}, got ${JSON.stringify(value)}`,
  };
}
