/**
 * What the dispatcher queues for a flush: one variant per kind of input (results, reports,
 * claims, decisions, cancels, redrives, forks, starts), and the task a claim answers with.
 */
import type { Task } from "../../agents/task.js";
import { itemKeyOf, runOfExecution } from "../../core/attempt.js";
import type { ApprovalRequest } from "../../core/kinds/agent.js";
import type { Decision, ReviewDecision } from "../../core/scheduler.js";
import type {
  InboxEvent,
  Json,
  NewEvent,
  Run,
  RunUsage,
  StartFlow,
  Usage,
  Visit,
  VisitError,
} from "../../core/types.js";
import type { MigrationRequest } from "../../core/upgrade.js";
import type { Problem } from "../../errors.js";
import type { ItemKey, StepRow, VisitKey } from "../../store/store.js";

/** A task as claimed in the transaction: the agent's task without its signal and callbacks. */
export type ClaimedTask = Omit<
  Task,
  "signal" | "heartbeat" | "progress" | "reportUsage" | "step" | "route" | "traceparent"
> & {
  workflow_id: string;
  workflow_version: number;
  /** The run's stored traceparent: the parent of the attempt's span (DESIGN §9). */
  run_traceparent: string;
  deadline_at: number;
  lease_expires_at: number | null;
  /** The runs its usage reports add to: its run, then every run above it (DESIGN §12). */
  usage_runs: string[];
  /** The tokens its claim took of its agent type's `tokens_per_minute` window (absent without one): its result settles them. */
  expected_tokens?: number;
};

