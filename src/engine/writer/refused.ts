/**
 * What becomes of an input the database refused: a statement error that trying again will not
 * change (a row it will not store). The dispatcher finds that input by applying the failed
 * batch again in halves (`isolate`); only it fails, and everyone else's commit.
 */
import type { Logger } from "pino";
import { DatabaseError } from "../../errors.js";
import type { AttemptRef, Input } from "./inputs.js";

/** A transaction that failed, and the flush that ran in it (null when it failed before that). */
export interface Failure {
  error: unknown;
  flush: { claimed(): AttemptRef[] } | null;
}

/** What isolating needs of the dispatcher. */
export interface Refusing {
  /** Runs one transaction of `inputs` alone (no sweep, no recovery); null when it committed. */
  transact(inputs: Input[]): Promise<Failure | null>;
  /** Queues inputs whose transaction failed for a passing reason again. */
  failedForNow(inputs: Input[], failure: Failure): void;
  logger: Logger;
}

/** A failure worth trying again as is: the database says so (deadlock, lost connection, full disk). */
export function isTransient(e: unknown): boolean {
  return e instanceof DatabaseError && e.transient;
}

/**
 * The inputs of a transaction that failed for good, applied again without the sweep or
 * recovery (which may have been the cause), then in halves, until the input that fails alone
 * is found: the database refuses it, and only it fails. Its caller hears why (a result
 * without one is replaced by a failure of its attempt, see `replacementOf`); every other
 * input commits. A part that fails for a passing reason is queued again like any other.
 */
export async function isolate(d: Refusing, inputs: Input[]): Promise<void> {
  const failure = await d.transact(inputs);
  if (failure === null) return;
  if (isTransient(failure.error)) {
    d.failedForNow(inputs, failure);
    return;
  }
  const [input] = inputs;
  if (input && inputs.length === 1) return refuse(d, input, failure.error);
  const half = Math.ceil(inputs.length / 2);
  await isolate(d, inputs.slice(0, half));
  await isolate(d, inputs.slice(half));
}

/** An input the database refuses: its caller hears why; a result is replaced (`replacementOf`). */
async function refuse(d: Refusing, input: Input, error: unknown): Promise<void> {
  if ("done" in input) return input.done.reject(error);
  d.logger.error({ err: error, input: input.kind }, "skein: the database refused an input");
  const replacement = replacementOf(input, error);
  if (!replacement) return;
  const failure = await d.transact([replacement]);
  // One the database refuses too is dropped: its attempt expires and retries.
  if (failure && isTransient(failure.error)) d.failedForNow([replacement], failure);
}

/**
 * The input to apply instead of one the database refused, or null when there is none. An
 * attempt's result becomes a failure of that attempt, not retried (the same result would be
 * refused again), so the run moves on at once instead of at the attempt's timeout; a resolved
 * payload becomes a template error. An input with a caller is not replaced: the caller hears why.
 */
export function replacementOf(input: Input, error: unknown): Input | null {
  const why = `the database refused to store it (${error instanceof Error ? error.message : String(error)})`;
  switch (input.kind) {
    case "success":
    case "failure":
    case "fail_visit":
      return {
        kind: "failure",
        execution_id: input.execution_id,
        attempt: input.attempt,
        error: {
          message: `the result of attempt ${input.attempt} could not be recorded: ${why}`,
          reason: "invalid_output",
        },
        retryable: false,
      };
    case "payload":
      return {
        kind: "payload_error",
        key: input.key,
        error: { message: `the resolved payload could not be recorded: ${why}`, reason: "template_error" },
      };
    default:
      return null;
  }
}