export type Input =
  /** `flow`: a start with a key (DESIGN §17), null without one. */
  | { kind: "start"; run: Run; flow: StartFlow | null; done: Callback<Run> }
  /** An in-process attempt's result (the runner's outcome of its handler). */
  | AttemptResult
  /** A visit's resolved payload, and the value of its node's `concurrency.key` (null without one). */
  | { kind: "payload"; key: VisitKey; payload: Json; concurrency_key: string | null }
  | { kind: "payload_error"; key: VisitKey; error: VisitError }
  /**
   * Usage an in-process attempt reported (DESIGN §12), fenced by attempt like a result (dropped
   * when the attempt no longer holds its row). Added to each of `usage_runs` (the attempt's run
   * and every run above it, all locked as the flush begins). Later calls add to it until a
   * flush takes it (`taken`), so a burst of calls is one input.
   */
  | { kind: "usage"; execution_id: string; attempt: number; usage: RunUsage; usage_runs: string[]; taken: boolean }
  | { kind: "heartbeat"; execution_id: string; attempt: number; done: Callback<boolean> }
  | {
      kind: "review";
      run_id: string;
      node_id: string;
      execution_id?: string;
      decision: ReviewDecision;
      /** The edges an approval fires, worked out beforehand (JSONata is async), or why that failed. */
      next: Decision | { reason: string; message: string };
      /** The run's workflow version `next` was worked out against: a run moved since (migrateRuns) is decided again. */
      workflow_version: number;
      done: Callback<Visit>;
    }
  /** An event sent to a run (DESIGN §11.2): delivered to its oldest waiting wait_event, else kept in its inbox. */
  | { kind: "send_event"; run_id: string; event: InboxEvent; done: Callback<SendEventAnswer> }
  /** An event by key (§11.3): delivered to every run of `run_ids` still waiting on it, and kept for buffers. */
  | {
      kind: "publish_event";
      run_ids: string[];
      event: InboxEvent;
      /** The publisher's scope (DESIGN §13.1): only runs of workflows it covers receive it; null: every run. */
      scope: string[] | null;
      /** The runs its triggers start (DESIGN §17, engine/triggers.ts), each unless its key holds one already. */
      triggered: TriggeredRun[];
      /** The triggers that matched but cannot start a run: answered, and logged, unless the event is a duplicate. */
      refused: TriggerRefusal[];
      done: Callback<PublishEventAnswer>;
    }
  | { kind: "cancel"; run_id: string; reason?: string; compensate: boolean; done: Callback<Run> }
  /** An operator pauses or resumes a run (DESIGN §16); `by` and `reason` are recorded. */
  | { kind: "pause" | "resume"; run_id: string; by: string | null; reason: string | null; done: Callback<Run> }
  /** An operator fails a node's waiting visit for good (`failVisit`): its failure path is taken. */
  | {
      kind: "fail_node";
      run_id: string;
      node_id: string;
      by: string | null;
      reason: string | null;
      done: Callback<Run>;
    }
  /** A redrive; `fresh_steps`: the new visits start without the durable steps of those they replace. */
  | { kind: "retry"; run_id: string; from: string | null; force: boolean; fresh_steps: boolean; done: Callback<Run> }
  /**
   * A fork (DESIGN §16): `run`, a new run of the workflow (checked and built by the engine,
   * `forked_from` set), keeps what source run `run_id` did before `from` and runs the rest with
   * `payloads`. The source is read, never changed.
   */
  | {
      kind: "fork";
      run_id: string;
      from: string;
      run: Run;
      payloads: Record<string, Json>;
      input_edited: boolean;
      done: Callback<Run>;
    }
  /**
   * Runs moved to another version of their workflow (DESIGN §16, migrateRuns): each checked again
   * under its lock, as it is now (core/upgrade.ts), and moved, or answered with every reason and
   * left unchanged. `version`: the run's version as the caller read it (answered for a run gone since).
   */
  | {
      kind: "migrate";
      runs: { run_id: string; version: number }[];
      request: MigrationRequest;
      done: Callback<MigrateAnswer>;
    }
  /**
   * A held map visit a flush left work for (bounded-work.ts): its next items to write and start
   * (`advance`), or, once it ended, its running items still to cancel (`cancel`).
   */
  | { kind: "continue_map"; execution_id: string; step: "advance" | "cancel" }
  /** An event about a run that changes no state (a notifier that failed for good). */
  | { kind: "event"; event: NewEvent }
  /** An external worker claims ready visits of some agent types (DESIGN §5, HTTP API). */
  | {
      kind: "claim";
      agent_types: string[];
      holder: string;
      max: number;
      lease_ms: number;
      done: Callback<ClaimedTask[]>;
    }
  /**
   * An external worker's report: its attempt's result, answered, or refused with a
   * ForbiddenError (an agent type the token may not report) or a ConflictError (an attempt it
   * does not hold).
   */
  | {
      kind: "report";
      result: AttemptResult;
      /** Who sends it: the holder its claim recorded (`worker:...`, DESIGN §13). */
      holder: string;
      /** The agent types the sender's token may report; null: any. */
      agent_types: readonly string[] | null;
      /** The usage sent with it (DESIGN §12): counted when the report is accepted, before the attempt ends. */
      usage: Usage | null;
      /** With `usage`: the runs it adds to (the attempt's and every run above it); else empty. */
      usage_runs: string[];
      done: Callback<ReportAnswer>;
    }
  /**
   * A durable step an attempt recorded (DESIGN §14.1), fenced like a result: refused with a
   * ConflictError when the attempt no longer holds its visit. Answered, once committed, with the
   * row recorded under its name: this one, or the one recorded before (the first record wins).
   */
  | {
      kind: "step";
      execution_id: string;
      attempt: number;
      name: string;
      output: Json;
      /** Bytes of the output's JSON. */
      size: number;
      /** A worker's step: who sends it, checked like its report; absent in process. */
      sender?: { holder: string; agent_types: readonly string[] | null };
      done: Callback<StepRow>;
    }
  /**
   * Partial output of an attempt (DESIGN §15), kept as the run's `node.progress` event while
   * the attempt holds its visit; dropped without a word once it does not (its end came first).
   */
  | { kind: "progress"; execution_id: string; attempt: number; progress: Json }
  /**
   * The child run that is an agent's tool call (`<turn>:<index>`, DESIGN §14.2), asked for by the
   * attempt holding the visit: answered with its run id (found under its key when an earlier
   * attempt started it); refused with a ConflictError when the attempt no longer holds the visit,
   * a NonRetryableError when the child may not start (the call's failure).
   */
  | {
      kind: "tool_run";
      execution_id: string;
      attempt: number;
      call: string;
      workflow_id: string;
      version?: number | null;
      input: Json;
      done: Callback<string>;
    }
  /** An external worker's heartbeat: its lease renewed for `lease_ms`, checked like a report. */
  | {
      kind: "worker_heartbeat";
      execution_id: string;
      attempt: number;
      lease_ms: number;
      holder: string;
      agent_types: readonly string[] | null;
      done: Callback<ReportAnswer>;
    };

/**
 * An attempt's result, of a visit or a compensation row: what an in-process handler's outcome
 * became, and what an external worker reports (inside a `report` input). One vocabulary,
 * applied by one call (writer/results.ts `applyResult`), fenced by attempt (DESIGN §5).
 * `fail_visit`: a failure of the visit itself, not retried (invalid_next, when_error).
 * A success's `decision` is null only in a worker's report whose edges were not worked out
 * because the attempt had already ended (DESIGN §13: a `when` is evaluated only for the holder
 * of a running attempt): such a result is never applied.
 */
export type AttemptResult = (
  | { kind: "success"; execution_id: string; attempt: number; output: Json; decision: Decision | null }
  | { kind: "failure"; execution_id: string; attempt: number; error: VisitError; retryable: boolean }
  | { kind: "fail_visit"; execution_id: string; attempt: number; reason: string; error: VisitError }
  /** An agent's tool call waits for a person (core/kinds/agent.ts): the visit is IN_REVIEW, the attempt ends. */
  | { kind: "await_approval"; execution_id: string; attempt: number; request: ApprovalRequest }
) & {
  /**
   * Of an attempt of a type with a `tokens_per_minute` window (writer/rates.ts): the tokens its
   * claim took (null when the engine applying it does not know: worked out again) and the tokens
   * it reported using, settled with the window when the result is applied.
   */
  tokens?: { expected: number | null; used: number };
};

/**
 * The port through which the attempt runner and the external workers hand the writer what they
 * produce (results, heartbeats, usage, payloads, claims): they never hold the dispatcher.
 */
export type Submit = (input: Input) => void;

export interface ReportAnswer {
  /** `duplicate`: the same report was applied before; nothing changed this time. */
  status: "accepted" | "duplicate";
  /** The attempt's lease after a heartbeat. */
  lease_expires_at: number | null;
}

/** What sending an event did (DESIGN §11.2). `duplicate`: its idempotency key was sent before; nothing changed. */
export interface SendEventAnswer {
  event_id: string;
  delivered_to: { node_id: string; visit: number } | null;
  buffered: boolean;
  duplicate: boolean;
}

/** What a `migrate` input did: the runs it moved, and those it left, each with its reasons. */
export interface MigrateAnswer {
  moved: { run_id: string; from_version: number }[];
  incompatible: { run_id: string; from_version: number; reasons: string[] }[];
}

/** What publishing an event by key did: the waits it reached (DESIGN §11.3) and the runs its triggers started (§17). */
export interface PublishEventAnswer {
  event_id: string;
  delivered_to: { run_id: string; node_id: string; visit: number }[];
  /** The event was published before under its idempotency key: nothing changed, and `started` lists the runs it started then. */
  duplicate: boolean;
  /**
   * The runs the workflows' triggers started: one per workflow whose latest version declares the
   * event (and its key, if the trigger names one) that the publisher's scope covers. A run that
   * a trigger started for the same event before (same name, key and idempotency key) is listed,
   * not started again.
   */
  started: { workflow_id: string; workflow_version: number; run_id: string }[];
  /** The triggers that matched but started no run, with why; the other triggers and the waits are not held back by them. */
  not_started: TriggerRefusal[];
}

/** A run a trigger starts, unless one was started under its key before (the run's `idempotency_key`). */
export interface TriggeredRun {
  run: Run;
  /** The trigger's place in its workflow's `triggers`. */
  trigger: number;
}

/** A trigger that matched an event but started no run, and why (the publish answers it; it is logged). */
export interface TriggerRefusal {
  workflow_id: string;
  workflow_version: number;
  /** The trigger's place in its workflow's `triggers`. */
  trigger: number;
  /**
   * `input_failed`: a template of the trigger's input failed; `input_invalid`: the input it made
   * is not JSON, too large, or not of the workflow's input_schema; `idempotency_key_taken`: a run
   * the engine did not start holds the trigger's key.
   */
  reason: "input_failed" | "input_invalid" | "idempotency_key_taken";
  message: string;
  /** Each problem with its path: a template's (`triggers[0].input.total`) or the input's (`input.total`). */
  problems: Problem[];
}

export type Callback<T> = { resolve(value: T): void; reject(error: unknown): void };

export type ClaimInput = Extract<Input, { kind: "claim" }>;

/** One attempt of a visit or compensation row. */
export type AttemptRef = { execution_id: string; attempt: number };

/** How many rows one sweep or recovery query takes. */
export const SWEEP_BATCH = 500;

/**
 * The runs a flush's transaction locks as it begins, sorted (the lock order): those its inputs
 * name, and those of the attempts a transaction whose commit was lost may have claimed (they are
 * given back in this one: a run another engine holds is waited for, never skipped).
 */
export function runsToLock(inputs: Input[], lost: readonly AttemptRef[] | null): string[] {
  const ids = new Set<string>();
  for (const { execution_id } of lost ?? []) {
    const runId = runOfExecution(execution_id);
    if (runId !== null) ids.add(runId);
  }
  for (const input of inputs) {
    // Usage adds to the runs above the attempt's too: locked with the rest, in the same order.
    if (input.kind === "usage" || input.kind === "report") for (const id of input.usage_runs) ids.add(id);
    if (input.kind === "report") {
      const runId = runOfExecution(input.result.execution_id);
      if (runId !== null) ids.add(runId);
    } else if ("run_id" in input) ids.add(input.run_id);
    else if ("key" in input) ids.add(input.key.run_id);
    else if ("execution_id" in input) {
      const runId = runOfExecution(input.execution_id);
      if (runId !== null) ids.add(runId);
    } else if (input.kind === "event") ids.add(input.event.run_id);
    else if (input.kind === "publish_event") for (const id of input.run_ids) ids.add(id);
    else if (input.kind === "migrate") for (const r of input.runs) ids.add(r.run_id);
  }
  return [...ids].sort();
}

/** The map item rows the inputs' attempts (results, usage, heartbeats, lost claims) are of: read with their runs. */
export function itemsOf(inputs: Input[], lost: readonly AttemptRef[] | null): ItemKey[] {
  const keys: ItemKey[] = [];
  const add = (executionId: string) => {
    const key = itemKeyOf(executionId);
    if (key) keys.push(key);
  };
  for (const { execution_id } of lost ?? []) add(execution_id);
  for (const input of inputs) {
    if (input.kind === "report") add(input.result.execution_id);
    else if ("execution_id" in input && input.execution_id !== undefined) add(input.execution_id);
  }
  return keys;
}
